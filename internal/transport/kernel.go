package transport

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
)

// Kernel executes framed commands. The real one makes the system calls;
// tests substitute a replay of a transcript recorded on a real kernel.
// Both return nil or a unix.Errno.
type Kernel interface {
	// Ioctl sends q with driver in the header. Afterwards q's attribute
	// array and output buffers hold what the kernel wrote.
	Ioctl(fd int, q *Ioctl, driver abi.DriverID) error
	// Write writes buf, a framed write() command whose response pointer (if
	// any) refers to resp, and returns when the kernel has filled resp.
	Write(fd int, buf, resp []byte) error
}

// System is the Kernel that makes real system calls.
type System struct{}

// Ioctl implements Kernel.
func (s System) Ioctl(fd int, q *Ioctl, driver abi.DriverID) error {
	return s.ioctl(fd, q, driver, false)
}

// ioctl makes the system call, by RawSyscall when raw (a quick command).
func (System) ioctl(fd int, q *Ioctl, driver abi.DriverID, raw bool) error {
	q.prepare(driver)
	// Direct calls, so that the compiler keeps what the uintptr
	// arguments point to alive and in place for the call.
	var errno unix.Errno
	if raw {
		_, _, errno = unix.RawSyscall(unix.SYS_IOCTL, uintptr(fd), abi.VerbsIoctl, uintptr(unsafe.Pointer(&q.w)))
	} else {
		_, _, errno = unix.Syscall(unix.SYS_IOCTL, uintptr(fd), abi.VerbsIoctl, uintptr(unsafe.Pointer(&q.w)))
	}
	runtime.KeepAlive(q)
	if errno != 0 {
		return errno
	}
	return nil
}

// prepare fills in q's header and its buffers' addresses.
func (q *Ioctl) prepare(driver abi.DriverID) {
	q.w.hdr = q.header(driver)
	for i := 0; i < q.n; i++ {
		if k := q.kinds[i]; (k == kindPtrIn || k == kindPtrOut) && len(q.bufs[i]) > 0 {
			// The buffers are ordinary Go memory referenced from q, which
			// stays reachable (the callers' KeepAlive); the heap does not move.
			q.w.attrs[i].Data = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(q.bufs[i]))))
		}
	}
}

// Write implements Kernel.
func (s System) Write(fd int, buf, resp []byte) error {
	return s.write(fd, buf, resp, false)
}

// write makes the system call, by RawSyscall when raw (a quick command).
func (System) write(fd int, buf, resp []byte, raw bool) error {
	err := WriteCommand(fd, buf, raw)
	runtime.KeepAlive(resp)
	return err
}

// WriteCommand writes one command to a kernel command file (uverbs, ucma)
// in one write(2), by RawSyscall when raw (a command answered without
// waiting, see quick.go), and fails unless the kernel took all of it.
func WriteCommand(fd int, buf []byte, raw bool) error {
	var n uintptr
	var errno unix.Errno
	if raw {
		n, _, errno = unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(buf))), uintptr(len(buf)))
	} else {
		n, _, errno = unix.Syscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(buf))), uintptr(len(buf)))
	}
	runtime.KeepAlive(buf)
	return writeResult(n, errno, len(buf))
}

func writeResult(n uintptr, errno unix.Errno, want int) error {
	if errno != 0 {
		return errno
	}
	if int(n) != want {
		// The kernel returns the full length or an error; anything else
		// means the command was not taken as a whole.
		return unix.EIO
	}
	return nil
}
