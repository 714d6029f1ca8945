package uverbs

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// TestXRCOnRXE checks what a device without XRC answers, on each
// transport: the kernel refuses OPEN_XRCD (rxe has no alloc_xrcd), the
// rxe provider refuses XRC send QPs and XRC SRQs by name before the
// kernel, and nothing is left behind.
func TestXRCOnRXE(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.String(), func(t *testing.T) {
			f := newQPFixture(t, tr)

			x, err := f.c.OpenXRCD(XRCDInit{})
			if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "open_xrcd") {
				t.Errorf("OpenXRCD (private): %v, %v; want ErrNotSupported naming open_xrcd", x, err)
			}
			file, err := os.CreateTemp(t.TempDir(), "xrcd")
			if err != nil {
				t.Fatal(err)
			}
			defer file.Close()
			x, err = f.c.OpenXRCD(XRCDInit{File: file, Create: true})
			if !errors.Is(err, ErrNotSupported) {
				t.Errorf("OpenXRCD (shared through a file): %v, %v; want ErrNotSupported", x, err)
			}

			qp, err := f.pd.CreateQP(QPInitAttr{Type: QPTypeXRCSend, SendCQ: f.cq, Cap: QPCap{MaxSendWr: 4, MaxSendSGE: 1}})
			if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "rxe: XRC_SEND QPs are not supported") {
				t.Errorf("CreateQP(XRC_SEND): %v, %v; want ErrNotSupported from the rxe provider", qp, err)
			}

			// A stand-in domain (rxe opens none) reaches the provider's
			// refusal; the kernel never sees it.
			srq, err := f.pd.CreateXRCSRQ(&XRCD{ctx: f.c, ref: &cleanupRef{}}, f.cq, SRQAttr{MaxWr: 4, MaxSGE: 1})
			if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "rxe: XRC SRQs are not supported") {
				t.Errorf("CreateXRCSRQ: %v, %v; want ErrNotSupported from the rxe provider", srq, err)
			}

			rqp, err := (&XRCD{ctx: f.c, ref: &cleanupRef{}}).CreateQP(QPInitAttr{Type: QPTypeXRCRecv})
			if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "rxe: XRC_RECV QPs are not supported") {
				t.Errorf("XRCD.CreateQP: %v, %v; want ErrNotSupported from the rxe provider", rqp, err)
			}

			// The basic SRQ still goes through the typed hook.
			basic, err := f.pd.CreateSRQ(SRQAttr{MaxWr: 4, MaxSGE: 1})
			if err != nil {
				t.Fatalf("CreateSRQ: %v", err)
			}
			if err := basic.Close(); err != nil {
				t.Errorf("SRQ.Close: %v", err)
			}
		})
	}
}
