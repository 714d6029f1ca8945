package uverbs

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ConnectAttr describes a connection for QP.Connect. Zero fields take the
// values ibv_rc_pingpong uses.
type ConnectAttr struct {
	Port uint8 // default 1
	// SGIDIndex is the local GID to send from; -1 sends without a GRH
	// (InfiniBand only). RoCE needs one: see Context.RecommendedGID.
	SGIDIndex int
	MTU       MTU    // default 1024
	Access    Access // remote rights the QP grants (RC/UC)
	Qkey      uint32 // UD
	LocalPSN  uint32
	Remote    Endpoint
	SL        uint8
	// RC tunables: defaults 14 (timeout), 7, 7, 12 (min RNR timer), 1, 1.
	Timeout, RetryCnt, RNRRetry, MinRNRTimer, MaxRdAtomic, MaxDestRdAtomic uint8
}

func orDefault(v, def uint8) uint8 {
	if v == 0 {
		return def
	}
	return v
}

// Connect moves a RESET QP through INIT and RTR to RTS, connected to the
// remote endpoint (RC, UC) or ready to send datagrams (UD).
func (qp *QP) Connect(a ConnectAttr) error {
	if err := qp.use(); err != nil {
		return fmt.Errorf("uverbs: connect: %w", err)
	}
	port := orDefault(a.Port, 1)
	mtu := a.MTU
	if mtu == 0 {
		mtu = MTU1024
	}
	if a.SGIDIndex < -1 || a.SGIDIndex > 255 {
		return fmt.Errorf("uverbs: connect: SGIDIndex %d out of range: %w", a.SGIDIndex, unix.EINVAL)
	}
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
	rtr := QPAttr{State: QPStateRTR}
	mask = QPAttrState
	if qp.typ != QPTypeUD {
		rtr.PathMTU = mtu
		rtr.DestQPN = a.Remote.QPN
		rtr.RQPSN = a.Remote.PSN
		rtr.AH = AHAttr{DLID: a.Remote.LID, SL: a.SL, PortNum: port}
		if a.SGIDIndex >= 0 {
			rtr.AH.IsGlobal = true
			rtr.AH.GRH = GlobalRoute{DGID: a.Remote.GID, SGIDIndex: uint8(a.SGIDIndex), HopLimit: 1}
		}
		mask |= QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN
		if qp.typ == QPTypeRC {
			rtr.MaxDestRdAtomic = orDefault(a.MaxDestRdAtomic, 1)
			rtr.MinRNRTimer = orDefault(a.MinRNRTimer, 12)
			mask |= QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer
		}
	}
	if err := qp.Modify(&rtr, mask); err != nil {
		return fmt.Errorf("uverbs: connect: to RTR: %w", err)
	}
	rts := QPAttr{State: QPStateRTS, SQPSN: a.LocalPSN}
	mask = QPAttrState | QPAttrSQPSN
	if qp.typ == QPTypeRC {
		rts.Timeout = orDefault(a.Timeout, 14)
		rts.RetryCnt = orDefault(a.RetryCnt, 7)
		rts.RNRRetry = orDefault(a.RNRRetry, 7)
		rts.MaxRdAtomic = orDefault(a.MaxRdAtomic, 1)
		mask |= QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRdAtomic
	}
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
		if e.Port == uint32(port) {
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
