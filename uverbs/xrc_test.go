package uverbs

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"sync"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/sysfs"
	"github.com/goverbs/goverbs/sysfs/sysfstest"
)

// xrcTestDriver is a driver ID no kernel uses, for a test-only provider
// that accepts XRC (no device of the test VM has XRC).
const xrcTestDriver abi.DriverID = 0x7fff0001

type xrcTestProvider struct{}

func (xrcTestProvider) Name() string                { return "xrctest" }
func (xrcTestProvider) DriverID() abi.DriverID      { return xrcTestDriver }
func (xrcTestProvider) ABIVersions() (int, int)     { return 0, 99 }
func (xrcTestProvider) MatchName(ibdev string) bool { return false }
func (xrcTestProvider) NewContext(provider.Device) (provider.Context, error) {
	return xrcTestContext{}, nil
}

type xrcTestContext struct{}

func (xrcTestContext) GetContextData() (in, out []byte)  { return nil, nil }
func (xrcTestContext) Started(*transport.Conn) error     { return nil }
func (xrcTestContext) FirmwareVersion(raw uint64) string { return "" }
func (xrcTestContext) Close() error                      { return nil }
func (xrcTestContext) NewCQ(int) (provider.CQ, error)    { return &xrcTestCQ{}, nil }
func (xrcTestContext) NewQP(init provider.QPInit) (provider.QP, error) {
	return xrcTestQP{init: init}, nil
}
func (xrcTestContext) NewTypedSRQ(init provider.SRQInit) (provider.SRQ, error) {
	if init.Type == abi.SRQTypeXRC && init.CQ == nil {
		return nil, unix.EINVAL
	}
	return xrcTestSRQ{}, nil
}

// xrcTestObj is every provider object of the test provider: no driver
// data, nothing mapped.
type xrcTestObj struct{}

func (xrcTestObj) CreateData() (in, out []byte)               { return nil, nil }
func (xrcTestObj) Created(*transport.Conn, uint32, int) error { return nil }
func (xrcTestObj) Destroyed() error                           { return nil }
func (xrcTestObj) ModifyData() []byte                         { return nil }
func (xrcTestObj) Modified(*transport.Conn, bool) error       { return nil }

// xrcTestCQ records whether uverbs asked it to be single-threaded.
type xrcTestCQ struct {
	xrcTestObj
	solo bool
}

func (cq *xrcTestCQ) SetSingleThreaded() bool { cq.solo = true; return true }

// xrcTestQP keeps what NewQP was given.
type xrcTestQP struct {
	xrcTestObj
	init provider.QPInit
}

func (xrcTestQP) Created(*transport.Conn, uint32, uint32, provider.QPInit) error { return nil }

type xrcTestSRQ struct{ xrcTestObj }

func (xrcTestSRQ) Created(*transport.Conn, uint32, uint32, uint32) error { return nil }

func init() { provider.Register(xrcTestProvider{}) }

// openRecording opens a context of the test provider on a
// recordingKernel; the test's cleanup closes it.
func openRecording(t *testing.T) (*Context, *recordingKernel) {
	t.Helper()
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	k := &recordingKernel{asyncFD: efd}
	tree := sysfstest.MustLoad("../sysfs/testdata/rxe-6.12.txtar")
	dev := deviceInfo{name: "xrc0", charDev: "/dev/null", abiVersion: 1, driver: xrcTestDriver, ports: []int{1}, sys: sysfs.NewFS(tree)}
	c, err := openDevice(dev, &options{transport: TransportWrite, kernel: k})
	if err != nil {
		unix.Close(efd)
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, k
}

// recordingKernel answers write() commands as a kernel with XRC would,
// with the handles libibverbs' golden run got (PD 2, CQ 5, XRCD 9), and
// keeps every command it was sent.
type recordingKernel struct {
	mu      sync.Mutex // cleanups send commands from their own goroutine
	writes  [][]byte
	asyncFD int
}

func (k *recordingKernel) Ioctl(int, *transport.Ioctl, abi.DriverID) error { return unix.ENOTTY }

// count returns how many commands cmd (CmdDeregMR, ...) were sent.
func (k *recordingKernel) count(cmd uint32) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, w := range k.writes {
		if binary.LittleEndian.Uint32(w)&abi.CmdCommandMask == cmd {
			n++
		}
	}
	return n
}

func (k *recordingKernel) Write(fd int, buf, resp []byte) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.writes = append(k.writes, append([]byte(nil), buf...))
	clear(resp)
	put := func(off int, v uint32) {
		if len(resp) >= off+4 {
			binary.LittleEndian.PutUint32(resp[off:], v)
		}
	}
	switch binary.LittleEndian.Uint32(buf) {
	case abi.CmdGetContext:
		put(0, uint32(k.asyncFD)) // async_fd
	case abi.CmdAllocPD:
		put(0, 2)
	case abi.CmdCreateCQ:
		put(0, 5)
		put(4, 16)
	case abi.CmdOpenXRCD:
		put(0, 9)
	case abi.CmdCreateXSRQ:
		put(0, 11) // srq_handle
		put(4, 31)
		put(8, 1)
		put(12, 0x42) // srqn
	case abi.CmdCreateQP:
		put(0, 12) // qp_handle
		put(4, 0x1234)
	}
	return nil
}

// last returns the last command sent with its header: the command number
// and the core request after the 8-byte ib_uverbs_cmd_hdr.
func (k *recordingKernel) last(t *testing.T) (uint32, []byte) {
	t.Helper()
	if len(k.writes) == 0 {
		t.Fatal("no command sent")
	}
	b := k.writes[len(k.writes)-1]
	return binary.LittleEndian.Uint32(b), b[8:]
}

func goldenXSRQCoreRequest(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile("../provider/mlx5/testdata/libmlx5/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		SRQs []struct {
			XRC        int    `json:"xrc"`
			CoreReqHex string `json:"core_req_hex"`
		} `json:"srqs"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	for _, s := range g.SRQs {
		if s.XRC != 0 {
			b, err := hex.DecodeString(s.CoreReqHex)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatal("golden.json has no XRC SRQ")
	return nil
}

// TestXRCCommandEncoding checks the write() commands of OpenXRCD,
// CreateXRCSRQ, XRC_SEND and XRC_RECV CreateQP byte for byte: CREATE_XSRQ against
// what libibverbs sent for libmlx5's XRC SRQ (golden.json, recorded with
// the same handles), the others against the kernel's structs.
func TestXRCCommandEncoding(t *testing.T) {
	c, k := openRecording(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(16, nil)
	if err != nil {
		t.Fatal(err)
	}

	file, err := os.CreateTemp(t.TempDir(), "xrcd")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	x, err := c.OpenXRCD(XRCDInit{File: file, Create: true, Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	cmd, req := k.last(t)
	wantOpen := abi.OpenXRCD{FD: uint32(file.Fd()), OFlags: unix.O_CREAT | unix.O_EXCL}
	gotOpen := *(*abi.OpenXRCD)(unsafe.Pointer(&req[0]))
	gotOpen.Response = 0
	if cmd != abi.CmdOpenXRCD || len(req) != int(unsafe.Sizeof(wantOpen)) {
		t.Errorf("open_xrcd: command %d with %d bytes, want %d with %d", cmd, len(req), abi.CmdOpenXRCD, unsafe.Sizeof(wantOpen))
	}
	if diff := cmp.Diff(wantOpen, gotOpen); diff != "" {
		t.Errorf("open_xrcd request (-want +got):\n%s", diff)
	}
	if x.Handle() != 9 {
		t.Errorf("XRCD handle %d, the kernel answered 9", x.Handle())
	}
	if _, err := c.OpenXRCD(XRCDInit{}); err != nil {
		t.Fatal(err)
	}
	if _, req = k.last(t); binary.LittleEndian.Uint32(req[8:]) != ^uint32(0) || binary.LittleEndian.Uint32(req[12:]) != 0 {
		t.Errorf("private open_xrcd: fd %#x oflags %#x, want -1 and 0", binary.LittleEndian.Uint32(req[8:]), binary.LittleEndian.Uint32(req[12:]))
	}

	// libmlx5 asks for its ring size - 1 (31 for 8 work requests).
	srq, err := pd.CreateXRCSRQ(x, cq, SRQAttr{MaxWr: 31, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	cmd, req = k.last(t)
	want := goldenXSRQCoreRequest(t)
	got := append([]byte(nil), req...)
	clear(got[0:16]) // response pointer and user handle, masked in golden.json too
	if cmd != abi.CmdCreateXSRQ {
		t.Errorf("create_xsrq: command %d, want %d", cmd, abi.CmdCreateXSRQ)
	}
	if diff := cmp.Diff(hex.EncodeToString(want), hex.EncodeToString(got)); diff != "" {
		t.Errorf("CREATE_XSRQ core request (-libibverbs +goverbs):\n%s", diff)
	}
	if srq.Number() != 0x42 || srq.Handle() != 11 || srq.XRCD() != x {
		t.Errorf("SRQ number %#x handle %d, the kernel answered 0x42 and 11", srq.Number(), srq.Handle())
	}

	qp, err := pd.CreateQP(QPInitAttr{Type: QPTypeXRCSend, SendCQ: cq, Cap: QPCap{MaxSendWr: 4, MaxSendSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	cmd, req = k.last(t)
	gotQP := *(*abi.CreateQP)(unsafe.Pointer(&req[0]))
	gotQP.Response, gotQP.UserHandle = 0, 0
	wantQP := abi.CreateQP{PDHandle: 2, SendCQHandle: 5, MaxSendWr: 4, MaxSendSGE: 1, QPType: abi.QPTypeXRCIni}
	if cmd != abi.CmdCreateQP {
		t.Errorf("create_qp: command %d, want %d", cmd, abi.CmdCreateQP)
	}
	if diff := cmp.Diff(wantQP, gotQP); diff != "" {
		t.Errorf("XRC_SEND create_qp request (-want +got):\n%s", diff)
	}
	if qp.QPN() != 0x1234 || qp.Type() != QPTypeXRCSend {
		t.Errorf("QP %#x of type %v", qp.QPN(), qp.Type())
	}

	rqp, err := x.CreateQP(QPInitAttr{Type: QPTypeXRCRecv})
	if err != nil {
		t.Fatal(err)
	}
	cmd, req = k.last(t)
	gotQP = *(*abi.CreateQP)(unsafe.Pointer(&req[0]))
	gotQP.Response, gotQP.UserHandle = 0, 0
	// The kernel reads the domain's handle from pd_handle for XRC_RECV.
	wantQP = abi.CreateQP{PDHandle: 9, QPType: abi.QPTypeXRCTgt}
	if cmd != abi.CmdCreateQP {
		t.Errorf("create_qp: command %d, want %d", cmd, abi.CmdCreateQP)
	}
	if diff := cmp.Diff(wantQP, gotQP); diff != "" {
		t.Errorf("XRC_RECV create_qp request (-want +got):\n%s", diff)
	}
	if err := rqp.Close(); err != nil {
		t.Fatal(err)
	}
	if cmd, req = k.last(t); cmd != abi.CmdDestroyQP || binary.LittleEndian.Uint32(req[8:]) != 12 {
		t.Errorf("XRC_RECV QP close: command %d handle %d, want %d and 12", cmd, binary.LittleEndian.Uint32(req[8:]), abi.CmdDestroyQP)
	}

	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if cmd, req = k.last(t); cmd != abi.CmdCloseXRCD || binary.LittleEndian.Uint32(req) != 9 {
		t.Errorf("close: command %d handle %d, want %d and 9", cmd, binary.LittleEndian.Uint32(req), abi.CmdCloseXRCD)
	}
	n := len(k.writes)
	if err := x.Close(); err != nil || len(k.writes) != n {
		t.Errorf("second Close: %v, %d more commands; want nil and none", err, len(k.writes)-n)
	}
	if _, err := pd.CreateXRCSRQ(x, cq, SRQAttr{MaxWr: 4, MaxSGE: 1}); !errors.Is(err, ErrClosed) {
		t.Errorf("CreateXRCSRQ on a closed XRCD: %v, want ErrClosed", err)
	}
}
