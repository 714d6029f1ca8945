package cli

import (
	"errors"
	"testing"
)

func TestUsageError(t *testing.T) {
	cause := &NumberError{}
	tests := []struct {
		err       *UsageError
		want      string
		wantCause bool
	}{
		{&UsageError{Msg: "no device"}, "no device", false},
		{&UsageError{Option: "-s", Msg: "too big"}, "-s: too big", false},
		{&UsageError{Option: "-n", Err: cause}, "-n: " + cause.Error(), true},
	}
	for _, tc := range tests {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
		if !errors.Is(tc.err, ErrUsage) {
			t.Errorf("%q does not match ErrUsage", tc.want)
		}
		var ne *NumberError
		if got := errors.As(tc.err, &ne); got != tc.wantCause {
			t.Errorf("%q: errors.As(*NumberError) = %v, want %v", tc.want, got, tc.wantCause)
		}
	}
}
