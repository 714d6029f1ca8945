package cli

import "errors"

// ErrUsage is wrapped by every command-line error of the commands.
var ErrUsage = errors.New("usage")

// UsageError is a command line that cannot run: the commands print it and
// their usage and exit 1, as the C tools do.
type UsageError struct {
	Option string // as spelled; "" when not about one option
	Msg    string
	Err    error // the cause, a *NumberError or *OptionError; then Msg is empty
}

func (e *UsageError) Error() string {
	s := e.Msg
	if e.Err != nil {
		s = e.Err.Error()
	}
	if e.Option != "" {
		s = e.Option + ": " + s
	}
	return s
}

// Unwrap makes errors.Is(err, ErrUsage) hold, and reaches the cause.
func (e *UsageError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrUsage, e.Err}
	}
	return []error{ErrUsage}
}
