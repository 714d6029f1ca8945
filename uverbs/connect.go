package uverbs

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ConnectAttr describes a connection for QP.Connect (or its two steps,
// ReadyToReceive and ReadyToSend). Zero fields take the defaults given,
// those of ibv_rc_pingpong except the MTU; Explicit makes a zero mean
// zero where zero is a value (no retries, wait forever).
type ConnectAttr struct {
	Port uint8 // default 1
	// SGIDIndex is the local GID to send from; -1 sends without a GRH
	// (InfiniBand only). RoCE needs one: see Context.RecommendedGID.
	SGIDIndex int
	// MTU is the path MTU; default the port's active MTU. Both peers must
	// use the same: set it where their ports differ.
	MTU    MTU
	Access Access // remote rights the QP grants (RC/UC)
	Qkey   uint32 // UD
	// LocalPSN is the first packet sequence number this side sends (the
	// PSN of the Endpoint it gives the peer).
	LocalPSN uint32
	Remote   Endpoint
	// The address: service level (0..15), the GRH's hop limit (default
	// 1, the peer on the same subnet; raise it for routed RoCE v2), traffic
	// class and flow label (20 bits).
	SL           uint8
	HopLimit     uint8
	TrafficClass uint8
	FlowLabel    uint32
	// RC tunables. Timeout (0..31; default 14) is the local ACK timeout,
	// 4.096 µs × 2^Timeout, 0 waiting forever; RetryCnt (0..7; default 7)
	// the transport retries and RNRRetry (0..7; default 7, 7 meaning
	// forever) the receiver-not-ready retries before the request fails;
	// MinRNRTimer (0..31; default 12) the RNR NAK delay this side asks of
	// the peer, in the IB encoding; MaxRdAtomic and MaxDestRdAtomic
	// (default 1) the RDMA reads and atomics in flight as initiator and as
	// target.
	Timeout, RetryCnt, RNRRetry, MinRNRTimer, MaxRdAtomic, MaxDestRdAtomic uint8
	// Explicit lists the tunables whose zero is meant as zero.
	Explicit ConnectField
}

// ConnectField names a ConnectAttr tunable for ConnectAttr.Explicit.
type ConnectField uint8

// ConnectAttr tunables that may be set to zero.
const (
	ExplicitTimeout     ConnectField = 1 << iota // Timeout 0: wait for ACKs forever
	ExplicitRetryCnt                             // RetryCnt 0: no transport retries
	ExplicitRNRRetry                             // RNRRetry 0: no RNR retries
	ExplicitMinRNRTimer                          // MinRNRTimer 0: 655.36 ms
)

func (a *ConnectAttr) tunable(v uint8, f ConnectField, def uint8) uint8 {
	if v == 0 && a.Explicit&f == 0 {
		return def
	}
	return v
}

func orDefault(v, def uint8) uint8 {
	if v == 0 {
		return def
	}
	return v
}

func (a *ConnectAttr) check() error {
	for _, f := range []struct {
		name string
		v    uint8
		max  uint8
	}{{"Timeout", a.Timeout, 31}, {"RetryCnt", a.RetryCnt, 7}, {"RNRRetry", a.RNRRetry, 7}, {"MinRNRTimer", a.MinRNRTimer, 31}, {"SL", a.SL, 15}} {
		if f.v > f.max {
			return fmt.Errorf("uverbs: connect: %s %d is outside 0..%d: %w", f.name, f.v, f.max, unix.EINVAL)
		}
	}
	if a.SGIDIndex < -1 || a.SGIDIndex > 255 {
		return fmt.Errorf("uverbs: connect: SGIDIndex %d is outside -1..255: %w", a.SGIDIndex, unix.EINVAL)
	}
	if a.FlowLabel > 0xfffff {
		return fmt.Errorf("uverbs: connect: FlowLabel %#x is wider than 20 bits: %w", a.FlowLabel, unix.EINVAL)
	}
	if a.MTU != 0 && a.MTU.Bytes() == 0 {
		return fmt.Errorf("uverbs: connect: MTU %d is not an MTU: %w", a.MTU, unix.EINVAL)
	}
	if a.LocalPSN > 0xffffff || a.Remote.PSN > 0xffffff || a.Remote.QPN > 0xffffff {
		return fmt.Errorf("uverbs: connect: LocalPSN %#x, Remote.PSN %#x or Remote.QPN %#x is wider than 24 bits: %w",
			a.LocalPSN, a.Remote.PSN, a.Remote.QPN, unix.EINVAL)
	}
	return nil
}

// rtr is the RTR step's attributes for a QP of type typ.
func (a *ConnectAttr) rtr(typ QPType, port uint8, mtu MTU) (QPAttr, QPAttrMask) {
	rtr := QPAttr{State: QPStateRTR}
	mask := QPAttrState
	if typ == QPTypeUD {
		return rtr, mask
	}
	rtr.PathMTU = mtu
	rtr.DestQPN = a.Remote.QPN
	rtr.RQPSN = a.Remote.PSN
	rtr.AH = AHAttr{DLID: a.Remote.LID, SL: a.SL, PortNum: port}
	if a.SGIDIndex >= 0 {
		rtr.AH.IsGlobal = true
		rtr.AH.GRH = GlobalRoute{DGID: a.Remote.GID, SGIDIndex: a.SGIDIndex, HopLimit: orDefault(a.HopLimit, 1),
			TrafficClass: a.TrafficClass, FlowLabel: a.FlowLabel}
	}
	mask |= QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN
	if typ == QPTypeRC {
		rtr.MaxDestRdAtomic = orDefault(a.MaxDestRdAtomic, 1)
		rtr.MinRNRTimer = a.tunable(a.MinRNRTimer, ExplicitMinRNRTimer, 12)
		mask |= QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer
	}
	return rtr, mask
}

// rts is the RTS step's attributes for a QP of type typ.
func (a *ConnectAttr) rts(typ QPType) (QPAttr, QPAttrMask) {
	rts := QPAttr{State: QPStateRTS, SQPSN: a.LocalPSN}
	mask := QPAttrState | QPAttrSQPSN
	if typ == QPTypeRC {
		rts.Timeout = a.tunable(a.Timeout, ExplicitTimeout, 14)
		rts.RetryCnt = a.tunable(a.RetryCnt, ExplicitRetryCnt, 7)
		rts.RNRRetry = a.tunable(a.RNRRetry, ExplicitRNRRetry, 7)
		rts.MaxRdAtomic = orDefault(a.MaxRdAtomic, 1)
		mask |= QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRdAtomic
	}
	return rts, mask
}

// Connect moves a RESET QP through INIT and RTR to RTS, connected to the
// remote endpoint (RC, UC) or ready to send datagrams (UD): ReadyToReceive
// then ReadyToSend.
func (qp *QP) Connect(a ConnectAttr) error {
	if err := qp.ReadyToReceive(a); err != nil {
		return err
	}
	return qp.ReadyToSend(a)
}

// ReadyToReceive moves a RESET QP through INIT to RTR (ready to receive),
// the first half of Connect: the QP takes the peer's packets but sends
// none, so a program can post its receives before telling the peer to
// send, as ibv_rc_pingpong does. ReadyToSend completes the connection.
func (qp *QP) ReadyToReceive(a ConnectAttr) error {
	if err := qp.use(); err != nil {
		return fmt.Errorf("uverbs: connect: %w", err)
	}
	if err := a.check(); err != nil {
		return err
	}
	port := orDefault(a.Port, 1)
	init := QPAttr{State: QPStateInit, Port: port, AccessFlags: a.Access, Qkey: a.Qkey}
	mask := QPAttrState | QPAttrPkeyIndex | QPAttrPort
	if qp.typ == QPTypeUD {
		mask |= QPAttrQkey
	} else {
		mask |= QPAttrAccessFlags
	}
	if err := qp.Modify(&init, mask); err != nil {
		return fmt.Errorf("uverbs: connect: to INIT: %w", err)
	}
	var mtu MTU
	if qp.typ != QPTypeUD {
		if mtu = a.MTU; mtu == 0 {
			pa, err := qp.pd.ctx.QueryPort(port)
			if err != nil {
				return fmt.Errorf("uverbs: connect: the port's active MTU: %w", err)
			}
			mtu = pa.ActiveMTU
		}
	}
	rtr, mask := a.rtr(qp.typ, port, mtu)
	if err := qp.Modify(&rtr, mask); err != nil {
		return fmt.Errorf("uverbs: connect: to RTR: %w", err)
	}
	return nil
}

// ReadyToSend moves an RTR QP to RTS (ready to send), the second half of
// Connect, with a's LocalPSN and (RC) its timeout and retry tunables.
func (qp *QP) ReadyToSend(a ConnectAttr) error {
	if err := qp.use(); err != nil {
		return fmt.Errorf("uverbs: connect: %w", err)
	}
	if err := a.check(); err != nil {
		return err
	}
	rts, mask := a.rts(qp.typ)
	if err := qp.Modify(&rts, mask); err != nil {
		return fmt.Errorf("uverbs: connect: to RTS: %w", err)
	}
	return nil
}

// ErrNoRoutableGID is returned by RecommendedGID when a port has no GID
// that RoCE traffic can use.
var ErrNoRoutableGID = errors.New("uverbs: no routable RoCE GID on the port")

// RecommendedGID picks the GID RoCE traffic on port should use: a RoCE v2
// GID, IPv4-mapped preferred, not link-local, bound to a netdev. On an
// InfiniBand port it returns GID 0.
func (c *Context) RecommendedGID(port uint8) (GIDEntry, error) {
	pa, err := c.QueryPort(port)
	if err != nil {
		return GIDEntry{}, err
	}
	if pa.LinkLayer != LinkLayerEthernet {
		return c.QueryGID(port, 0)
	}
	table, err := c.QueryGIDTable()
	if err != nil {
		return GIDEntry{}, err
	}
	var ports []GIDEntry
	for _, e := range table {
		if e.Port == port {
			ports = append(ports, e)
		}
	}
	if best, ok := PickRoCEGID(ports); ok {
		return best, nil
	}
	return GIDEntry{}, fmt.Errorf("%w %d of %s", ErrNoRoutableGID, port, c.name)
}

// PickRoCEGID chooses from a port's GID entries as RecommendedGID does:
// RoCE v2 only, never link-local, loopback, multicast, unspecified or
// without a netdev; IPv4-mapped before
// IPv6; the lowest index among equals.
func PickRoCEGID(entries []GIDEntry) (GIDEntry, bool) {
	var best GIDEntry
	found := false
	score := func(e GIDEntry) int {
		a := e.GID.Addr()
		if e.Type != GIDTypeRoCEv2 || e.NetdevIfindex == 0 || a.IsUnspecified() || a.IsLinkLocalUnicast() ||
			a.IsLoopback() || a.Unmap().IsLoopback() || a.IsMulticast() {
			return -1
		}
		if e.GID.Addr().Is4In6() {
			return 2
		}
		return 1
	}
	for _, e := range entries {
		s := score(e)
		if s < 0 {
			continue
		}
		if !found || s > score(best) || (s == score(best) && e.Index < best.Index) {
			best, found = e, true
		}
	}
	return best, found
}
