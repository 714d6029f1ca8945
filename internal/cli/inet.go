package cli

import (
	"fmt"
	"strings"
)

// InetNtop6 formats a 16-byte address as glibc's inet_ntop(AF_INET6) does,
// which is how the C tools print GIDs. It differs from net/netip: the first
// longest run of two or more zero groups becomes "::", and an address whose
// first six groups are zero, or that is ::ffff:0:0/96, ends in dotted IPv4
// ("::1.2.3.4", "::ffff:1.2.3.4").
func InetNtop6(a [16]byte) string {
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
