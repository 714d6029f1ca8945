package uverbs

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
)

// AH is an address handle: the destination of UD sends.
type AH struct {
	// prov is first: a work request's AH is read by the providers as a
	// *provider.AHRef (TestDataPathLayout).
	prov   provider.AH
	pd     *PD
	handle uint32
	attr   AHAttr

	mu     sync.Mutex
	closed bool
	ref    *cleanupRef
}

// CreateAH creates an address handle. On RoCE ports the address must be
// global (IsGlobal with a DGID and SGIDIndex); the kernel resolves the
// destination MAC.
func (pd *PD) CreateAH(attr AHAttr) (*AH, error) {
	defer runtime.KeepAlive(pd) // reachable until the command is done, so no cleanup destroys it meanwhile
	if err := pd.use(); err != nil {
		return nil, fmt.Errorf("uverbs: create_ah: %w", err)
	}
	if attr.PortNum == 0 {
		return nil, fmt.Errorf("uverbs: create_ah: PortNum 0 is invalid; ports are numbered from 1: %w", unix.EINVAL)
	}
	if err := checkAHAttr("create_ah", &attr); err != nil {
		return nil, err
	}
	c := pd.ctx
	pc, ok := c.pctx.(provider.AHContext)
	if !ok {
		return nil, fmt.Errorf("uverbs: create_ah: %s provider: %w", c.prov.Name(), ErrNotSupported)
	}
	pa, err := c.QueryPort(attr.PortNum)
	if err != nil {
		return nil, fmt.Errorf("uverbs: create_ah: %w", err)
	}
	if pa.LinkLayer == LinkLayerEthernet && !attr.IsGlobal {
		return nil, fmt.Errorf("uverbs: create_ah: port %d is RoCE: the address needs IsGlobal and a GRH: %w", attr.PortNum, unix.EINVAL)
	}
	pah, err := pc.NewAH()
	if err != nil {
		return nil, fmt.Errorf("uverbs: create_ah: %s provider: %w", c.prov.Name(), err)
	}
	id := c.nextID.Add(1)
	d := qpDest(&attr)
	req := abi.CreateAH{UserHandle: id, PDHandle: pd.handle, Attr: abi.AHAttr{
		GRH:  abi.GlobalRoute{DGID: d.DGID, FlowLabel: d.FlowLabel, SGIDIndex: d.SGIDIndex, HopLimit: d.HopLimit, TrafficClass: d.TrafficClass},
		DLID: d.DLID, SL: d.SL, SrcPathBits: d.SrcPathBits, StaticRate: d.StaticRate, IsGlobal: d.IsGlobal, PortNum: d.PortNum,
	}}
	if a, ok := pah.(provider.AHAddresser); ok {
		addr := provider.AHAddress{Attr: req.Attr, Ethernet: pa.LinkLayer == LinkLayerEthernet}
		if addr.Ethernet {
			g, err := c.QueryGID(attr.PortNum, int(d.SGIDIndex))
			if err != nil {
				return nil, fmt.Errorf("uverbs: create_ah: %w", err)
			}
			addr.RoCEv2 = g.Type == GIDTypeRoCEv2
		}
		if err := a.SetAddress(addr); err != nil {
			return nil, fmt.Errorf("uverbs: create_ah: %s provider: %w", c.prov.Name(), err)
		}
	}
	drvIn, drvOut := pah.CreateData()
	var resp abi.CreateAHResp
	if err := c.writeDriver("create_ah", abi.CmdCreateAH, asBytes(&req), drvIn, asBytes(&resp), drvOut); err != nil {
		return nil, err
	}
	ah := &AH{pd: pd, handle: resp.AHHandle, attr: attr, prov: pah, ref: &cleanupRef{}}
	if err := pah.Created(ah.handle); err != nil {
		destroyAH(c, ah.handle)
		return nil, err
	}
	runtime.AddCleanup(ah, func(a destroyArgs) { a.run() }, destroyArgs{c, ah.ref, destroyAH, ah.handle, parents{pd: ah.pd}})
	return ah, nil
}

// Attr returns the address the AH was created with.
func (ah *AH) Attr() AHAttr { return ah.attr }

// Handle returns the kernel's handle of the AH.
func (ah *AH) Handle() uint32 { return ah.handle }

// Close destroys the AH. Closing twice is a no-op.
func (ah *AH) Close() error {
	if ah == nil {
		return nil
	}
	ah.mu.Lock()
	defer ah.mu.Unlock()
	if ah.closed {
		return nil
	}
	if err := ah.pd.ctx.destroy(func() error { return destroyAH(ah.pd.ctx, ah.handle) }); err != nil {
		return err
	}
	ah.closed = true
	ah.ref.finish()
	ah.prov.Destroyed()
	return nil
}

// AttachMulticast joins the UD QP to the multicast group gid (lid 0 on
// RoCE).
func (qp *QP) AttachMulticast(gid GID, lid uint16) error {
	return qp.mcast("attach_mcast", abi.CmdAttachMcast, gid, lid)
}

// DetachMulticast leaves the multicast group.
func (qp *QP) DetachMulticast(gid GID, lid uint16) error {
	return qp.mcast("detach_mcast", abi.CmdDetachMcast, gid, lid)
}

func (qp *QP) mcast(verb string, cmd uint32, gid GID, lid uint16) error {
	defer runtime.KeepAlive(qp) // reachable until the command is done, so no cleanup destroys it meanwhile
	if err := qp.use(); err != nil {
		return fmt.Errorf("uverbs: %s: %w", verb, err)
	}
	if qp.typ != QPTypeUD {
		return fmt.Errorf("uverbs: %s: only UD QPs join multicast groups, QP %d is %v: %w", verb, qp.qpn, qp.typ, unix.EINVAL)
	}
	req := abi.AttachMcast{GID: gid, QPHandle: qp.handle, MLID: lid}
	return qp.pd.ctx.conn.Write(verb, &transport.Write{Cmd: cmd, In: asBytes(&req), CoreIn: int(unsafe.Sizeof(req))})
}
