package uverbs

import (
	"encoding/binary"
	"errors"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/transport"
)

// QueryDevice returns the device's attributes, extended ones included when
// the kernel offers the extended query (every kernel since 4.x does).
func (c *Context) QueryDevice() (DeviceAttr, error) {
	if err := c.check(); err != nil {
		return DeviceAttr{}, err
	}
	var resp abi.ExQueryDeviceResp
	req := abi.ExQueryDevice{}
	w := &transport.Write{
		Cmd:     abi.CmdFlagExtended | abi.ExCmdQueryDevice,
		In:      asBytes(&req),
		CoreIn:  int(unsafe.Sizeof(req)),
		Out:     asBytes(&resp),
		CoreOut: int(unsafe.Sizeof(resp)),
	}
	extended := true
	err := c.conn.Write("query_device_ex", w)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		// As rdma-core: fall back to the basic query.
		extended = false
		resp = abi.ExQueryDeviceResp{}
		base := abi.QueryDevice{}
		w = &transport.Write{
			Cmd:     abi.CmdQueryDevice,
			In:      asBytes(&base),
			CoreIn:  int(unsafe.Sizeof(base)),
			Out:     asBytes(&resp.Base),
			CoreOut: int(unsafe.Sizeof(resp.Base)),
		}
		err = c.conn.Write("query_device", w)
		resp.ResponseLength = uint32(unsafe.Sizeof(resp.Base))
	}
	if err != nil {
		return DeviceAttr{}, err
	}
	return c.deviceAttr(&resp, extended), nil
}

func (c *Context) deviceAttr(r *abi.ExQueryDeviceResp, extended bool) DeviceAttr {
	b := &r.Base
	a := DeviceAttr{
		FWVer:                 c.pctx.FirmwareVersion(b.FWVer),
		NodeGUID:              GUID(beUint64(b.NodeGUID)),
		SysImageGUID:          GUID(beUint64(b.SysImageGUID)),
		MaxMRSize:             b.MaxMRSize,
		PageSizeCap:           b.PageSizeCap,
		VendorID:              b.VendorID,
		VendorPartID:          b.VendorPartID,
		HWVer:                 b.HWVer,
		MaxQP:                 b.MaxQP,
		MaxQPWr:               b.MaxQPWr,
		DeviceCapFlags:        b.DeviceCapFlags,
		MaxSGE:                b.MaxSGE,
		MaxSGERd:              b.MaxSGERd,
		MaxCQ:                 b.MaxCQ,
		MaxCQE:                b.MaxCQE,
		MaxMR:                 b.MaxMR,
		MaxPD:                 b.MaxPD,
		MaxQPRdAtom:           b.MaxQPRdAtom,
		MaxEERdAtom:           b.MaxEERdAtom,
		MaxResRdAtom:          b.MaxResRdAtom,
		MaxQPInitRdAtom:       b.MaxQPInitRdAtom,
		MaxEEInitRdAtom:       b.MaxEEInitRdAtom,
		AtomicCap:             AtomicCap(b.AtomicCap),
		MaxEE:                 b.MaxEE,
		MaxRDD:                b.MaxRDD,
		MaxMW:                 b.MaxMW,
		MaxRawIPv6QP:          b.MaxRawIPv6QP,
		MaxRawEthyQP:          b.MaxRawEthyQP,
		MaxMcastGrp:           b.MaxMcastGrp,
		MaxMcastQPAttach:      b.MaxMcastQPAttach,
		MaxTotalMcastQPAttach: b.MaxTotalMcastQPAttach,
		MaxAH:                 b.MaxAH,
		MaxFMR:                b.MaxFMR,
		MaxMapPerFMR:          b.MaxMapPerFMR,
		MaxSRQ:                b.MaxSRQ,
		MaxSRQWr:              b.MaxSRQWr,
		MaxSRQSGE:             b.MaxSRQSGE,
		MaxPkeys:              b.MaxPkeys,
		LocalCAAckDelay:       b.LocalCAAckDelay,
		PhysPortCnt:           b.PhysPortCnt,
		Extended:              extended,
	}
	// Copy what the kernel says it wrote, field by field, as rdma-core's
	// CAN_COPY does: an older kernel answers a shorter response.
	has := func(end uintptr) bool { return uintptr(r.ResponseLength) >= end }
	if has(unsafe.Offsetof(r.ODPCaps) + unsafe.Sizeof(r.ODPCaps)) {
		a.ODPCaps = ODPCaps{
			General: r.ODPCaps.GeneralCaps,
			RC:      r.ODPCaps.PerTransportCaps.RCODPCaps,
			UC:      r.ODPCaps.PerTransportCaps.UCODPCaps,
			UD:      r.ODPCaps.PerTransportCaps.UDODPCaps,
		}
	}
	if has(unsafe.Offsetof(r.TimestampMask) + 8) {
		a.CompletionTimestampMask = r.TimestampMask
	}
	if has(unsafe.Offsetof(r.HCACoreClock) + 8) {
		a.HCACoreClock = r.HCACoreClock
	}
	if has(unsafe.Offsetof(r.DeviceCapFlagsEx) + 8) {
		a.DeviceCapFlagsEx = r.DeviceCapFlagsEx
	}
	if has(unsafe.Offsetof(r.RSSCaps) + unsafe.Sizeof(r.RSSCaps)) {
		a.RSSCaps.SupportedQPTs = r.RSSCaps.SupportedQPTs
		a.RSSCaps.MaxRWQIndirectionTables = r.RSSCaps.MaxRWQIndirectionTables
		a.RSSCaps.MaxRWQIndirectionTableSize = r.RSSCaps.MaxRWQIndirectionTableSize
	}
	if has(unsafe.Offsetof(r.MaxWQTypeRQ) + 4) {
		a.MaxWQTypeRQ = r.MaxWQTypeRQ
	}
	if has(unsafe.Offsetof(r.RawPacketCaps) + 4) {
		a.RawPacketCaps = r.RawPacketCaps
	}
	if has(unsafe.Offsetof(r.TMCaps) + unsafe.Sizeof(r.TMCaps)) {
		a.TMCaps = TMCaps{
			MaxRndvHdrSize: r.TMCaps.MaxRndvHdrSize,
			MaxNumTags:     r.TMCaps.MaxNumTags,
			Flags:          r.TMCaps.Flags,
			MaxOps:         r.TMCaps.MaxOps,
			MaxSGE:         r.TMCaps.MaxSGE,
		}
	}
	if has(unsafe.Offsetof(r.CQModerationCaps) + unsafe.Sizeof(r.CQModerationCaps)) {
		a.CQModCaps = CQModerationCaps{
			MaxCQCount:  r.CQModerationCaps.MaxCQModerationCount,
			MaxCQPeriod: r.CQModerationCaps.MaxCQModerationPeriod,
		}
	}
	if has(unsafe.Offsetof(r.MaxDMSize) + 8) {
		a.MaxDMSize = r.MaxDMSize
	}
	if has(unsafe.Offsetof(r.XRCODPCaps) + 4) {
		a.ODPCaps.XRC = r.XRCODPCaps
	}
	a.PhysPortCntEx = uint32(b.PhysPortCnt)
	if n := len(c.dev.ports); n > 0 {
		a.PhysPortCntEx = uint32(n)
	}
	return a
}

// beUint64 turns a __be64 read as a little-endian integer into its value.
func beUint64(raw uint64) uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], raw)
	return binary.BigEndian.Uint64(b[:])
}

// QueryPort returns the attributes of port (1-based).
func (c *Context) QueryPort(port uint8) (PortAttr, error) {
	if err := c.check(); err != nil {
		return PortAttr{}, err
	}
	if err := c.checkPort("query_port", port); err != nil {
		return PortAttr{}, err
	}
	var resp abi.QueryPortRespEx
	q := transport.NewIoctl(abi.ObjectDevice, abi.MethodQueryPort)
	defer q.Free()
	q.Const(abi.AttrQueryPortPortNum, uint64(port))
	q.Out(abi.AttrQueryPortResp, asBytes(&resp))
	err := c.conn.IoctlOrWrite("query_port", transport.OpQueryPort, q, func() error {
		resp = abi.QueryPortRespEx{}
		req := abi.QueryPort{PortNum: port}
		return c.conn.Write("query_port", &transport.Write{
			Cmd:     abi.CmdQueryPort,
			In:      asBytes(&req),
			CoreIn:  int(unsafe.Sizeof(req)),
			Out:     asBytes(&resp.LegacyResp),
			CoreOut: int(unsafe.Sizeof(resp.LegacyResp)),
		})
	})
	if err != nil {
		return PortAttr{}, err
	}
	r := &resp.LegacyResp
	return PortAttr{
		State:         PortState(r.State),
		MaxMTU:        MTU(r.MaxMTU),
		ActiveMTU:     MTU(r.ActiveMTU),
		GIDTblLen:     r.GIDTblLen,
		PortCapFlags:  r.PortCapFlags,
		MaxMsgSz:      r.MaxMsgSz,
		BadPkeyCntr:   r.BadPkeyCntr,
		QkeyViolCntr:  r.QkeyViolCntr,
		PkeyTblLen:    r.PkeyTblLen,
		LID:           r.LID,
		SMLID:         r.SMLID,
		LMC:           r.LMC,
		MaxVLNum:      r.MaxVLNum,
		SMSL:          r.SMSL,
		SubnetTimeout: r.SubnetTimeout,
		InitTypeReply: r.InitTypeReply,
		ActiveWidth:   r.ActiveWidth,
		ActiveSpeed:   r.ActiveSpeed,
		PhysState:     PhysState(r.PhysState),
		LinkLayer:     LinkLayer(r.LinkLayer),
		Flags:         r.Flags,
		PortCapFlags2: resp.PortCapFlags2,
		ActiveSpeedEx: resp.ActiveSpeedEx,
	}, nil
}
