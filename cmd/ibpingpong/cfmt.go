package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

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

// parseCInt reads an option value the way the C tools' strtol(optarg,
// NULL, 0) reads well-formed text — an optional sign, then decimal, 0x/0X
// hexadecimal or 0-prefixed octal — but, unlike strtol, refuses text that
// is not entirely such a number ("12abc", "", "0x") and values outside
// [min, max], where the C tools would go on with a silently truncated or
// zero value.
func parseCInt(s string, min, max int64) (int64, error) {
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

// inetNtop6 formats a 16-byte address as glibc's inet_ntop(AF_INET6) does,
// which is how the C tools print GIDs. It differs from net/netip: the first
// longest run of two or more zero groups becomes "::", and an address whose
// first six groups are zero, or that is ::ffff:0:0/96, ends in dotted IPv4.
// (The same conversion as cmd/ibinfo's; a main package cannot share it.)
func inetNtop6(a [16]byte) string {
	var words [8]uint16
	for i := range words {
		words[i] = uint16(a[2*i])<<8 | uint16(a[2*i+1])
	}
	bestBase, bestLen := -1, 0
	curBase, curLen := -1, 0
	for i, w := range words {
		if w == 0 {
			if curBase < 0 {
				curBase, curLen = i, 1
			} else {
				curLen++
			}
			continue
		}
		if curBase >= 0 {
			if bestBase < 0 || curLen > bestLen {
				bestBase, bestLen = curBase, curLen
			}
			curBase = -1
		}
	}
	if curBase >= 0 && (bestBase < 0 || curLen > bestLen) {
		bestBase, bestLen = curBase, curLen
	}
	if bestBase >= 0 && bestLen < 2 {
		bestBase = -1
	}
	var b strings.Builder
	for i := 0; i < 8; i++ {
		if bestBase >= 0 && i >= bestBase && i < bestBase+bestLen {
			if i == bestBase {
				b.WriteByte(':')
			}
			continue
		}
		if i != 0 {
			b.WriteByte(':')
		}
		if i == 6 && bestBase == 0 && (bestLen == 6 || (bestLen == 5 && words[5] == 0xffff)) {
			fmt.Fprintf(&b, "%d.%d.%d.%d", a[12], a[13], a[14], a[15])
			return b.String()
		}
		fmt.Fprintf(&b, "%x", words[i])
	}
	if bestBase >= 0 && bestBase+bestLen == 8 {
		b.WriteByte(':')
	}
	return b.String()
}

// cFixed2 is C's printf("%.2f", v): Go's %.2f except for the infinities
// and NaN, which glibc spells "inf", "-inf" and "nan"/"-nan".
func cFixed2(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	case math.IsNaN(v):
		if math.Signbit(v) {
			return "-nan"
		}
		return "nan"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}
