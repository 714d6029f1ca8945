package transport

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
)

// fakeKernel records what it is sent and answers with scripted errnos.
type fakeKernel struct {
	ioctlErrs []error // per call, in order; nil entries mean success
	writeErrs []error
	ioctls    []Exchange
	wireHdrs  [][]byte
	writes    [][]byte
}

func (f *fakeKernel) Ioctl(fd int, q *Ioctl, driver abi.DriverID) error {
	q.w.hdr = q.header(driver)
	f.wireHdrs = append(f.wireHdrs, wireBytes(q))
	f.ioctls = append(f.ioctls, recordIoctl(q, driver))
	var err error
	if len(f.ioctlErrs) > 0 {
		err, f.ioctlErrs = f.ioctlErrs[0], f.ioctlErrs[1:]
	}
	return err
}

func (f *fakeKernel) Write(fd int, buf, resp []byte) error {
	f.writes = append(f.writes, append([]byte(nil), buf...))
	var err error
	if len(f.writeErrs) > 0 {
		err, f.writeErrs = f.writeErrs[0], f.writeErrs[1:]
	}
	return err
}

func wireBytes(q *Ioctl) []byte {
	n := hdrSize + attrSize*q.n
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&q.w)), n)...)
}

func TestIoctlEncodingCreateCQ(t *testing.T) {
	// An rxe CREATE_CQ as rdma-core 44 sends it, attributes in its order.
	var cqe uint32
	var mi [16]byte
	q := NewIoctl(abi.ObjectCQ, abi.MethodCQCreate)
	q.NewHandle(abi.AttrCreateCQHandle)
	q.Out(abi.AttrCreateCQRespCQE, (*[4]byte)(unsafe.Pointer(&cqe))[:])
	q.U32(abi.AttrCreateCQCQE, 16)
	q.U64(abi.AttrCreateCQUserHandle, 0x1122334455667788)
	q.U32(abi.AttrCreateCQCompVector, 0)
	q.Optional(q.FD(abi.AttrCreateCQEventFD, 5))
	q.FD(abi.AttrCreateCQCompChannel, 7)
	q.Out(abi.AttrUHWOut, mi[:])
	f := &fakeKernel{}
	if err := NewConn(3, abi.DriverRXE, Auto, f).Ioctl("create_cq", q); err != nil {
		t.Fatal(err)
	}
	w := f.wireHdrs[0]
	hdr := abi.IoctlHdr{
		Length: uint16(binary.LittleEndian.Uint16(w[0:])), ObjectID: binary.LittleEndian.Uint16(w[2:]),
		MethodID: binary.LittleEndian.Uint16(w[4:]), NumAttrs: binary.LittleEndian.Uint16(w[6:]),
		Reserved1: binary.LittleEndian.Uint64(w[8:]), DriverID: binary.LittleEndian.Uint32(w[16:]),
		Reserved2: binary.LittleEndian.Uint32(w[20:]),
	}
	want := abi.IoctlHdr{Length: 152, ObjectID: 3, MethodID: 0, NumAttrs: 8, DriverID: 14}
	if diff := cmp.Diff(want, hdr); diff != "" {
		t.Errorf("header (-want +got):\n%s", diff)
	}
	type attr struct {
		ID, Len, Flags uint16
		Data           uint64
	}
	var got []attr
	for i := 0; i < 8; i++ {
		a := w[24+16*i:]
		got = append(got, attr{binary.LittleEndian.Uint16(a), binary.LittleEndian.Uint16(a[2:]),
			binary.LittleEndian.Uint16(a[4:]), binary.LittleEndian.Uint64(a[8:])})
	}
	wantAttrs := []attr{
		{0, 0, 1, 0},
		{6, 4, 1, 0}, // pointer: filled only by the real kernel path
		{1, 4, 1, 16},
		{2, 8, 1, 0x1122334455667788},
		{4, 4, 1, 0},
		{7, 0, 0, 5},
		{3, 0, 1, 7},
		{0x1001, 16, 1, 0},
	}
	if diff := cmp.Diff(wantAttrs, got); diff != "" {
		t.Errorf("attributes (-want +got):\n%s", diff)
	}
}

func TestIoctlInlineThreshold(t *testing.T) {
	q := NewIoctl(0, 0)
	i8 := q.In(1, []byte{1, 2, 3, 4, 5, 6, 7, 8})
	i9 := q.In(2, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9})
	if q.kinds[i8] != kindInline || q.w.attrs[i8].Data != 0x0807060504030201 {
		t.Errorf("8-byte PTR_IN: kind %v data %#x, want inline 0x0807060504030201", q.kinds[i8], q.w.attrs[i8].Data)
	}
	if q.kinds[i9] != kindPtrIn || q.w.attrs[i9].Len != 9 {
		t.Errorf("9-byte PTR_IN: kind %v len %d, want ptr-in 9", q.kinds[i9], q.w.attrs[i9].Len)
	}
}

func TestIoctlTooManyAttrs(t *testing.T) {
	q := NewIoctl(0, 0)
	for i := 0; i <= MaxAttrs; i++ {
		q.U32(uint16(i), 0)
	}
	err := NewConn(3, abi.DriverRXE, Auto, &fakeKernel{}).Ioctl("x", q)
	if err == nil {
		t.Fatal("21 attributes accepted")
	}
}

func TestWriteFraming(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    Write
		want string
	}{{
		// The rxe doorbell as rdma-core 44 rings it: POST_SEND, in_words 8,
		// out_words 1, qp_handle 5, no WRs, wqe_size 128.
		name: "post_send doorbell",
		w: Write{Cmd: abi.CmdPostSend, In: []byte{0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 128, 0, 0, 0},
			CoreIn: 24, Out: make([]byte, 4), CoreOut: 4},
		want: "1c000000" + "0800" + "0100" + "0000000000000000" + "05000000" + "00000000" + "00000000" + "80000000",
	}, {
		name: "ex query device",
		w:    Write{Cmd: abi.CmdFlagExtended | abi.ExCmdQueryDevice, In: make([]byte, 8), CoreIn: 8, Out: make([]byte, 304), CoreOut: 304},
		want: "01000080" + "0100" + "2600" + "0000000000000000" + "0000" + "0000" + "00000000" + "0000000000000000",
	}, {
		name: "get_context with driver data",
		w:    Write{Cmd: abi.CmdGetContext, In: make([]byte, 8+32), CoreIn: 8, Out: make([]byte, 8+72), CoreOut: 8},
		want: "00000000" + "0c00" + "1400" + "0000000000000000" + "0000000000000000000000000000000000000000000000000000000000000000",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			buf, err := tc.w.frame()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, hex.EncodeToString(buf)); diff != "" {
				t.Errorf("frame (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteFramingBadSizes(t *testing.T) {
	for _, w := range []Write{
		{Cmd: abi.CmdAllocPD, In: make([]byte, 6), CoreIn: 6},
		{Cmd: abi.CmdAllocPD, In: make([]byte, 8), CoreIn: 8, Out: make([]byte, 3), CoreOut: 3},
		{Cmd: abi.CmdAllocPD, In: make([]byte, 4), CoreIn: 4, Out: make([]byte, 4), CoreOut: 4},
		{Cmd: abi.CmdFlagExtended | 1, In: make([]byte, 12), CoreIn: 12},
		{Cmd: abi.CmdAllocPD, In: make([]byte, 8), CoreIn: 16},
	} {
		if _, err := w.frame(); err == nil {
			t.Errorf("frame(%+v) accepted", w)
		}
	}
}

func TestFallback(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mode       Mode
		ioctlErrs  []error
		calls      int // IoctlOrWrite calls made
		wantIoctls int
		wantWrites int // fallback invocations
		wantErrno  unix.Errno
	}{
		{"success", Auto, nil, 2, 2, 0, 0},
		{"enotty disables ioctl for good", Auto, []error{unix.ENOTTY}, 3, 1, 3, 0},
		{"eprotonosupport remembered per op", Auto, []error{unix.EPROTONOSUPPORT}, 3, 1, 3, 0},
		{"other errors are the answer", Auto, []error{unix.EINVAL}, 1, 1, 0, unix.EINVAL},
		{"ioctl mode never falls back", IoctlOnly, []error{unix.ENOTTY}, 1, 1, 0, unix.ENOTTY},
		{"write mode never ioctls", WriteOnly, nil, 2, 0, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeKernel{ioctlErrs: tc.ioctlErrs}
			c := NewConn(3, abi.DriverRXE, tc.mode, f)
			fallbacks := 0
			var err error
			for i := 0; i < tc.calls; i++ {
				err = c.IoctlOrWrite("query_port", OpQueryPort, NewIoctl(0, 2), func() error { fallbacks++; return nil })
			}
			if len(f.ioctls) != tc.wantIoctls || fallbacks != tc.wantWrites {
				t.Errorf("ioctls %d, fallbacks %d; want %d, %d", len(f.ioctls), fallbacks, tc.wantIoctls, tc.wantWrites)
			}
			if tc.wantErrno != 0 && !errors.Is(err, tc.wantErrno) {
				t.Errorf("err = %v, want %v", err, tc.wantErrno)
			}
			if tc.wantErrno == 0 && err != nil {
				t.Errorf("err = %v", err)
			}
		})
	}
}

func TestEprotonosupportIsPerOp(t *testing.T) {
	f := &fakeKernel{ioctlErrs: []error{unix.EPROTONOSUPPORT}}
	c := NewConn(3, abi.DriverRXE, Auto, f)
	_ = c.IoctlOrWrite("create_cq", OpCreateCQ, NewIoctl(3, 0), func() error { return nil })
	_ = c.IoctlOrWrite("query_port", OpQueryPort, NewIoctl(0, 2), func() error { return nil })
	if len(f.ioctls) != 2 {
		t.Errorf("after EPROTONOSUPPORT for one op, another op sent %d ioctls in all, want 2", len(f.ioctls))
	}
}

func TestWriteViaInvokeWrite(t *testing.T) {
	// The probe answers ENOSPC (method present), then the command succeeds.
	f := &fakeKernel{ioctlErrs: []error{unix.ENOSPC, nil}}
	c := NewConn(3, abi.DriverRXE, Auto, f)
	in := make([]byte, 8)
	out := make([]byte, 4)
	if err := c.Write("alloc_pd", &Write{Cmd: abi.CmdAllocPD, In: in, CoreIn: 8, Out: out, CoreOut: 4}); err != nil {
		t.Fatal(err)
	}
	if len(f.writes) != 0 || len(f.ioctls) != 2 {
		t.Fatalf("writes %d ioctls %d, want 0 and 2", len(f.writes), len(f.ioctls))
	}
	// rdma-core 44's INVOKE_WRITE(ALLOC_PD): WRITE_CMD const 3, CORE_IN 8 bytes inline, CORE_OUT 4-byte pointer.
	got := f.ioctls[1]
	want := Exchange{Op: "ioctl", Object: 0, Method: 0, Driver: 14, Attrs: []AttrRecord{
		{ID: abi.AttrWriteCmd, Kind: "in", Flags: 1, Len: 8, Data: 3},
		{ID: abi.AttrCoreIn, Kind: "in", Flags: 1, Len: 8},
		{ID: abi.AttrCoreOut, Kind: "ptr-out", Flags: 1, Len: 4},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("INVOKE_WRITE (-want +got):\n%s", diff)
	}
	// A kernel without INVOKE_WRITE gets a plain write().
	f = &fakeKernel{ioctlErrs: []error{unix.EPROTONOSUPPORT}}
	c = NewConn(3, abi.DriverRXE, Auto, f)
	for i := 0; i < 2; i++ {
		if err := c.Write("alloc_pd", &Write{Cmd: abi.CmdAllocPD, In: in, CoreIn: 8, Out: out, CoreOut: 4}); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.writes) != 2 || len(f.ioctls) != 1 {
		t.Errorf("writes %d ioctls %d, want 2 and 1 (probe once)", len(f.writes), len(f.ioctls))
	}
}

func TestErrors(t *testing.T) {
	f := &fakeKernel{ioctlErrs: []error{unix.EOPNOTSUPP}}
	err := NewConn(3, abi.DriverRXE, Auto, f).Ioctl("query_context", NewIoctl(0, 4))
	var e *Error
	if !errors.As(err, &e) || e.Verb != "query_context" || e.Transport != "ioctl" {
		t.Fatalf("err = %#v", err)
	}
	if !errors.Is(err, unix.EOPNOTSUPP) || !errors.Is(err, ErrNotSupported) {
		t.Errorf("errors.Is fails for %v", err)
	}
	if errors.Is(&Error{Verb: "x", Errno: unix.EINVAL}, ErrNotSupported) {
		t.Error("EINVAL matches ErrNotSupported")
	}
	if got, want := err.Error(), "uverbs query_context (ioctl): operation not supported"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"": Auto, "auto": Auto, "ioctl": IoctlOnly, "WRITE": WriteOnly} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseMode("both"); err == nil {
		t.Error(`ParseMode("both") accepted`)
	}
}

func TestTrace(t *testing.T) {
	var b strings.Builder
	old, oldOn := traceOut, traceOn
	traceOut, traceOn = &b, true
	defer func() { traceOut, traceOn = old, oldOn }()
	f := &fakeKernel{ioctlErrs: []error{unix.EINVAL}}
	c := NewConn(3, abi.DriverRXE, WriteOnly, f)
	q := NewIoctl(abi.ObjectCQ, abi.MethodCQDestroy)
	q.Handle(abi.AttrDestroyCQHandle, 9)
	c.mode = Auto
	_ = c.Ioctl("destroy_cq", q)
	_ = c.rawWrite("dealloc_pd", &Write{Cmd: abi.CmdDeallocPD, In: make([]byte, 4), CoreIn: 4})
	got := b.String()
	for _, want := range []string{"goverbs: ioctl destroy_cq obj=CQ method=1 attrs=[0x0:idr=0x9] -> invalid argument (",
		"goverbs: write dealloc_pd cmd=0x4 in=4B out=0B -> ok ("} {
		if !strings.Contains(got, want) {
			t.Errorf("trace %q lacks %q", got, want)
		}
	}
}

// BenchmarkTraceOff shows the trace switch costs nothing when off: the
// command path allocates only what the command itself needs.
func BenchmarkTraceOff(b *testing.B) {
	c := NewConn(3, abi.DriverRXE, Auto, nopKernel{})
	q := NewIoctl(abi.ObjectCQ, abi.MethodCQDestroy)
	q.Handle(abi.AttrDestroyCQHandle, 9)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := c.Ioctl("destroy_cq", q); err != nil {
			b.Fatal(err)
		}
	}
}

type nopKernel struct{}

func (nopKernel) Ioctl(int, *Ioctl, abi.DriverID) error { return nil }
func (nopKernel) Write(int, []byte, []byte) error       { return nil }

// TestIoctlReuse: a freed request comes back empty (no attributes, no
// error, no INVOKE_WRITE marking, none of the last caller's buffers), and
// taking and freeing one allocates nothing.
func TestIoctlReuse(t *testing.T) {
	buf := make([]byte, 16)
	q := NewIoctl(abi.ObjectQP, abi.MethodQPCreate)
	for range MaxAttrs + 1 { // one too many: q.Err is set
		q.Out(0x10, buf)
	}
	q.invokeWrite, q.writeCmd = true, 7
	if q.Err() == nil {
		t.Fatal("more than MaxAttrs attributes: no error")
	}
	q.Free()
	for range 10 {
		r := NewIoctl(abi.ObjectCQ, abi.MethodCQDestroy)
		if r.Object != abi.ObjectCQ || r.Method != abi.MethodCQDestroy || r.NumAttrs() != 0 || r.Err() != nil || r.invokeWrite || r.writeCmd != 0 {
			t.Fatalf("reused request: object %d method %d, %d attributes, err %v, invokeWrite %v/%d",
				r.Object, r.Method, r.NumAttrs(), r.Err(), r.invokeWrite, r.writeCmd)
		}
		for i, b := range r.bufs {
			if b != nil {
				t.Fatalf("reused request still holds buffer %d", i)
			}
		}
		r.Handle(0x1, 3)
		if h := r.header(abi.DriverRXE); h.NumAttrs != 1 || int(h.Length) != hdrSize+attrSize {
			t.Fatalf("header of a one-attribute request: %+v", h)
		}
		r.Free()
	}
	var nilQ *Ioctl
	nilQ.Free() // no panic
	if raceOn {
		return
	}
	if n := testing.AllocsPerRun(100, func() {
		r := NewIoctl(abi.ObjectQP, abi.MethodQPDestroy)
		r.Handle(0x1, 1)
		r.Free()
	}); n != 0 {
		t.Errorf("NewIoctl + Free: %v allocations, want 0", n)
	}
}

// blockingKernel holds each command until release is closed.
type blockingKernel struct {
	entered chan struct{}
	release chan struct{}
}

func (k blockingKernel) Ioctl(int, *Ioctl, abi.DriverID) error {
	k.entered <- struct{}{}
	<-k.release
	return nil
}

func (k blockingKernel) Write(int, []byte, []byte) error {
	k.entered <- struct{}{}
	<-k.release
	return nil
}

// TestShut: Shut closes the file only once no command is using its
// descriptor, and every command and UseFD after it fails with ErrClosed
// without reaching the kernel (whose descriptor number may be reused).
func TestShut(t *testing.T) {
	k := blockingKernel{entered: make(chan struct{}, 1), release: make(chan struct{})}
	c := NewConn(99, abi.DriverRXE, WriteOnly, k)
	cmdDone := make(chan error)
	go func() {
		cmdDone <- c.Write("query_port", &Write{Cmd: abi.CmdQueryPort, In: make([]byte, 8), CoreIn: 8})
	}()
	<-k.entered // the command is inside the kernel

	closed := make(chan struct{})
	shutDone := make(chan error)
	go func() {
		shutDone <- c.Shut(func() error { close(closed); return nil })
	}()
	select {
	case <-closed:
		t.Fatal("Shut closed the file under a command in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(k.release)
	if err := <-cmdDone; err != nil {
		t.Fatalf("the command in flight: %v", err)
	}
	if err := <-shutDone; err != nil {
		t.Fatalf("Shut: %v", err)
	}
	<-closed

	if err := c.Write("query_port", &Write{Cmd: abi.CmdQueryPort, In: make([]byte, 8), CoreIn: 8}); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Shut: %v, want ErrClosed", err)
	}
	c2 := NewConn(99, abi.DriverRXE, IoctlOnly, k)
	c2.Shut(func() error { return nil })
	if err := c2.Ioctl("query_port", NewIoctl(abi.ObjectDevice, abi.MethodQueryPort)); !errors.Is(err, ErrClosed) {
		t.Errorf("Ioctl after Shut: %v, want ErrClosed", err)
	}
	if err := c.UseFD(func(int) error { t.Error("UseFD ran fn after Shut"); return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("UseFD after Shut: %v, want ErrClosed", err)
	}
	calls := 0
	if err := c.Shut(func() error { calls++; return nil }); err != nil || calls != 0 {
		t.Errorf("second Shut: %v, ran closeFile %d times", err, calls)
	}
	select {
	case <-k.entered:
		t.Error("a command after Shut reached the kernel")
	default:
	}
}
