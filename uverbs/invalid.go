package uverbs

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// invalid is the error for an argument goverbs refuses before the kernel
// sees it. The message names the verb and the field; the error matches
// unix.EINVAL, the errno the kernel (and libibverbs) give the same mistake,
// so errors.Is(err, unix.EINVAL) holds whoever refused.
func invalid(verb, format string, args ...any) error {
	return fmt.Errorf("uverbs: %s: %s: %w", verb, fmt.Sprintf(format, args...), unix.EINVAL)
}

// Methods called on a nil object. The data path returns these without
// formatting, so a nil QP, SRQ or CQ costs no allocation either.
var (
	errNilContext = invalid("Context", "nil context")
	errNilQP      = invalid("QP", "nil QP")
	errNilCQ      = invalid("CQ", "nil CQ")
	errNilSRQ     = invalid("SRQ", "nil SRQ")
	errNilMR      = invalid("MR", "nil MR")
	errNilChannel = invalid("CompChannel", "nil completion channel")
	errNilBuffer  = invalid("Buffer", "nil buffer")
)
