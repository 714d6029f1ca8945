package uverbs

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// memlockHint explains the errors registration gives when the process may
// not pin more memory.
func memlockHint(err error, length int) error {
	if !errors.Is(err, unix.ENOMEM) && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EAGAIN) {
		return err
	}
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim) != nil {
		return err
	}
	return fmt.Errorf("%w (registering %d bytes; RLIMIT_MEMLOCK is %s: raise it with `ulimit -l unlimited`, a systemd LimitMEMLOCK=, "+
		"`docker run --ulimit memlock=-1`, or grant CAP_IPC_LOCK)", err, length, formatLimit(lim.Cur))
}

func formatLimit(v uint64) string {
	if v == unix.RLIM_INFINITY {
		return "unlimited"
	}
	return fmt.Sprintf("%d bytes", v)
}
