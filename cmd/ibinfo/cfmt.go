package main

import (
	"fmt"
	"math"
	"strings"
)

// C conversions that ibv_devinfo's output depends on, reproduced exactly.

// strtol is C's strtol(s, NULL, 0) on a 64-bit system: leading white space,
// an optional sign, a 0x or 0 prefix choosing base 16 or 8, digits up to the
// first character that is not one, clamped to the int64 range on overflow.
// Text with no digits gives 0.
func strtol(s string) int64 {
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

// cString is what C's "%s" prints of a char buffer: everything before the
// first NUL.
func cString(b []byte) string {
	if k := strings.IndexByte(string(b), 0); k >= 0 {
		return string(b[:k])
	}
	return string(b)
}

// inetNtop6 formats a 16-byte address as glibc's inet_ntop(AF_INET6) does.
// It differs from net/netip: the first longest run of two or more zero
// groups becomes "::", and an address whose first six groups are zero, or
// that is ::ffff:0:0/96, ends in dotted IPv4 ("::1.2.3.4", "::ffff:1.2.3.4").
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
