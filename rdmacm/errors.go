package rdmacm

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/sysfs"
	"github.com/goverbs/goverbs/uverbs"
)

func keepAlive(x any) { runtime.KeepAlive(x) }

// onHeap returns a new zero T on the heap. The kernel writes responses
// through a user address held as an integer, which the compiler cannot see:
// a buffer it kept on a goroutine stack could move when the stack grows.
func onHeap[T any]() *T {
	p := new(T)
	if neverTrue {
		escapeSink = p
	}
	return p
}

var (
	neverTrue bool // never set: makes onHeap's value escape
	//lint:ignore U1000 only ever assigned: the assignment is what moves onHeap's value to the heap
	escapeSink any
)

// cmdErr wraps the errno of a command with its name. ENXIO means the
// kernel tore the ID down after a device removal.
func cmdErr(op string, err error) error {
	if errors.Is(err, uverbs.ErrClosed) {
		return errClosed(op)
	}
	if errors.Is(err, unix.ENXIO) {
		return fmt.Errorf("rdmacm: %s: %w: %w", op, uverbs.ErrDeviceRemoved, err)
	}
	return fmt.Errorf("rdmacm: %s: %w", op, err)
}

// statusErrno turns an event's negative errno status into an error.
func statusErrno(status int) error {
	if status < 0 {
		return unix.Errno(-status)
	}
	return fmt.Errorf("status %d", status)
}

// NoDeviceError reports that no RDMA device owns an address: the IP is on a
// netdev without an RDMA device (ENODEV), or on no local netdev at all
// (EADDRNOTAVAIL). It names the netdevs that do have RDMA devices.
type NoDeviceError struct {
	Op   string
	Addr netip.Addr
	// RDMANetdevs lists "device/port on netdev (addresses)" for every RDMA
	// port with a netdev, from sysfs.
	RDMANetdevs []string
	Err         error // unix.ENODEV or unix.EADDRNOTAVAIL
}

func (e *NoDeviceError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rdmacm: %s: ", e.Op)
	if errors.Is(e.Err, unix.EADDRNOTAVAIL) {
		fmt.Fprintf(&b, "no local network interface has address %v", e.Addr)
	} else {
		fmt.Fprintf(&b, "no RDMA device owns address %v (its network interface has no RDMA device)", e.Addr)
	}
	if len(e.RDMANetdevs) == 0 {
		b.WriteString("; there are no RDMA devices with a network interface (create one: rdma link add rxe0 type rxe netdev <if>)")
	} else {
		fmt.Fprintf(&b, "; RDMA devices are on: %s", strings.Join(e.RDMANetdevs, ", "))
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

func (e *NoDeviceError) Unwrap() error { return e.Err }

// rdmaNetdevs lists the RDMA ports that have a netdev, with the IPs their
// GID tables hold.
func rdmaNetdevs() []string {
	devs, err := sysfs.New("/").Devices()
	if err != nil {
		return nil
	}
	var out []string
	for _, d := range devs {
		for _, p := range d.Ports {
			nd := ""
			var ips []string
			for _, g := range p.GIDs {
				if g.Netdev == "" {
					continue
				}
				nd = g.Netdev
				a := g.GID.Addr().Unmap()
				if !a.IsLinkLocalUnicast() && !slicesContains(ips, a.String()) {
					ips = append(ips, a.String())
				}
			}
			if nd == "" {
				continue
			}
			sort.Strings(ips)
			s := fmt.Sprintf("%s/%d on %s", d.Name, p.Num, nd)
			if len(ips) > 0 {
				s += " (" + strings.Join(ips, " ") + ")"
			}
			out = append(out, s)
		}
	}
	return out
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// addrErr explains a failed bind or address resolution.
func addrErr(op string, addr netip.Addr, err error) error {
	if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.EADDRNOTAVAIL) {
		var errno unix.Errno
		errors.As(err, &errno)
		return &NoDeviceError{Op: op, Addr: addr, RDMANetdevs: rdmaNetdevs(), Err: errno}
	}
	if errors.Is(err, unix.ETIMEDOUT) {
		return fmt.Errorf("rdmacm: %s: %v did not answer (no ARP/neighbour reply): %w", op, addr, err)
	}
	if errors.Is(err, unix.ENETUNREACH) || errors.Is(err, unix.EHOSTUNREACH) {
		return fmt.Errorf("rdmacm: %s: no route to %v: %w", op, addr, err)
	}
	return cmdErr(op, err)
}

// RejectedError is a connection refused by the peer: its connection
// manager's reject reason (IB CM) and the private data of the reject
// (148 bytes, zero-padded, for a consumer reject). It matches
// unix.ECONNREFUSED with errors.Is.
type RejectedError struct {
	// Reason is the IB CM reject reason: 28 (consumer defined) for Reject
	// or an ID closed before accepting, 8 (invalid service ID) when nobody
	// listens on the port.
	Reason      int
	PrivateData []byte
}

func (e *RejectedError) Error() string {
	switch e.Reason {
	case abi.CMRejInvalidServiceID:
		return "rdmacm: connection refused: nobody listens on the port (reject reason 8, invalid service ID)"
	case abi.CMRejConsumerDefined:
		return "rdmacm: connection refused by the peer (reject reason 28, consumer defined)"
	case abi.CMRejTimeout:
		return "rdmacm: connection refused: the peer timed out (reject reason 4)"
	}
	return fmt.Sprintf("rdmacm: connection refused (reject reason %d)", e.Reason)
}

// Is makes errors.Is(err, unix.ECONNREFUSED) hold.
func (e *RejectedError) Is(target error) bool { return target == unix.ECONNREFUSED }

// NobodyListening reports whether the reject says no one listens on the
// port (reason 8).
func (e *RejectedError) NobodyListening() bool { return e.Reason == abi.CMRejInvalidServiceID }

// eventErr is Event.Err.
func eventErr(e Event) error {
	switch e.Type {
	case EventRejected:
		return &RejectedError{Reason: e.Status, PrivateData: e.Param.PrivateData}
	case EventUnreachable:
		if e.ID != nil && e.ID.qpType == uverbs.QPTypeUD && e.Status > 0 {
			reason := map[int]string{abi.CMSIDRUnsupported: "no UD listener on the port", abi.CMSIDRReject: "rejected",
				abi.CMSIDRNoQP: "no QP", abi.CMSIDRRedirect: "redirect", abi.CMSIDRUnsupportedVersion: "unsupported version"}[e.Status]
			return fmt.Errorf("rdmacm: %v: SIDR status %d (%s): %w", e.Type, e.Status, reason, unix.ECONNREFUSED)
		}
		return fmt.Errorf("rdmacm: %v: the peer did not answer: %w", e.Type, statusErrno(e.Status))
	case EventAddrError, EventRouteError, EventConnectError, EventMulticastError:
		return fmt.Errorf("rdmacm: %v: %w", e.Type, statusErrno(e.Status))
	case EventDisconnected:
		return fmt.Errorf("rdmacm: %v: %w", e.Type, unix.ECONNRESET)
	case EventDeviceRemoval:
		return fmt.Errorf("rdmacm: %v: %w", e.Type, uverbs.ErrDeviceRemoved)
	}
	if e.Status < 0 {
		return fmt.Errorf("rdmacm: %v: %w", e.Type, statusErrno(e.Status))
	}
	return nil
}
