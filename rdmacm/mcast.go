package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/uverbs"
)

// Multicast is a UD ID's membership of a multicast group.
type Multicast struct {
	id       *ID
	uid      uint64
	handle   uint32
	group    netip.Addr
	sendOnly bool
	ud       UDParam
	attached atomic.Bool // set by JoinMulticast, read by a Close that may run meanwhile
}

// JoinMulticast joins the multicast group (an IPv4 group on RoCE v2) on a
// UD ID that resolved or bound an address, and waits for MULTICAST_JOIN.
// Unless sendOnly, the ID's QP (CreateQP) is attached to the group so it
// receives the group's datagrams. Send to the group with an AH from
// UD().AH, remote QPN UD().QPNum (0xFFFFFF) and Q_Key UD().QKey.
func (id *ID) JoinMulticast(ctx context.Context, group netip.Addr, sendOnly bool) (*Multicast, error) {
	const op = "join multicast"
	if err := id.use(op); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, fmt.Errorf("rdmacm: %s: nil context: %w", op, unix.EINVAL)
	}
	if id.qpType != uverbs.QPTypeUD {
		return nil, fmt.Errorf("rdmacm: %s: the ID is %v; multicast needs a UD ID (PortSpaceUDP): %w", op, id.qpType, unix.EINVAL)
	}
	if !group.IsMulticast() {
		return nil, fmt.Errorf("rdmacm: %s: group %v is not a multicast address: %w", op, group, unix.EINVAL)
	}
	mc := &Multicast{id: id, group: group, sendOnly: sendOnly}
	resp := onHeap[abi.UCMCreateIDResp]()
	req := &abi.UCMJoinMcast{Response: uint64(uintptr(unsafe.Pointer(resp))), ID: id.handle}
	n, err := putSockaddr(req.Addr[:], netip.AddrPortFrom(group, 0), "group")
	if err != nil {
		return nil, fmt.Errorf("rdmacm: %s: %w", op, err)
	}
	req.AddrSize = uint16(n)
	if sendOnly {
		req.JoinFlags = abi.MCJoinSendOnlyFullMember
	}
	mc.uid = nextUID.Add(1)
	uids.Lock()
	uids.mcs[mc.uid] = mc
	uids.Unlock()
	req.UID = mc.uid
	err = write(id.ch, abi.UCMCmdJoinMcast, req, unsafe.Sizeof(*resp))
	mc.handle = resp.ID
	keepAlive(resp)
	if err != nil {
		forgetMembership(mc.uid)
		return nil, addrErr(op, group, err)
	}
	id.mu.Lock()
	if id.closed {
		// Close ran meanwhile; its DESTROY_ID leaves every group of the
		// ID in the kernel, this one too.
		id.mu.Unlock()
		forgetMembership(mc.uid)
		return nil, errClosed(op)
	}
	id.mcs = append(id.mcs, mc)
	id.mu.Unlock()
	ev, err := id.next(ctx, op, func(ev Event) bool {
		return ev.Multicast == mc && (ev.Type == EventMulticastJoin || ev.Type == EventMulticastError)
	})
	if err == nil && ev.Type == EventMulticastError {
		err = fmt.Errorf("rdmacm: %s %v: %w", op, group, ev.Err())
	}
	if err == nil {
		mc.ud = *ev.UD
		if qp := id.QP(); qp != nil && !sendOnly {
			if err = qp.AttachMulticast(mc.ud.AH.GRH.DGID, mc.ud.AH.DLID); err == nil {
				mc.attached.Store(true)
			} else {
				err = fmt.Errorf("rdmacm: %s %v: attach QP %d: %w", op, group, qp.QPN(), err)
			}
		}
	}
	if err != nil {
		mc.Leave()
		return nil, err
	}
	return mc, nil
}

// Group returns the multicast group's IP address.
func (mc *Multicast) Group() netip.Addr { return mc.group }

// UD returns what MULTICAST_JOIN reported: QPNum 0xFFFFFF, the group's
// Q_Key, and the address vector (DGID = the group's MGID) for an AH.
func (mc *Multicast) UD() UDParam { return mc.ud }

// MGID returns the group's multicast GID.
func (mc *Multicast) MGID() uverbs.GID { return mc.ud.AH.GRH.DGID }

// Leave detaches the ID's QP from the group and leaves it. Closing the ID
// leaves every group. Leave is idempotent: once left (by Leave or by the
// ID's Close, which may still be leaving), it returns nil.
func (mc *Multicast) Leave() error {
	if mc == nil {
		return nil
	}
	id := mc.id
	// Whoever takes the membership out of id.mcs, under id.mu, leaves it:
	// this, or Close, once.
	id.mu.Lock()
	i := slices.Index(id.mcs, mc)
	if i < 0 {
		id.mu.Unlock()
		return nil
	}
	id.mcs = append(id.mcs[:i:i], id.mcs[i+1:]...)
	qp := id.qp
	id.mu.Unlock()
	return mc.leave(qp)
}

// leave detaches qp and sends LEAVE_MCAST; its caller took mc out of the
// ID's memberships.
func (mc *Multicast) leave(qp *uverbs.QP) error {
	var errs []error
	if mc.attached.Load() && qp != nil {
		if err := qp.DetachMulticast(mc.ud.AH.GRH.DGID, mc.ud.AH.DLID); err != nil && !errors.Is(err, uverbs.ErrDeviceRemoved) {
			errs = append(errs, fmt.Errorf("rdmacm: leave multicast %v: detach: %w", mc.group, err))
		}
	}
	resp := onHeap[abi.UCMDestroyIDResp]()
	err := write(mc.id.ch, abi.UCMCmdLeaveMcast, &abi.UCMDestroyID{Response: uint64(uintptr(unsafe.Pointer(resp))), ID: mc.handle},
		unsafe.Sizeof(*resp))
	keepAlive(resp)
	if err != nil && !errors.Is(err, uverbs.ErrClosed) {
		errs = append(errs, cmdErr("leave multicast", err))
	}
	forgetMembership(mc.uid)
	return errors.Join(errs...)
}

// forgetMembership stops delivering events for the membership uid.
func forgetMembership(uid uint64) {
	uids.Lock()
	delete(uids.mcs, uid)
	uids.Unlock()
}
