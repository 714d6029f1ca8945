package uverbs

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// The VM's rxe0: an RC QP's endpoint with its IPv4-mapped RoCE v2 GID, and
// a 64 KiB MR (the fuzz seeds are the bytes of such values as MarshalBinary
// gave them on rxe0 and rxe1 under 6.12).
var (
	vmEndpoint = Endpoint{QPN: 0x11, PSN: 0x4d2, GID: GID(netip.MustParseAddr("::ffff:10.99.0.1").As16())}
	vmRemote   = RemoteBuffer{Addr: 0x7f3a5c000000, Rkey: 0x1a2b, Length: 1 << 16}
)

func TestExchangeWireForm(t *testing.T) {
	b, err := vmEndpoint.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0, 0, 0, 0x11, 0, 0, 0x04, 0xd2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 99, 0, 1}
	if diff := cmp.Diff(want, b); diff != "" {
		t.Errorf("Endpoint wire form (-want +got):\n%s", diff)
	}
	var e Endpoint
	if err := e.UnmarshalBinary(b); err != nil || e != vmEndpoint {
		t.Errorf("round trip: %+v, %v", e, err)
	}
	b, err = vmRemote.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	want = []byte{0, 0, 0x7f, 0x3a, 0x5c, 0, 0, 0, 0, 0, 0x1a, 0x2b, 0, 0, 0, 0, 0, 1, 0, 0}
	if diff := cmp.Diff(want, b); diff != "" {
		t.Errorf("RemoteBuffer wire form (-want +got):\n%s", diff)
	}
	var r RemoteBuffer
	if err := r.UnmarshalBinary(b); err != nil || r != vmRemote {
		t.Errorf("round trip: %+v, %v", r, err)
	}
}

// TestExchangeBadInput: the refusals of the wire forms and the bounds
// checks, each an EINVAL naming what is wrong.
func TestExchangeBadInput(t *testing.T) {
	long := bytes.Repeat([]byte{0}, EndpointSize+1)
	wideQPN := append([]byte{1, 0, 0, 0}, make([]byte, EndpointSize-4)...)
	widePSN := append([]byte{0, 0, 0, 1, 0xff}, make([]byte, EndpointSize-5)...)
	wrap := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xf0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0x11}
	mr := &MR{mem: make([]byte, 4096), iova: 0x1000, lkey: 1, rkey: 2}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"Endpoint too short", new(Endpoint).UnmarshalBinary(long[:3]), "3 bytes, want 26"},
		{"Endpoint too long", new(Endpoint).UnmarshalBinary(long), "27 bytes, want 26"},
		{"Endpoint QPN over 24 bits", new(Endpoint).UnmarshalBinary(wideQPN), "QPN 0x1000000"},
		{"Endpoint PSN over 24 bits", new(Endpoint).UnmarshalBinary(widePSN), "PSN 0xff000000"},
		{"Endpoint marshal QPN over 24 bits", func() error { _, err := Endpoint{QPN: 1 << 24}.MarshalBinary(); return err }(), "wider than 24 bits"},
		{"RemoteBuffer too short", new(RemoteBuffer).UnmarshalBinary(wrap[:19]), "19 bytes, want 20"},
		{"RemoteBuffer wraps", new(RemoteBuffer).UnmarshalBinary(wrap), "wraps"},
		{"RemoteBuffer marshal wraps", func() error { _, err := RemoteBuffer{Addr: 1 << 63, Length: 1 << 63}.MarshalBinary(); return err }(), "wraps"},
		{"Slice past the end", func() error { _, err := vmRemote.Slice(1<<16-8, 9); return err }(), "outside the 65536-byte buffer"},
		{"Slice offset past the end", func() error { _, err := vmRemote.Slice(1<<17, 0); return err }(), "outside"},
		{"Slice wrapping", func() error { _, err := vmRemote.Slice(8, ^uint64(0)); return err }(), "outside"},
		{"SGE past the end", func() error { _, err := mr.SGE(4000, 97); return err }(), "MR.SGE(4000, 97): outside the 4096-byte MR"},
		{"SGE negative offset", func() error { _, err := mr.SGE(-1, 1); return err }(), "outside"},
		{"SGE negative length", func() error { _, err := mr.SGE(0, -1); return err }(), "outside"},
		{"RemoteBuffer past the end", func() error { _, err := mr.RemoteBuffer(1, 4096); return err }(), "MR.RemoteBuffer(1, 4096)"},
		{"SGE of a nil MR", func() error { _, err := (*MR)(nil).SGE(0, 1); return err }(), "nil MR"},
	} {
		if !errors.Is(tc.err, unix.EINVAL) || !bytes.Contains([]byte(tc.err.Error()), []byte(tc.want)) {
			t.Errorf("%s: %v, want EINVAL saying %q", tc.name, tc.err, tc.want)
		}
	}
	sge, err := mr.SGE(96, 4000)
	if err != nil || sge != (SGE{Addr: 0x1000 + 96, Length: 4000, Lkey: 1}) {
		t.Errorf("SGE(96, 4000) = %+v, %v", sge, err)
	}
	rb, err := mr.RemoteBuffer(0, 4096)
	if err != nil || rb != (RemoteBuffer{Addr: 0x1000, Rkey: 2, Length: 4096}) {
		t.Errorf("RemoteBuffer(0, 4096) = %+v, %v", rb, err)
	}
	if s, err := rb.Slice(4088, 8); err != nil || s != (RemoteBuffer{Addr: 0x1000 + 4088, Rkey: 2, Length: 8}) {
		t.Errorf("Slice(4088, 8) = %+v, %v", s, err)
	}
}

// FuzzExchangeUnmarshal: whatever bytes arrive from a peer, UnmarshalBinary
// either refuses them or accepts exactly what MarshalBinary gives back.
func FuzzExchangeUnmarshal(f *testing.F) {
	e, _ := vmEndpoint.MarshalBinary()
	r, _ := vmRemote.MarshalBinary()
	f.Add(e)
	f.Add(r)
	f.Fuzz(func(t *testing.T, b []byte) {
		var ep Endpoint
		if ep.UnmarshalBinary(b) == nil {
			out, err := ep.MarshalBinary()
			if err != nil || !bytes.Equal(out, b) {
				t.Fatalf("Endpoint %x: unmarshalled to %+v, marshals to %x, %v", b, ep, out, err)
			}
		}
		var rb RemoteBuffer
		if rb.UnmarshalBinary(b) == nil {
			out, err := rb.MarshalBinary()
			if err != nil || !bytes.Equal(out, b) {
				t.Fatalf("RemoteBuffer %x: unmarshalled to %+v, marshals to %x, %v", b, rb, out, err)
			}
		}
	})
}
