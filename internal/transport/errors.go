package transport

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ErrNotSupported is the one sentinel for "this kernel or provider does not
// offer that": errors.Is(err, ErrNotSupported) holds for every error that
// means so, whatever errno the kernel chose to say it with.
var ErrNotSupported = errors.New("not supported by this kernel or provider")

// ErrClosed is the error of a command on a Conn that was shut, and of any
// use of a closed object (uverbs.ErrClosed).
var ErrClosed = errors.New("uverbs: use of closed object")

// Error is a failed uverbs command: the verb, the path it took and the errno.
// errors.Is(err, unix.EINVAL) works through Unwrap.
type Error struct {
	Verb      string     // e.g. "query_port"
	Transport string     // "ioctl", "write" or "invoke_write"
	Errno     unix.Errno // what the kernel said
}

func (e *Error) Error() string {
	return fmt.Sprintf("uverbs %s (%s): %s", e.Verb, e.Transport, e.Errno.Error())
}

func (e *Error) Unwrap() error { return e.Errno }

// Is makes errors.Is(err, ErrNotSupported) true for the errnos the kernel
// uses to refuse an operation it does not implement.
func (e *Error) Is(target error) bool {
	return target == ErrNotSupported && isNotSupported(e.Errno)
}

func isNotSupported(errno unix.Errno) bool {
	switch errno {
	case unix.EOPNOTSUPP, unix.EPROTONOSUPPORT, unix.ENOSYS:
		return true
	}
	return false
}

// NotSupported returns an error that matches ErrNotSupported and says what.
func NotSupported(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrNotSupported)
}
