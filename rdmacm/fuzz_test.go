package rdmacm

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParseEvent feeds GET_EVENT responses (seeds captured from the 6.1 and
// 6.12 kernels by TestCaptureEventSeedsVM) to parseEvent. Beyond not
// panicking, every decoded field must equal the bytes at its offset in
// struct rdma_ucm_event_resp, private data must never extend past its
// field, and input shorter than the kernel's minimum must be refused.
func FuzzParseEvent(f *testing.F) {
	f.Add(make([]byte, 336))
	f.Add(make([]byte, 323))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := parseEvent(b)
		if len(b) < 324 {
			if err == nil {
				t.Fatalf("%d bytes accepted", len(b))
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		full := make([]byte, 336)
		copy(full, b)
		le := binary.LittleEndian
		if ev.uid != le.Uint64(full[0:]) || ev.handle != le.Uint32(full[8:]) || uint32(ev.typ) != le.Uint32(full[12:]) ||
			ev.status != int32(le.Uint32(full[16:])) {
			t.Fatalf("header decoded as %d %d %d %d", ev.uid, ev.handle, ev.typ, ev.status)
		}
		if ev.conn.QPNum != le.Uint32(full[20:])&0xFFFFFF || ev.conn.QKey != le.Uint32(full[24:]) {
			t.Fatalf("conn QPN/QKey %d %d", ev.conn.QPNum, ev.conn.QKey)
		}
		if n := int(full[284]); !bytes.Equal(ev.conn.PrivateData, full[28:28+n]) || (n == 0) != (ev.conn.PrivateData == nil) {
			t.Fatalf("conn private data %x, field length %d", ev.conn.PrivateData, n)
		}
		want := ConnParam{PrivateData: ev.conn.PrivateData, SRQ: full[285] != 0, ResponderResources: full[286],
			InitiatorDepth: full[287], FlowControl: full[288], RetryCount: full[289], RNRRetryCount: full[290],
			QPNum: ev.conn.QPNum, QKey: ev.conn.QKey}
		if d := cmp.Diff(want, ev.conn); d != "" {
			t.Fatalf("conn params (-want +got):\n%s", d)
		}
		if n := int(full[316]); !bytes.Equal(ev.udPriv, full[60:60+n]) || (n == 0) != (ev.udPriv == nil) {
			t.Fatalf("UD private data %x, field length %d", ev.udPriv, n)
		}
		if ev.ud.QPNum != le.Uint32(full[20:]) || ev.ud.QKey != le.Uint32(full[24:]) ||
			!bytes.Equal(ev.ud.AH.GRH.DGID[:], full[28:44]) || ev.ud.AH.GRH.FlowLabel != le.Uint32(full[44:]) ||
			ev.ud.AH.GRH.SGIDIndex != full[48] || ev.ud.AH.GRH.HopLimit != full[49] || ev.ud.AH.DLID != le.Uint16(full[52:]) ||
			ev.ud.AH.IsGlobal != (full[57] != 0) || ev.ud.AH.PortNum != full[58] {
			t.Fatalf("UD params %+v", ev.ud)
		}
		if ev.ece != (ECE{le.Uint32(full[328:]), le.Uint32(full[332:])}) {
			t.Fatalf("ECE %+v", ev.ece)
		}
		// The Event handed to users takes the view of the ID's QP type.
		for _, ud := range []bool{false, true} {
			id := &ID{qpType: 2}
			if ud {
				id.qpType = 4
			}
			var e Event
			id.fillParams(&e, &ev)
			if ud && !bytes.Equal(e.Param.PrivateData, ev.udPriv) || !ud && !bytes.Equal(e.Param.PrivateData, ev.conn.PrivateData) {
				t.Fatalf("UD %v: event private data %x", ud, e.Param.PrivateData)
			}
			if (e.UD != nil) != (ud && ev.typ == EventEstablished) {
				t.Fatalf("UD %v %v: UD param %v", ud, ev.typ, e.UD)
			}
			_ = e.Err() // must not panic on any status
		}
	})
}
