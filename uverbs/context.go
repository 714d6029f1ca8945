// Package uverbs is the verbs API of goverbs: open an RDMA device through
// /dev/infiniband/uverbsN and talk to the kernel's uverbs ABI directly, with
// no libibverbs and no cgo.
//
// Commands go by ioctl (RDMA_VERBS_IOCTL) first and fall back to write()
// exactly where rdma-core does. GOVERBS_TRANSPORT=ioctl|write forces one path
// (WithTransport does the same per context) and GOVERBS_TRACE=1 logs every
// command to stderr.
//
// # A program
//
//	dev, _ := uverbs.Open("rxe0")          // uverbs.Devices lists the names
//	pd, _ := dev.AllocPD()
//	ch, _ := dev.NewCompChannel()
//	cq, _ := dev.CreateCQ(64, &uverbs.CQOptions{Channel: ch})
//	qp, _ := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: ...})
//	mr, _ := pd.RegisterBuffer(buf, 0, buf.Len(), access)
//	// exchange qp's Endpoint and mr's RemoteBuffer with the peer (MarshalBinary)
//	qp.Connect(uverbs.ConnectAttr{SGIDIndex: gid.Index, Access: access, Remote: peer})
//	qp.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, SGL: sgl, RemoteAddr: rb.Addr, Rkey: rb.Rkey}})
//	n, _ := cq.Wait(ctx, wcs)              // then wcs[i].Err()
//
// The examples of QP.PostSend, QP.Connect (two processes over TCP) and
// PD.CreateAH (UD) are whole programs.
//
// # Names and numbers
//
// Context is the open device, ibv_context in the verbs; the name stays the
// verbs' own although Go's context.Context sits beside it in the blocking
// calls (CQ.Wait, CompChannel.Wait, WaitAsyncEvent): programs call the
// value dev, as the examples do, and ctx the context.Context.
//
// Integer types follow one rule. A port number is a uint8, as the ABI has
// it (ports count from 1). Indexes into a table (the GID index, the P_Key
// index) are int, checked against the ABI's width (GID index 0..255,
// P_Key index 0..65535) when a call sends them. Addresses (Buffer.Addr,
// MR.Addr, MR.IOVA, SGE.Addr, RemoteBuffer.Addr) are uint64, whatever the
// pointer width. Sizes and offsets of memory the program holds (AllocBuffer,
// RegisterBuffer, Buffer.Len, MR.Len, MR.SGE) and counts it asks for
// (CreateCQ) are int. Keys, QPNs, PSNs and queue capacities are the ABI's
// uint32. The data path structs (SGE, SendWR, RecvWR, WC) and the wire
// forms (Endpoint, RemoteBuffer) carry each field at the width the device
// or the peer uses (SGE.Length uint32, WC.PkeyIndex uint16,
// RemoteBuffer.Length uint64), since they are handed over as they are.
//
// # Goroutines
//
// Every object may be shared between goroutines; what may run at once:
//
//   - The data path (QP.PostSend, QP.PostRecv, SRQ.PostRecv, CQ.Poll) is
//     safe from any number of goroutines on one object: the provider holds
//     the queue's lock for one call, so a list given to PostSend goes in
//     whole and in order, never interleaved with another goroutine's, and
//     each completion goes to exactly one Poll. (TestLoadManyQPs runs four
//     posters on one QP and two pollers on one CQ under -race.)
//     On mlx5 (amd64), a queue's lock is biased to the first goroutine
//     that takes it: as long as only that goroutine posts to the QP (or
//     polls the CQ), the lock costs no locked instruction (with the two
//     locks' locked instructions a write's post and poll took about 32 ns,
//     without them about 25). The first other goroutine to take it revokes
//     the bias for good, with one membarrier(2) system call, and the lock
//     is an ordinary compare-and-swap from then on.
//     A program that polls a CQ, or posts to a QP, from several goroutines
//     but never at once can say so (CQOptions.SingleThreaded,
//     QPInitAttr.SingleThreaded): on mlx5 the queue's lock then costs no
//     locked instruction whichever goroutine calls, and Close stays safe
//     from any goroutine; two callers at once then corrupt the queue.
//   - The methods that create objects (Context.AllocPD, PD.RegisterBuffer,
//     PD.CreateQP...), the queries and Close are safe for concurrent use.
//     Closing an object while another goroutine uses it is safe too: that
//     call either completes or returns ErrClosed.
//   - Calls that change one object's state (QP.Modify, CQ.Resize, SRQ.Modify)
//     should come from one goroutine at a time per object: the kernel
//     applies them in the order they reach it.
//   - Context.WaitAsyncEvent and CompChannel.Wait take one waiting
//     goroutine at a time each.
//   - Registered memory is the program's: a goroutine may read a receive
//     buffer once Poll returned its completion, and reuse a send buffer once
//     its send completed (or, with SendInline, once PostSend returned).
//
// # Device removal
//
// When the device goes away the library closes its contexts itself: see
// ErrDeviceRemoved.
//
// Every provider goverbs has (rxe, mlx5) is linked in by importing this
// package. Build with the tag goverbs_noproviders and import the provider
// packages you want to link only those.
package uverbs

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/sysfs"
)

// ErrNotSupported matches (errors.Is) every error that means the kernel or
// provider does not offer the operation.
var ErrNotSupported = transport.ErrNotSupported

// Error is a failed uverbs command: the verb, the path it took (ioctl,
// write or invoke_write) and the errno. errors.Is(err, unix.EINVAL) works.
type Error = transport.Error

// ErrClosed is returned by methods of a closed object, or of an object
// whose context was closed.
var ErrClosed = provider.ErrClosed

// Transport selects how commands reach the kernel.
type Transport = transport.Mode

// Transports.
const (
	// TransportAuto: ioctl first, write() where the kernel lacks a method,
	// as rdma-core does.
	TransportAuto = transport.Auto
	// TransportIoctl: ioctl only (write commands inside INVOKE_WRITE).
	TransportIoctl = transport.IoctlOnly
	// TransportWrite: write() only, as on kernels before the ioctl ABI.
	TransportWrite = transport.WriteOnly
)

// Option configures Open.
type Option func(*options) error

type options struct {
	transport    Transport
	transportSet bool
	kernel       transport.Kernel
	sysRoot      string
}

// WithTransport forces a command path for the context, overriding
// GOVERBS_TRANSPORT.
func WithTransport(t Transport) Option {
	return func(o *options) error {
		if t < TransportAuto || t > TransportWrite {
			return invalid("WithTransport", "unknown transport %d", int(t))
		}
		o.transport, o.transportSet = t, true
		return nil
	}
}

// Context is an open device: the uverbs file, its kernel context and the
// provider's state. Its methods are safe for concurrent use.
type Context struct {
	name        string
	dev         deviceInfo
	file        *os.File
	conn        *transport.Conn
	prov        provider.Provider
	pctx        provider.Context
	numCV       int
	async       *os.File
	asyncWaker  eventWaker
	coreSupport uint64

	nextID atomic.Uint64 // user handles of CQs, QPs and SRQs
	cqs    registry[CQ]  // user handle -> CQ, for completion and async events
	qps    registry[QP]  // user handle -> QP, for async events
	srqs   registry[SRQ] // user handle -> SRQ, for async events

	closeOnce sync.Once
	closeErr  error
	closed    bool
	mu        sync.Mutex

	// Device removal (removal.go): the watch, the error calls return once
	// the library closed the context for a removed device, whether the
	// DEVICE_FATAL event went out, and the completion channels to close.
	watchID     uint64
	removed     atomic.Pointer[removedError]
	fatalSent   atomic.Bool
	chans       registry[CompChannel] // id -> channel, released when the context closes
	relMu       sync.Mutex
	devReleased bool

	// kept lets go of what dropped objects whose destroy the kernel
	// refused still hold (an MR's memory, a queue's ring), once closing
	// the context has freed them.
	keptMu   sync.Mutex
	kept     []func()
	keptDone bool // the file is closed: nothing more is kept
}

// keepUntilClose runs letGo once the context's file is closed, or now if
// it is.
func (c *Context) keepUntilClose(letGo func()) {
	c.keptMu.Lock()
	if !c.keptDone {
		c.kept = append(c.kept, letGo)
		letGo = nil
	}
	c.keptMu.Unlock()
	if letGo != nil {
		letGo()
	}
}

// Open opens the RDMA device named name (e.g. "rxe0", "mlx5_0").
func Open(name string, opts ...Option) (*Context, error) {
	o := options{sysRoot: "/"}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if !o.transportSet {
		m, err := transport.ModeFromEnv()
		if err != nil {
			return nil, fmt.Errorf("uverbs: open %s: %w", name, err)
		}
		o.transport = m
	}
	dev, err := findDevice(o.sysRoot, name)
	if err != nil {
		return nil, err
	}
	return openDevice(dev, &o)
}

func openDevice(dev deviceInfo, o *options) (*Context, error) {
	prov, err := dev.provider()
	if err != nil {
		return nil, err
	}
	// An absent abi_version file reads as 0, which rdma-core lets pass.
	if lo, hi := prov.ABIVersions(); dev.abiVersion != 0 && (dev.abiVersion < lo || dev.abiVersion > hi) {
		return nil, fmt.Errorf("uverbs: open %s: driver uverbs ABI %d is outside the %s provider's range %d..%d",
			dev.name, dev.abiVersion, prov.Name(), lo, hi)
	}
	f, err := os.OpenFile(dev.charDev, os.O_RDWR, 0)
	if err != nil {
		return nil, openError(dev, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR {
		f.Close()
		return nil, fmt.Errorf("uverbs: open %s: %s is not a character device", dev.name, dev.charDev)
	}
	c := &Context{
		name: dev.name,
		dev:  dev,
		file: f,
		prov: prov,
		conn: transport.NewConn(int(f.Fd()), prov.DriverID(), o.transport, o.kernel),
	}
	c.pctx, err = prov.NewContext(provider.Device{Name: dev.name, ABIVersion: dev.abiVersion})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("uverbs: open %s: %s provider: %w", dev.name, prov.Name(), err)
	}
	if err := c.getContext(); err != nil {
		c.pctx.Close()
		f.Close()
		return nil, fmt.Errorf("uverbs: open %s: %w", dev.name, err)
	}
	if err := c.pctx.Started(c.conn); err != nil {
		c.release()
		return nil, fmt.Errorf("uverbs: open %s: %s provider: %w", dev.name, prov.Name(), err)
	}
	if o.kernel == nil && (o.sysRoot == "/" || o.sysRoot == "") {
		if err := c.watchRemoval(); err != nil {
			c.release()
			return nil, fmt.Errorf("uverbs: open %s: %w", dev.name, err)
		}
	}
	return c, nil
}

func openError(dev deviceInfo, err error) error {
	switch {
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return fmt.Errorf("uverbs: open %s: %w: %s: %w", dev.name, sysfs.ErrNoAccess, accessAdvice(dev.charDev), err)
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENXIO), errors.Is(err, unix.ENODEV):
		return fmt.Errorf("uverbs: open %s: %s is missing (is /dev populated and ib_uverbs loaded?): %w", dev.name, dev.charDev, err)
	}
	return fmt.Errorf("uverbs: open %s: %w", dev.name, err)
}

// getContext sends GET_CONTEXT (ioctl, or write on older kernels) and makes
// sure the context has an async event fd.
func (c *Context) getContext() error {
	drvIn, drvOut := c.pctx.GetContextData()
	var numCV uint32
	var core uint64
	q := transport.NewIoctl(abi.ObjectDevice, abi.MethodGetContext)
	defer q.Free()
	iNum := q.Out(abi.AttrGetContextNumCompVectors, asBytes(&numCV))
	iCore := q.Out(abi.AttrGetContextCoreSupport, asBytes(&core))
	if len(drvIn) > 0 {
		q.In(abi.AttrUHWIn, drvIn)
	}
	if len(drvOut) > 0 {
		q.Out(abi.AttrUHWOut, drvOut)
	}
	viaWrite := false
	err := c.conn.IoctlOrWrite("get_context", transport.OpGetContext, q, func() error {
		viaWrite = true
		req := abi.GetContext{}
		var resp abi.GetContextResp
		if err := c.writeDriver("get_context", abi.CmdGetContext, asBytes(&req), drvIn, asBytes(&resp), drvOut); err != nil {
			return err
		}
		numCV = resp.NumCompVectors
		// The write form creates the async event fd itself.
		f, err := eventFile(int(int32(resp.AsyncFD)), "uverbs-async")
		if err != nil {
			return err
		}
		c.async = f
		c.asyncWaker.rc = rawConn(f)
		return nil
	})
	if err != nil {
		return err
	}
	if !viaWrite {
		if !q.Valid(iNum) {
			numCV = 0
		}
		if q.Valid(iCore) {
			c.coreSupport = core
		}
		if err := c.allocAsyncFD(); err != nil {
			return err
		}
	}
	c.numCV = int(numCV)
	return nil
}

// allocAsyncFD creates the async event file, which the ioctl GET_CONTEXT
// does not.
func (c *Context) allocAsyncFD() error {
	q := transport.NewIoctl(abi.ObjectAsyncEvent, abi.MethodAsyncEventAlloc)
	defer q.Free()
	i := q.NewFD(abi.AttrAsyncEventAllocFDHandle)
	if err := c.conn.Ioctl("alloc_async_fd", q); err != nil {
		return err
	}
	f, err := eventFile(int(int32(q.Data(i))), "uverbs-async")
	if err != nil {
		return err
	}
	c.async = f
	c.asyncWaker.rc = rawConn(f)
	return nil
}

// Name returns the device name.
func (c *Context) Name() string { return c.name }

// Provider returns the name of the provider driving the device ("rxe").
func (c *Context) Provider() string { return c.prov.Name() }

// Transport returns the context's command path setting.
func (c *Context) Transport() Transport { return c.conn.Mode() }

// NumCompVectors returns the number of completion vectors (interrupt
// channels) a CQ can be bound to.
func (c *Context) NumCompVectors() int { return c.numCV }

// Close releases the context. Objects still open in it (PDs, MRs, CQs,
// QPs...) go with it: the kernel destroys them when the device file closes,
// their methods return ErrClosed from then on, and their Close only
// releases what the process holds (mappings, pins). Buffers are the
// caller's and stay mapped. Close is idempotent; calls after the first
// return the first call's result.
func (c *Context) Close() error {
	if c == nil {
		return nil
	}
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		c.closeErr = c.release()
	})
	return c.closeErr
}

func (c *Context) release() error {
	err := c.releaseDevice(false)
	// Shut closes the file once no command is using its descriptor, so
	// that a command racing with Close fails with ErrClosed instead of
	// reaching whatever file reuses the number.
	err = errors.Join(err, c.conn.Shut(c.file.Close))
	// The kernel freed the context's MRs with the file.
	c.keptMu.Lock()
	kept := c.kept
	c.kept, c.keptDone = nil, true
	c.keptMu.Unlock()
	for _, letGo := range kept {
		letGo()
	}
	return err
}

// releaseDevice lets go of everything that keeps the kernel's device in
// use: the provider's mappings, the event files and the uverbs file. A
// removal (keepFD) leaves a placeholder in the uverbs file's descriptor
// number until Close, so that a command racing with it fails with EBADF
// instead of reaching whatever file reuses the number.
func (c *Context) releaseDevice(keepFD bool) error {
	c.relMu.Lock()
	defer c.relMu.Unlock()
	if c.devReleased {
		return nil
	}
	c.devReleased = true
	if c.watchID != 0 {
		removalWatch.remove(c.watchID)
	}
	var errs []error
	if c.pctx != nil {
		errs = append(errs, c.pctx.Close())
	}
	if c.async != nil {
		c.asyncWaker.close()
		errs = append(errs, c.async.Close())
	}
	for _, ch := range c.chans.drain() {
		ch.release()
	}
	if keepFD {
		// An O_PATH descriptor refuses write and ioctl with EBADF.
		ph, err := unix.Open("/", unix.O_PATH|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Dup3(ph, int(c.file.Fd()), unix.O_CLOEXEC)
			unix.Close(ph)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (c *Context) check() error {
	if c == nil {
		return errNilContext
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		if r := c.removed.Load(); r != nil {
			return r
		}
		return ErrClosed
	}
	return nil
}

func (c *Context) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// destroy runs an object's destroy command unless the context is closed
// (the kernel freed every object with the context's file), and forgives
// its failure when the context closed while it ran: the library closes a
// removed device's context from its event watcher, the command then meets
// the placeholder descriptor (EBADF), and the object is gone all the same.
func (c *Context) destroy(cmd func() error) error {
	if c.isClosed() {
		return nil
	}
	return c.destroyErr(cmd())
}

// destroyErr returns err, the error of an object's destroy command, or nil
// when the context closed while the command ran (see destroy).
func (c *Context) destroyErr(err error) error {
	if err != nil && c.isClosed() {
		return nil
	}
	return err
}

// withKernel substitutes the command executor (tests: recorder, replay).
func withKernel(k transport.Kernel) Option {
	return func(o *options) error { o.kernel = k; return nil }
}
