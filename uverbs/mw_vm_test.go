package uverbs

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

func TestMWReregDmabufResize(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.String(), func(t *testing.T) {
			c := openRXE(t, tr)
			pd, err := c.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			defer pd.Close()
			for _, typ := range []MWType{MWType1, MWType2} {
				mw, err := pd.AllocMW(typ)
				if err != nil {
					t.Fatalf("type %d: %v", typ, err)
				}
				if mw.Rkey() == 0 {
					t.Errorf("type %d window has rkey 0", typ)
				}
				if err := mw.Close(); err != nil {
					t.Fatal(err)
				}
				if err := mw.Close(); err != nil {
					t.Errorf("second Close: %v", err)
				}
			}
			if _, err := pd.AllocMW(3); err == nil {
				t.Error("MW type 3 accepted")
			}

			buf, err := AllocBuffer(8192)
			if err != nil {
				t.Fatal(err)
			}
			defer buf.Close()
			mr, err := pd.RegisterBuffer(buf, 0, 8192, AccessLocalWrite)
			if err != nil {
				t.Fatal(err)
			}
			err = mr.ReReg(ReregAccess, nil, AccessLocalWrite|AccessRemoteRead)
			// 6.1's rxe has no rereg, 6.12's changes access (TestMRReReg).
			switch {
			case vmenv.KernelName() == "6.1":
				if !errors.Is(err, ErrNotSupported) {
					t.Errorf("rereg_mr on 6.1: %v, want ErrNotSupported", err)
				}
			case err != nil:
				t.Errorf("rereg_mr: %v", err)
			case mr.Access() != AccessLocalWrite|AccessRemoteRead:
				t.Errorf("after rereg access %v", mr.Access())
			}
			if err := mr.Close(); err != nil {
				t.Fatal(err)
			}

			// rxe has no dma-buf support: a memfd stands in for the fd.
			fd, err := unix.MemfdCreate("not-a-dmabuf", unix.MFD_CLOEXEC)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			if _, err := pd.RegisterDmabuf(fd, 0, 4096, 0, AccessLocalWrite); !errors.Is(err, ErrNotSupported) {
				t.Errorf("dma-buf MR on rxe: %v, want ErrNotSupported", err)
			}

			cq, err := c.CreateCQ(16, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cq.Close()
			if err := cq.Resize(100); err != nil {
				t.Fatal(err)
			}
			if cq.Capacity() < 100 {
				t.Errorf("capacity %d after resizing to 100", cq.Capacity())
			}
			if err := cq.Resize(0); err == nil {
				t.Error("resize to 0 accepted")
			}
		})
	}
}
