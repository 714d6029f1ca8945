package uverbs

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/transport"
)

// XRCD is an XRC domain: the XRC SRQs and XRC receive QPs created in it
// can take the messages that XRC send QPs address to an SRQ by number,
// possibly from several processes sharing the domain through a file.
type XRCD struct {
	ctx    *Context
	handle uint32

	mu     sync.Mutex
	closed bool
	ref    *cleanupRef
}

// XRCDInit says which XRC domain OpenXRCD opens.
type XRCDInit struct {
	// File, when set, names the domain: processes opening the same file
	// (its inode) on the same device share one domain. Nil opens a
	// domain of this context alone.
	File *os.File
	// Create makes a new domain when File names none yet (O_CREAT);
	// Exclusive refuses a File that already names one (O_EXCL).
	Create    bool
	Exclusive bool
}

// OpenXRCD opens (or creates) an XRC domain. Devices without XRC (rxe)
// refuse with an error matching ErrNotSupported. OPEN_XRCD exists only
// as a write command: the ioctl interface has no method to create one.
func (c *Context) OpenXRCD(init XRCDInit) (*XRCD, error) {
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("uverbs: open_xrcd: %w", err)
	}
	if init.Exclusive && !init.Create {
		return nil, invalid("open_xrcd", "Exclusive without Create")
	}
	req := abi.OpenXRCD{FD: ^uint32(0)}
	if init.File != nil {
		fd := init.File.Fd()
		if fd > 1<<31-1 {
			return nil, invalid("open_xrcd", "File descriptor %d out of range", fd)
		}
		req.FD = uint32(fd)
	}
	if init.Create {
		req.OFlags |= unix.O_CREAT
	}
	if init.Exclusive {
		req.OFlags |= unix.O_EXCL
	}
	var resp abi.OpenXRCDResp
	err := c.conn.Write("open_xrcd", &transport.Write{
		Cmd: abi.CmdOpenXRCD, In: asBytes(&req), CoreIn: int(unsafe.Sizeof(req)),
		Out: asBytes(&resp), CoreOut: int(unsafe.Sizeof(resp)),
	})
	runtime.KeepAlive(init.File)
	if err != nil {
		return nil, err
	}
	x := &XRCD{ctx: c, handle: resp.XRCDHandle, ref: &cleanupRef{}}
	runtime.AddCleanup(x, func(a destroyArgs) { a.run() }, destroyArgs{c, x.ref, closeXRCD, resp.XRCDHandle, parents{}})
	return x, nil
}

// Handle returns the kernel's handle of the domain.
func (x *XRCD) Handle() uint32 { return x.handle }

// Context returns the context the domain was opened on.
func (x *XRCD) Context() *Context { return x.ctx }

// Close closes the domain. The kernel refuses (EBUSY) while SRQs or QPs
// created in it exist. Closing twice, or after the context was closed, is
// a no-op.
func (x *XRCD) Close() error {
	if x == nil {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed || x.ctx.isClosed() {
		x.closed = true
		return nil
	}
	if err := x.ctx.destroyErr(closeXRCD(x.ctx, x.handle)); err != nil {
		return err
	}
	x.closed = true
	x.ref.finish()
	return nil
}

func (x *XRCD) use(verb string, c *Context) error {
	if x == nil {
		return invalid(verb, "nil XRCD")
	}
	if x.ctx != c {
		return invalid(verb, "XRCD belongs to another context")
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return fmt.Errorf("uverbs: %s: XRCD %d: %w", verb, x.handle, ErrClosed)
	}
	return nil
}

func closeXRCD(c *Context, handle uint32) error {
	q := transport.NewIoctl(abi.ObjectXRCD, abi.MethodXRCDDestroy)
	defer q.Free()
	q.Handle(abi.AttrDestroyXRCDHandle, handle)
	return c.conn.IoctlOrWrite("close_xrcd", transport.OpDestroyXRCD, q, func() error {
		req := abi.CloseXRCD{XRCDHandle: handle}
		return c.conn.Write("close_xrcd", &transport.Write{
			Cmd: abi.CmdCloseXRCD, In: asBytes(&req), CoreIn: int(unsafe.Sizeof(req)),
		})
	})
}
