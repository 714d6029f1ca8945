// Package transport sends uverbs commands to the kernel: ioctl first, write()
// as the fallback, with the per-context bookkeeping rdma-core does, a switch
// that forces either path, tracing and transcripts for replay in unit tests.
package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
)

// Mode selects the command path.
type Mode int

const (
	// Auto uses ioctl where the kernel has the method and falls back to
	// write() exactly where rdma-core does; write commands travel inside
	// INVOKE_WRITE when the kernel offers it.
	Auto Mode = iota
	// IoctlOnly never calls write(): methods without an ioctl fail, write
	// commands must go through INVOKE_WRITE. (The rxe doorbell, a write()
	// by design, is not a command and is exempt.)
	IoctlOnly
	// WriteOnly never calls ioctl, as on kernels before the ioctl ABI.
	WriteOnly
)

func (m Mode) String() string {
	switch m {
	case Auto:
		return "auto"
	case IoctlOnly:
		return "ioctl"
	case WriteOnly:
		return "write"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode reads a mode name: "auto" (or ""), "ioctl" or "write".
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return Auto, nil
	case "ioctl":
		return IoctlOnly, nil
	case "write":
		return WriteOnly, nil
	}
	return Auto, fmt.Errorf("transport mode %q: want auto, ioctl or write", s)
}

// EnvMode is the environment variable that forces a transport for every
// context opened without an explicit mode.
const EnvMode = "GOVERBS_TRANSPORT"

// EnvTrace turns on command tracing to stderr when set to a non-empty value
// other than "0".
const EnvTrace = "GOVERBS_TRACE"

var traceOn = func() bool {
	v := os.Getenv(EnvTrace)
	return v != "" && v != "0"
}()

// ModeFromEnv returns the mode named by GOVERBS_TRANSPORT.
func ModeFromEnv() (Mode, error) {
	m, err := ParseMode(os.Getenv(EnvMode))
	if err != nil {
		return Auto, fmt.Errorf("%s: %w", EnvMode, err)
	}
	return m, nil
}

// Op identifies a verb that has both an ioctl and a write form, for the
// per-context record of methods this kernel lacks.
type Op int

// Ops with an ioctl method and a write fallback.
const (
	OpGetContext Op = iota
	OpQueryPort
	OpCreateCQ
	OpDestroyCQ
	OpCreateQP
	OpDestroyQP
	OpCreateSRQ
	OpDestroySRQ
	OpDestroyPD
	OpDestroyMR
	OpDestroyAH
	OpDestroyMW
	// OpQueryGID covers the GID entry and table methods: a kernel has both
	// or neither (rdma-core keys them on one bit too).
	OpQueryGID
	OpDestroyXRCD
	opCount
)

// Conn is the command channel of one uverbs file: a device context.
// It is safe for concurrent use.
type Conn struct {
	fd     int
	driver abi.DriverID
	mode   Mode
	kernel Kernel

	// fdMu keeps fd from being closed under a command: every command and
	// every UseFD holds it for reading while it uses fd, and Shut holds it
	// for writing while it closes the file. After Shut, commands fail with
	// ErrClosed instead of reaching whatever file reuses the number.
	fdMu sync.RWMutex
	shut bool

	noIoctl     atomic.Bool          // ENOTTY seen: no ioctl framework at all
	noMethod    [opCount]atomic.Bool // EPROTONOSUPPORT seen for the op
	invokeWrite atomic.Int32         // 0 unknown, 1 available, 2 absent
}

// NewConn wraps fd (a /dev/infiniband/uverbsN opened O_RDWR) for the device's
// driver. kernel is System{} outside tests.
func NewConn(fd int, driver abi.DriverID, mode Mode, kernel Kernel) *Conn {
	if kernel == nil {
		kernel = System{}
	}
	return &Conn{fd: fd, driver: driver, mode: mode, kernel: kernel}
}

// FD returns the uverbs file descriptor. It may be closed by Shut at any
// time; use UseFD for anything but a number to compare.
func (c *Conn) FD() int { return c.fd }

// UseFD runs fn with the uverbs file descriptor, which stays open until fn
// returns, or fails with ErrClosed after Shut. fn must not send commands on
// c.
func (c *Conn) UseFD(fn func(fd int) error) error {
	c.fdMu.RLock()
	defer c.fdMu.RUnlock()
	if c.shut {
		return ErrClosed
	}
	return fn(c.fd)
}

// Shut waits for the commands in flight, then runs closeFile (which closes
// the uverbs file) and makes every later command fail with ErrClosed. Only
// the first call runs closeFile.
func (c *Conn) Shut(closeFile func() error) error {
	c.fdMu.Lock()
	defer c.fdMu.Unlock()
	if c.shut {
		return nil
	}
	c.shut = true
	return closeFile()
}

// Mode returns the forced or automatic mode.
func (c *Conn) Mode() Mode { return c.mode }

// Driver returns the driver ID sent in every ioctl header.
func (c *Conn) Driver() abi.DriverID { return c.driver }

// Ioctl sends an ioctl-only method. In WriteOnly mode it fails with
// ErrNotSupported without asking the kernel.
func (c *Conn) Ioctl(verb string, q *Ioctl) error {
	if c.mode == WriteOnly || c.noIoctl.Load() {
		return &Error{Verb: verb, Transport: "ioctl", Errno: unix.EPROTONOSUPPORT}
	}
	return c.doIoctl(verb, "ioctl", q)
}

func (c *Conn) doIoctl(verb, path string, q *Ioctl) error {
	if err := q.Err(); err != nil {
		return err
	}
	var start time.Time
	if traceOn {
		start = time.Now()
	}
	var err error
	c.fdMu.RLock()
	switch sys, ok := c.kernel.(System); {
	case c.shut:
		c.fdMu.RUnlock()
		return fmt.Errorf("uverbs %s (%s): %w", verb, path, ErrClosed)
	case ok && quickIoctl(c.driver, q):
		err = sys.ioctl(c.fd, q, c.driver, true)
	default:
		err = c.kernel.Ioctl(c.fd, q, c.driver)
	}
	c.fdMu.RUnlock()
	if traceOn {
		traceIoctl(verb, path, q, err, time.Since(start))
	}
	if err != nil {
		var errno unix.Errno
		if !errors.As(err, &errno) {
			return fmt.Errorf("uverbs %s (%s): %w", verb, path, err)
		}
		return &Error{Verb: verb, Transport: path, Errno: errno}
	}
	return nil
}

// IoctlOrWrite sends q, falling back to fallback() as rdma-core does: when
// the kernel has no ioctl framework (ENOTTY, remembered for every op) or not
// this method (EPROTONOSUPPORT, remembered for op). Any other error is the
// answer. In IoctlOnly mode there is no fallback; in WriteOnly mode only the
// fallback runs.
func (c *Conn) IoctlOrWrite(verb string, op Op, q *Ioctl, fallback func() error) error {
	switch {
	case c.mode == WriteOnly:
		return fallback()
	case c.mode == Auto && (c.noIoctl.Load() || c.noMethod[op].Load()):
		return fallback()
	}
	err := c.doIoctl(verb, "ioctl", q)
	if err == nil || c.mode == IoctlOnly {
		return err
	}
	switch {
	case errors.Is(err, unix.ENOTTY):
		c.noIoctl.Store(true)
		return fallback()
	case errors.Is(err, unix.EPROTONOSUPPORT):
		c.noMethod[op].Store(true)
		return fallback()
	}
	return err
}

// Write sends a write command: inside INVOKE_WRITE when the kernel has it
// (and the mode allows), else as a plain write().
func (c *Conn) Write(verb string, w *Write) error {
	if c.mode != WriteOnly && c.hasInvokeWrite() {
		// Commands on the data path's edge (arming a CQ) run often: the
		// request is reused, not allocated per command.
		q := NewIoctl(abi.ObjectDevice, abi.MethodInvokeWrite)
		w.fillInvokeWrite(q)
		err := c.doIoctl(verb, "invoke_write", q)
		q.Free()
		return err
	}
	if c.mode == IoctlOnly {
		return &Error{Verb: verb, Transport: "invoke_write", Errno: unix.EPROTONOSUPPORT}
	}
	return c.rawWrite(verb, w)
}

// hasInvokeWrite probes once, as rdma-core does: INVOKE_WRITE of
// QUERY_DEVICE with no core buffers must fail with ENOSPC where the method
// exists.
func (c *Conn) hasInvokeWrite() bool {
	switch c.invokeWrite.Load() {
	case 1:
		return true
	case 2:
		return false
	}
	q := NewIoctl(abi.ObjectDevice, abi.MethodInvokeWrite)
	defer q.Free()
	q.Const(abi.AttrWriteCmd, abi.CmdQueryDevice)
	err := c.doIoctl("probe_invoke_write", "ioctl", q)
	ok := errors.Is(err, unix.ENOSPC)
	if ok {
		c.invokeWrite.Store(1)
	} else {
		c.invokeWrite.Store(2)
	}
	return ok
}

// framePool holds the write() buffers of commands that fit in 256 bytes.
var framePool = sync.Pool{New: func() any { return new([256]byte) }}

func (c *Conn) rawWrite(verb string, w *Write) error {
	room := framePool.Get().(*[256]byte)
	defer framePool.Put(room)
	buf, err := w.frameInto(room[:0])
	if err != nil {
		return err
	}
	if w.hasResponse() {
		binary.LittleEndian.PutUint64(buf[respPtrOffset:], uint64(uintptr(unsafe.Pointer(unsafe.SliceData(w.Out)))))
		clear(w.Out)
	}
	var start time.Time
	if traceOn {
		start = time.Now()
	}
	c.fdMu.RLock()
	switch sys, ok := c.kernel.(System); {
	case c.shut:
		c.fdMu.RUnlock()
		return fmt.Errorf("uverbs %s (write): %w", verb, ErrClosed)
	case ok && quickWrite(c.driver, w.Cmd):
		err = sys.write(c.fd, buf, w.Out, true)
	default:
		err = c.kernel.Write(c.fd, buf, w.Out)
	}
	c.fdMu.RUnlock()
	if traceOn {
		traceWrite(verb, w, err, time.Since(start))
	}
	if err != nil {
		var errno unix.Errno
		if !errors.As(err, &errno) {
			return fmt.Errorf("uverbs %s (write): %w", verb, err)
		}
		return &Error{Verb: verb, Transport: "write", Errno: errno}
	}
	return nil
}
