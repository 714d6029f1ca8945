package cli

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Strtol is C's strtol(s, NULL, 0) on a 64-bit system, for reproducing what
// a C tool makes of any text, however malformed: leading white space, an
// optional sign, a 0x or 0 prefix choosing base 16 or 8, then digits up to
// the first character that is not one, clamped to the int64 range on
// overflow. Text with no digits gives 0.
func Strtol(s string) int64 {
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	base := uint64(10)
	switch {
	case i+1 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') && i+2 < len(s) && digitVal(s[i+2]) < 16:
		base = 16
		i += 2
	case i < len(s) && s[i] == '0':
		base = 8
	}
	var v uint64
	overflow := false
	for ; i < len(s); i++ {
		d := digitVal(s[i])
		if d >= base {
			break
		}
		if v > (math.MaxUint64-d)/base {
			overflow = true
			continue
		}
		v = v*base + d
	}
	switch {
	case neg && (overflow || v > 1<<63):
		return math.MinInt64
	case neg:
		return -int64(v)
	case overflow || v > math.MaxInt64:
		return math.MaxInt64
	}
	return int64(v)
}

// isCSpace is C's isspace in the C locale.
func isCSpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}

// digitVal is the value of c as a digit in bases up to 36, or 36 for a
// character that is no digit.
func digitVal(c byte) uint64 {
	switch {
	case c >= '0' && c <= '9':
		return uint64(c - '0')
	case c >= 'a' && c <= 'z':
		return uint64(c-'a') + 10
	case c >= 'A' && c <= 'Z':
		return uint64(c-'A') + 10
	}
	return 36
}

// ErrBadNumber matches every *NumberError.
var ErrBadNumber = errors.New("bad number")

// NumberError is an option value that is not a number (Syntax) or not in
// [Min, Max].
type NumberError struct {
	Text     string
	Min, Max int64
	Syntax   bool
}

func (e *NumberError) Error() string {
	if e.Syntax {
		return fmt.Sprintf("%q is not a number", e.Text)
	}
	return fmt.Sprintf("%q is out of range [%d, %d]", e.Text, e.Min, e.Max)
}

// Is makes errors.Is(err, ErrBadNumber) hold.
func (e *NumberError) Is(target error) bool { return target == ErrBadNumber }

// ParseInt reads an option value the way the C tools' strtol(optarg,
// NULL, 0) reads well-formed text — an optional sign, then decimal, 0x/0X
// hexadecimal or 0-prefixed octal — but, unlike strtol, refuses with a
// *NumberError text that is not entirely such a number ("12abc", "", "0x",
// " 8") and values outside [min, max], where the C tools would go on with
// a silently truncated or zero value.
func ParseInt(s string, min, max int64) (int64, error) {
	body := s
	neg := false
	if body != "" && (body[0] == '+' || body[0] == '-') {
		neg = body[0] == '-'
		body = body[1:]
	}
	base := 10
	switch {
	case len(body) > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X'):
		base, body = 16, body[2:]
	case len(body) > 1 && body[0] == '0':
		base, body = 8, body[1:]
	}
	// strconv would take what C does not: a second sign, and "_"
	// separators.
	if body == "" || body[0] == '+' || body[0] == '-' || body[0] == '_' || strings.Contains(body, "_") {
		return 0, &NumberError{Text: s, Min: min, Max: max, Syntax: true}
	}
	u, err := strconv.ParseUint(body, base, 64)
	if err != nil {
		return 0, &NumberError{Text: s, Min: min, Max: max, Syntax: !errors.Is(err, strconv.ErrRange)}
	}
	var v int64
	switch {
	case !neg && u <= math.MaxInt64:
		v = int64(u)
	case neg && u <= 1<<63:
		v = int64(-u) // two's complement: -(1<<63) is MinInt64
	default:
		return 0, &NumberError{Text: s, Min: min, Max: max}
	}
	if v < min || v > max {
		return 0, &NumberError{Text: s, Min: min, Max: max}
	}
	return v, nil
}
