package rdmacm

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
)

// putSockaddr writes a as a Linux sockaddr_in or sockaddr_in6 into b and
// returns its size. field names the argument in errors.
func putSockaddr(b []byte, a netip.AddrPort, field string) (int, error) {
	if !a.IsValid() {
		return 0, fmt.Errorf("%s: %v is not an address: %w", field, a, unix.EINVAL)
	}
	ip := a.Addr()
	if ip.Is4In6() {
		ip = ip.Unmap()
	}
	if ip.Is4() {
		binary.LittleEndian.PutUint16(b[0:], abi.AFInet)
		binary.BigEndian.PutUint16(b[2:], a.Port())
		v := ip.As4()
		copy(b[4:8], v[:])
		return abi.SockaddrIn, nil
	}
	binary.LittleEndian.PutUint16(b[0:], abi.AFInet6)
	binary.BigEndian.PutUint16(b[2:], a.Port())
	v := ip.As16()
	copy(b[8:24], v[:])
	if z := ip.Zone(); z != "" {
		ifi, err := net.InterfaceByName(z)
		if err != nil {
			return 0, fmt.Errorf("%s: zone %q of %v: %w", field, z, a, err)
		}
		binary.LittleEndian.PutUint32(b[24:], uint32(ifi.Index))
	} else if ip.IsLinkLocalUnicast() {
		return 0, fmt.Errorf("%s: link-local %v needs a zone (%%interface): %w", field, a, unix.EINVAL)
	}
	return abi.SockaddrIn6, nil
}

// sockaddr decodes a sockaddr_in, sockaddr_in6 or sockaddr_ib from the
// kernel. An AF_IB address yields its GID as an IPv6 address and no port.
func sockaddr(b []byte) netip.AddrPort {
	if len(b) < 2 {
		return netip.AddrPort{}
	}
	switch binary.LittleEndian.Uint16(b) {
	case abi.AFInet:
		if len(b) < abi.SockaddrIn {
			return netip.AddrPort{}
		}
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:]))
	case abi.AFInet6:
		if len(b) < abi.SockaddrIn6 {
			return netip.AddrPort{}
		}
		ip := netip.AddrFrom16([16]byte(b[8:24]))
		if scope := binary.LittleEndian.Uint32(b[24:]); scope != 0 {
			if ifi, err := net.InterfaceByIndex(int(scope)); err == nil {
				ip = ip.WithZone(ifi.Name)
			}
		}
		return netip.AddrPortFrom(ip, binary.BigEndian.Uint16(b[2:]))
	case abi.AFIB:
		if len(b) < abi.SockaddrIB {
			return netip.AddrPort{}
		}
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), 0)
	}
	return netip.AddrPort{}
}

// sockaddrGID returns the GID of an AF_IB sockaddr (QUERY GID).
func sockaddrGID(b []byte) [16]byte {
	if len(b) >= abi.SockaddrIB && binary.LittleEndian.Uint16(b) == abi.AFIB {
		return [16]byte(b[8:24])
	}
	return [16]byte{}
}
