package rdmacm

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
	"unsafe"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/uverbs"
)

// AddrInfo is what QUERY ADDR and QUERY GID report about an ID.
type AddrInfo struct {
	Src, Dst netip.AddrPort
	// NodeGUID (host order, as sysfs prints it) and DeviceIndex name the
	// RDMA device; both 0 while the ID is bound to none.
	NodeGUID    uint64
	DeviceIndex uint32
	Port        uint8
	PKey        uint16
	// SGID and DGID are the local and remote GIDs.
	SGID, DGID uverbs.GID
}

func (id *ID) queryAddr() (abi.UCMQueryAddrResp, error) {
	return id.query(abi.UCMQueryAddr)
}

func (id *ID) query(option uint32) (abi.UCMQueryAddrResp, error) {
	req := &abi.UCMQuery{ID: id.handle, Option: option}
	r, err := writeResp[abi.UCMQuery, abi.UCMQueryAddrResp](id.ch, abi.UCMCmdQuery, req, &req.Response)
	if err != nil {
		return r, cmdErr("query", err)
	}
	return r, nil
}

// Query reports the ID's addresses, device, port and GIDs.
func (id *ID) Query() (AddrInfo, error) {
	if err := id.use("query"); err != nil {
		return AddrInfo{}, err
	}
	r, err := id.query(abi.UCMQueryAddr)
	if err != nil {
		return AddrInfo{}, err
	}
	info := AddrInfo{
		Src: sockaddr(r.SrcAddr[:min(int(r.SrcSize), len(r.SrcAddr))]), Dst: sockaddr(r.DstAddr[:min(int(r.DstSize), len(r.DstAddr))]),
		NodeGUID: bits.ReverseBytes64(r.NodeGUID), DeviceIndex: r.IBDevIndex, Port: r.PortNum,
		PKey: binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&r.Pkey))[:]),
	}
	if r.NodeGUID != 0 {
		g, err := id.query(abi.UCMQueryGID)
		if err != nil {
			return info, err
		}
		info.SGID = sockaddrGID(g.SrcAddr[:])
		info.DGID = sockaddrGID(g.DstAddr[:])
	}
	return info, nil
}

// LocalAddr returns the ID's local address and port (the port Bind or
// Listen with port 0 picked).
func (id *ID) LocalAddr() netip.AddrPort {
	if err := id.use("local addr"); err != nil {
		return netip.AddrPort{}
	}
	r, err := id.query(abi.UCMQueryAddr)
	if err != nil {
		return netip.AddrPort{}
	}
	return sockaddr(r.SrcAddr[:min(int(r.SrcSize), len(r.SrcAddr))])
}

// RemoteAddr returns the peer's address and port.
func (id *ID) RemoteAddr() netip.AddrPort {
	if err := id.use("remote addr"); err != nil {
		return netip.AddrPort{}
	}
	r, err := id.query(abi.UCMQueryAddr)
	if err != nil {
		return netip.AddrPort{}
	}
	return sockaddr(r.DstAddr[:min(int(r.DstSize), len(r.DstAddr))])
}

// Path is one path record of a resolved route.
type Path struct {
	SGID, DGID   uverbs.GID
	PKey         uint16
	MTU          uverbs.MTU
	HopLimit     uint8
	TrafficClass uint8
	SL           uint8
	FlowLabel    uint32
	Rate         uint8
	// PacketLifeTime is the exponent the CM derives timeouts from.
	PacketLifeTime uint8
}

// QueryRoute returns the paths of the ID's resolved route (QUERY_ROUTE).
func (id *ID) QueryRoute() ([]Path, error) {
	if err := id.use("query route"); err != nil {
		return nil, err
	}
	req := &abi.UCMQuery{ID: id.handle}
	r, err := writeResp[abi.UCMQuery, abi.UCMQueryRouteResp](id.ch, abi.UCMCmdQueryRoute, req, &req.Response)
	if err != nil {
		return nil, cmdErr("query route", err)
	}
	var paths []Path
	for i := 0; i < int(min(r.NumPaths, 2)); i++ {
		p := &r.IBRoute[i]
		paths = append(paths, Path{
			SGID: p.SGID, DGID: p.DGID, PKey: bits.ReverseBytes16(p.Pkey), MTU: uverbs.MTU(p.MTU),
			HopLimit: p.HopLimit, TrafficClass: p.TrafficClass, SL: p.SL, FlowLabel: bits.ReverseBytes32(p.FlowLabel),
			Rate: p.Rate, PacketLifeTime: p.PacketLifeTime,
		})
	}
	return paths, nil
}
