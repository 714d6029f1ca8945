package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/goverbs/goverbs/internal/cli"
	"github.com/goverbs/goverbs/uverbs"
)

// The JSON output: an array with one object per device. Keys are
// snake_case and, where iproute2's "rdma -j dev/link" reports the same
// thing, have its names (ifname, ifindex, node_type, fw, node_guid,
// sys_image_guid, state, physical_state, netdev, netdev_index, caps);
// the remaining attributes keep ibv_devinfo's names. Capability masks are
// objects with the raw value, the names of the set bits and the bits that
// have no name. Every attribute is present whether or not -v was given.

type jsonFlags struct {
	Value   uint64   `json:"value"`
	Names   []string `json:"names"`
	Unknown uint64   `json:"unknown,omitempty"`
}

func flagsJSON(v uint64, names []flagName) jsonFlags {
	f := jsonFlags{Value: v, Names: flagNames(v, names), Unknown: v &^ known(names)}
	if f.Names == nil {
		f.Names = []string{}
	}
	return f
}

type jsonUverbs struct {
	CharDev    string `json:"char_dev,omitempty"`
	ABIVersion int    `json:"abi_version,omitempty"`
	Driver     string `json:"driver,omitempty"`
}

type jsonODPCaps struct {
	General jsonFlags `json:"general"`
	RC      jsonFlags `json:"rc"`
	UC      jsonFlags `json:"uc"`
	UD      jsonFlags `json:"ud"`
	XRC     jsonFlags `json:"xrc"`
}

type jsonTSOCaps struct {
	MaxTSO      uint32    `json:"max_tso"`
	SupportedQP jsonFlags `json:"supported_qp"`
}

type jsonRSSCaps struct {
	MaxRWQIndirectionTables    uint32    `json:"max_rwq_indirection_tables"`
	MaxRWQIndirectionTableSize uint32    `json:"max_rwq_indirection_table_size"`
	RxHashFunction             uint8     `json:"rx_hash_function"`
	RxHashFieldsMask           uint64    `json:"rx_hash_fields_mask"`
	SupportedQP                jsonFlags `json:"supported_qp"`
}

type jsonPacketPacingCaps struct {
	QPRateLimitMinKbps uint32    `json:"qp_rate_limit_min_kbps"`
	QPRateLimitMaxKbps uint32    `json:"qp_rate_limit_max_kbps"`
	SupportedQP        jsonFlags `json:"supported_qp"`
}

type jsonTMCaps struct {
	MaxRndvHdrSize uint32    `json:"max_rndv_hdr_size"`
	MaxNumTags     uint32    `json:"max_num_tags"`
	MaxOps         uint32    `json:"max_ops"`
	MaxSGE         uint32    `json:"max_sge"`
	Flags          jsonFlags `json:"flags"`
}

type jsonCQModerationCaps struct {
	MaxCQCount    uint16 `json:"max_cq_count"`
	MaxCQPeriodUs uint16 `json:"max_cq_period_us"`
}

type jsonGID struct {
	Index       uint32 `json:"index"`
	GID         string `json:"gid"`
	Type        string `json:"type"`
	Netdev      string `json:"netdev,omitempty"`
	NetdevIndex uint32 `json:"netdev_index,omitempty"`
}

type jsonPort struct {
	Port           int       `json:"port"`
	Ifname         string    `json:"ifname"` // "dev/port", as rdma link
	State          string    `json:"state"`
	PhysicalState  string    `json:"physical_state"`
	LinkLayer      string    `json:"link_layer"`
	Netdev         string    `json:"netdev,omitempty"`
	NetdevIndex    uint32    `json:"netdev_index,omitempty"`
	MaxMTU         int       `json:"max_mtu"`
	ActiveMTU      int       `json:"active_mtu"`
	SMLID          uint16    `json:"sm_lid"`
	LID            uint16    `json:"lid"`
	LMC            uint8     `json:"lmc"`
	MaxMsgSz       uint32    `json:"max_msg_sz"`
	Caps           jsonFlags `json:"caps"` // port_cap_flags
	Caps2          jsonFlags `json:"caps2"`
	MaxVLNum       int       `json:"max_vl_num"`
	BadPkeyCntr    uint32    `json:"bad_pkey_cntr"`
	QkeyViolCntr   uint32    `json:"qkey_viol_cntr"`
	SMSL           uint8     `json:"sm_sl"`
	PkeyTblLen     uint16    `json:"pkey_tbl_len"`
	GIDTblLen      uint32    `json:"gid_tbl_len"`
	SubnetTimeout  uint8     `json:"subnet_timeout"`
	InitTypeReply  uint8     `json:"init_type_reply"`
	ActiveWidth    string    `json:"active_width"`
	ActiveSpeed    string    `json:"active_speed"`
	GIDs           []jsonGID `json:"gids"`
	RecommendedGID *jsonGID  `json:"recommended_gid"`
	Error          string    `json:"error,omitempty"`
}

type jsonDevice struct {
	Ifindex   *int        `json:"ifindex,omitempty"`
	Ifname    string      `json:"ifname"`
	NodeType  string      `json:"node_type"`
	Transport string      `json:"transport"`
	Usable    bool        `json:"usable"`
	Error     string      `json:"error,omitempty"`
	Uverbs    *jsonUverbs `json:"uverbs,omitempty"`
	NodeDesc  string      `json:"node_desc,omitempty"`
	BoardID   string      `json:"board_id,omitempty"`
	*jsonDeviceAttr
	Ports []jsonPort `json:"ports,omitempty"`
}

// jsonDeviceAttr is QueryDevice's answer with ibv_devinfo -v's names.
type jsonDeviceAttr struct {
	FW                      string               `json:"fw,omitempty"`
	NodeGUID                string               `json:"node_guid"`
	SysImageGUID            string               `json:"sys_image_guid"`
	VendorID                uint32               `json:"vendor_id"`
	VendorPartID            uint32               `json:"vendor_part_id"`
	HWVer                   uint32               `json:"hw_ver"`
	PhysPortCnt             uint8                `json:"phys_port_cnt"`
	MaxMRSize               uint64               `json:"max_mr_size"`
	PageSizeCap             uint64               `json:"page_size_cap"`
	MaxQP                   uint32               `json:"max_qp"`
	MaxQPWr                 uint32               `json:"max_qp_wr"`
	Caps                    jsonFlags            `json:"caps"` // device_cap_flags
	MaxSGE                  uint32               `json:"max_sge"`
	MaxSGERd                uint32               `json:"max_sge_rd"`
	MaxCQ                   uint32               `json:"max_cq"`
	MaxCQE                  uint32               `json:"max_cqe"`
	MaxMR                   uint32               `json:"max_mr"`
	MaxPD                   uint32               `json:"max_pd"`
	MaxQPRdAtom             uint32               `json:"max_qp_rd_atom"`
	MaxEERdAtom             uint32               `json:"max_ee_rd_atom"`
	MaxResRdAtom            uint32               `json:"max_res_rd_atom"`
	MaxQPInitRdAtom         uint32               `json:"max_qp_init_rd_atom"`
	MaxEEInitRdAtom         uint32               `json:"max_ee_init_rd_atom"`
	AtomicCap               string               `json:"atomic_cap"`
	MaxEE                   uint32               `json:"max_ee"`
	MaxRDD                  uint32               `json:"max_rdd"`
	MaxMW                   uint32               `json:"max_mw"`
	MaxRawIPv6QP            uint32               `json:"max_raw_ipv6_qp"`
	MaxRawEthyQP            uint32               `json:"max_raw_ethy_qp"`
	MaxMcastGrp             uint32               `json:"max_mcast_grp"`
	MaxMcastQPAttach        uint32               `json:"max_mcast_qp_attach"`
	MaxTotalMcastQPAttach   uint32               `json:"max_total_mcast_qp_attach"`
	MaxAH                   uint32               `json:"max_ah"`
	MaxFMR                  uint32               `json:"max_fmr"`
	MaxMapPerFMR            uint32               `json:"max_map_per_fmr"`
	MaxSRQ                  uint32               `json:"max_srq"`
	MaxSRQWr                uint32               `json:"max_srq_wr"`
	MaxSRQSGE               uint32               `json:"max_srq_sge"`
	MaxPkeys                uint16               `json:"max_pkeys"`
	LocalCAAckDelay         uint8                `json:"local_ca_ack_delay"`
	ODPCaps                 jsonODPCaps          `json:"odp_caps"`
	CompletionTimestampMask uint64               `json:"completion_timestamp_mask"`
	HCACoreClockKHz         uint64               `json:"hca_core_clock_khz"`
	RawPacketCaps           jsonFlags            `json:"raw_packet_caps"`
	CapsEx                  jsonFlags            `json:"caps_ex"` // device_cap_flags_ex
	TSOCaps                 jsonTSOCaps          `json:"tso_caps"`
	RSSCaps                 jsonRSSCaps          `json:"rss_caps"`
	MaxWQTypeRQ             uint32               `json:"max_wq_type_rq"`
	PacketPacingCaps        jsonPacketPacingCaps `json:"packet_pacing_caps"`
	TMCaps                  jsonTMCaps           `json:"tm_caps"`
	CQModerationCaps        jsonCQModerationCaps `json:"cq_moderation_caps"`
	MaxDMSize               uint64               `json:"max_dm_size"`
	NumCompVectors          int                  `json:"num_comp_vectors"`
}

// Port capability bits (IB PortInfo CapabilityMask, ibv_port_cap_flags),
// with iproute2 rdma's names.
var portCapFlags = []flagName{
	{1 << 1, "SM"},
	{1 << 2, "NOTICE"},
	{1 << 3, "TRAP"},
	{1 << 4, "OPT_IPD"},
	{1 << 5, "AUTO_MIGR"},
	{1 << 6, "SL_MAP"},
	{1 << 7, "MKEY_NVRAM"},
	{1 << 8, "PKEY_NVRAM"},
	{1 << 9, "LED_INFO"},
	{1 << 10, "SM_DISABLED"},
	{1 << 11, "SYS_IMAGE_GUID"},
	{1 << 12, "PKEY_SW_EXT_PORT_TRAP"},
	{1 << 13, "CABLE_INFO"},
	{1 << 14, "EXTENDED_SPEEDS"},
	{1 << 15, "CAP_MASK2"},
	{1 << 16, "CM"},
	{1 << 17, "SNMP_TUNNEL"},
	{1 << 18, "REINIT"},
	{1 << 19, "DEVICE_MGMT"},
	{1 << 20, "VENDOR_CLASS"},
	{1 << 21, "DR_NOTICE"},
	{1 << 22, "CAP_MASK_NOTICE"},
	{1 << 23, "BOOT_MGMT"},
	{1 << 24, "LINK_LATENCY"},
	{1 << 25, "CLIENT_REG"},
	{1 << 26, "IP_BASED_GIDS"},
}

// Port capability bits 2 (ibv_port_cap_flags2).
var portCapFlags2 = []flagName{
	{1 << 0, "SET_NODE_DESC"},
	{1 << 1, "EXT_INFO"},
	{1 << 2, "VIRT"},
	{1 << 3, "SWITCH_PORT_STATE_TABLE"},
	{1 << 4, "LINK_WIDTH_2X"},
	{1 << 5, "LINK_SPEED_HDR"},
	{1 << 10, "LINK_SPEED_NDR"},
}

var tmCapFlags = []flagName{{1 << 0, "RC"}}

// nodeTypeName is rdma's node_type word for a kernel node type.
func nodeTypeName(t int) string {
	switch t {
	case 1:
		return "ca"
	case 2:
		return "switch"
	case 3:
		return "router"
	case 4:
		return "rnic"
	case 5:
		return "usnic"
	case 6:
		return "usnic_udp"
	case 7:
		return "unspecified"
	}
	return "unknown"
}

// portStateName is rdma link's state word: PortState's own name, with the
// number beside an unknown one.
func portStateName(s uverbs.PortState) string {
	if s <= uverbs.PortActiveDefer {
		return s.String()
	}
	return fmt.Sprintf("UNKNOWN(%d)", uint8(s))
}

// physStateName is rdma link's physical_state word, with the number kept
// for one it does not know, as portStateName does.
func physStateName(s uverbs.PhysState) string {
	if s > uverbs.PhysPhyTest {
		return fmt.Sprintf("UNKNOWN(%d)", uint8(s))
	}
	return s.RDMALinkName()
}

func gidTypeName(t uverbs.GIDType) string { return t.String() }

// vlCount decodes max_vl_num; 0 when the value is not a valid encoding.
func vlCount(n uint8) int {
	switch n {
	case 1, 2, 3, 4:
		return 1 << (n - 1)
	case 5:
		return 15
	}
	return 0
}

func deviceAttrJSON(a *uverbs.DeviceAttr, numCompVectors int) *jsonDeviceAttr {
	return &jsonDeviceAttr{
		FW:                    cFWVer(a.FWVer),
		NodeGUID:              a.NodeGUID.String(),
		SysImageGUID:          a.SysImageGUID.String(),
		VendorID:              a.VendorID,
		VendorPartID:          a.VendorPartID,
		HWVer:                 a.HWVer,
		PhysPortCnt:           a.PhysPortCnt,
		MaxMRSize:             a.MaxMRSize,
		PageSizeCap:           a.PageSizeCap,
		MaxQP:                 a.MaxQP,
		MaxQPWr:               a.MaxQPWr,
		Caps:                  flagsJSON(uint64(a.DeviceCapFlags), deviceCapFlags),
		MaxSGE:                a.MaxSGE,
		MaxSGERd:              a.MaxSGERd,
		MaxCQ:                 a.MaxCQ,
		MaxCQE:                a.MaxCQE,
		MaxMR:                 a.MaxMR,
		MaxPD:                 a.MaxPD,
		MaxQPRdAtom:           a.MaxQPRdAtom,
		MaxEERdAtom:           a.MaxEERdAtom,
		MaxResRdAtom:          a.MaxResRdAtom,
		MaxQPInitRdAtom:       a.MaxQPInitRdAtom,
		MaxEEInitRdAtom:       a.MaxEEInitRdAtom,
		AtomicCap:             atomicCapStr(a.AtomicCap),
		MaxEE:                 a.MaxEE,
		MaxRDD:                a.MaxRDD,
		MaxMW:                 a.MaxMW,
		MaxRawIPv6QP:          a.MaxRawIPv6QP,
		MaxRawEthyQP:          a.MaxRawEthyQP,
		MaxMcastGrp:           a.MaxMcastGrp,
		MaxMcastQPAttach:      a.MaxMcastQPAttach,
		MaxTotalMcastQPAttach: a.MaxTotalMcastQPAttach,
		MaxAH:                 a.MaxAH,
		MaxFMR:                a.MaxFMR,
		MaxMapPerFMR:          a.MaxMapPerFMR,
		MaxSRQ:                a.MaxSRQ,
		MaxSRQWr:              a.MaxSRQWr,
		MaxSRQSGE:             a.MaxSRQSGE,
		MaxPkeys:              a.MaxPkeys,
		LocalCAAckDelay:       a.LocalCAAckDelay,
		ODPCaps: jsonODPCaps{
			General: flagsJSON(a.ODPCaps.General, odpGeneralCaps),
			RC:      flagsJSON(uint64(a.ODPCaps.RC), odpTransportCaps),
			UC:      flagsJSON(uint64(a.ODPCaps.UC), odpTransportCaps),
			UD:      flagsJSON(uint64(a.ODPCaps.UD), odpTransportCaps),
			XRC:     flagsJSON(uint64(a.ODPCaps.XRC), odpTransportCaps),
		},
		CompletionTimestampMask: a.CompletionTimestampMask,
		HCACoreClockKHz:         a.HCACoreClock,
		RawPacketCaps:           flagsJSON(uint64(a.RawPacketCaps), rawPacketCaps),
		CapsEx:                  flagsJSON(a.DeviceCapFlagsEx&0xffffffff00000000, deviceCapFlagsEx),
		TSOCaps: jsonTSOCaps{
			MaxTSO:      a.TSOCaps.MaxTSO,
			SupportedQP: flagsJSON(uint64(a.TSOCaps.SupportedQPTs), supportedQPTs),
		},
		RSSCaps: jsonRSSCaps{
			MaxRWQIndirectionTables:    a.RSSCaps.MaxRWQIndirectionTables,
			MaxRWQIndirectionTableSize: a.RSSCaps.MaxRWQIndirectionTableSize,
			RxHashFunction:             a.RSSCaps.RxHashFunction,
			RxHashFieldsMask:           a.RSSCaps.RxHashFieldsMask,
			SupportedQP:                flagsJSON(uint64(a.RSSCaps.SupportedQPTs), supportedQPTs),
		},
		MaxWQTypeRQ: a.MaxWQTypeRQ,
		PacketPacingCaps: jsonPacketPacingCaps{
			QPRateLimitMinKbps: a.PacketPacingCaps.QPRateLimitMin,
			QPRateLimitMaxKbps: a.PacketPacingCaps.QPRateLimitMax,
			SupportedQP:        flagsJSON(uint64(a.PacketPacingCaps.SupportedQPTs), supportedQPTs),
		},
		TMCaps: jsonTMCaps{
			MaxRndvHdrSize: a.TMCaps.MaxRndvHdrSize,
			MaxNumTags:     a.TMCaps.MaxNumTags,
			MaxOps:         a.TMCaps.MaxOps,
			MaxSGE:         a.TMCaps.MaxSGE,
			Flags:          flagsJSON(uint64(a.TMCaps.Flags), tmCapFlags),
		},
		CQModerationCaps: jsonCQModerationCaps{
			MaxCQCount:    a.CQModCaps.MaxCQCount,
			MaxCQPeriodUs: a.CQModCaps.MaxCQPeriod,
		},
		MaxDMSize:      a.MaxDMSize,
		NumCompVectors: numCompVectors,
	}
}

func portAttrJSON(dev string, port int, a *uverbs.PortAttr) jsonPort {
	width := widthStr(a.ActiveWidth)
	if width == "invalid width" {
		width = ""
	} else {
		width += "X"
	}
	speed := speedStr(a.ActiveSpeed)
	if speed == "invalid speed" {
		speed = ""
	}
	return jsonPort{
		Port:          port,
		Ifname:        fmt.Sprintf("%s/%d", dev, port),
		State:         portStateName(a.State),
		PhysicalState: physStateName(a.PhysState),
		LinkLayer:     a.LinkLayer.String(),
		MaxMTU:        a.MaxMTU.Bytes(),
		ActiveMTU:     a.ActiveMTU.Bytes(),
		SMLID:         a.SMLID,
		LID:           a.LID,
		LMC:           a.LMC,
		MaxMsgSz:      a.MaxMsgSz,
		Caps:          flagsJSON(uint64(a.PortCapFlags), portCapFlags),
		Caps2:         flagsJSON(uint64(a.PortCapFlags2), portCapFlags2),
		MaxVLNum:      vlCount(a.MaxVLNum),
		BadPkeyCntr:   a.BadPkeyCntr,
		QkeyViolCntr:  a.QkeyViolCntr,
		SMSL:          a.SMSL,
		PkeyTblLen:    a.PkeyTblLen,
		GIDTblLen:     a.GIDTblLen,
		SubnetTimeout: a.SubnetTimeout,
		InitTypeReply: a.InitTypeReply,
		ActiveWidth:   width,
		ActiveSpeed:   speed,
		GIDs:          []jsonGID{},
	}
}

// runJSON is ibinfo --json: the devices (or only o.devName), each with
// every attribute, as one JSON array. Exit statuses are ibv_devinfo's.
func runJSON(out, stderr io.Writer, sys system, o options) int {
	devs, skipped, err := sys.Devices()
	if err != nil {
		fmt.Fprintf(stderr, "Failed to get IB devices list: %v\n", listErrText(err))
		explain(stderr, nil, skipped, err)
		return exitFail
	}
	var sel []hca
	if o.devSet {
		h, ok := findHCA(devs, o.devName)
		if !ok {
			fmt.Fprintf(stderr, "IB device '%s' wasn't found\n", o.devName)
			explain(stderr, &o.devName, skipped, nil)
			return exitFail
		}
		sel = []hca{h}
	} else {
		if len(devs) == 0 && !o.list {
			fmt.Fprintf(stderr, "No IB devices found\n")
			explain(stderr, nil, skipped, nil)
			return exitFail
		}
		sel = devs
	}
	result := []jsonDevice{}
	ret := 0
	for _, h := range sel {
		jd := jsonDeviceBase(h)
		jd.Usable = true
		if !o.list {
			ret |= fillDeviceJSON(&jd, stderr, sys, h, o.port)
		}
		result = append(result, jd)
	}
	if !o.devSet {
		// Devices ibv_devinfo would not list, with the reason.
		for _, s := range skipped {
			jd := jsonDevice{Ifname: s.name, NodeType: nodeTypeName(0), Transport: transportStr(transportUnknown)}
			if s.h.name != "" {
				jd = jsonDeviceBase(s.h)
			}
			jd.Error = s.reason.Error()
			result = append(result, jd)
		}
		if o.list && len(devs) == 0 {
			explain(stderr, nil, skipped, nil)
		}
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(result); err != nil {
		fmt.Fprintf(stderr, "ibinfo: %v\n", err)
		return exitFail
	}
	return ret & 0xff
}

func jsonDeviceBase(h hca) jsonDevice {
	jd := jsonDevice{
		Ifname:    h.name,
		NodeType:  nodeTypeName(h.nodeType),
		Transport: transportStr(transportOf(h.nodeType)),
		NodeDesc:  h.info.NodeDesc,
	}
	if id, ok := boardIDText(h.boardID); ok {
		jd.BoardID = id
	}
	if h.info.CharDev != "" || h.info.Driver != "" {
		jd.Uverbs = &jsonUverbs{CharDev: h.info.CharDev, Driver: h.info.Driver}
		if h.info.ABIVersion >= 0 {
			jd.Uverbs.ABIVersion = h.info.ABIVersion
		}
	}
	return jd
}

// fillDeviceJSON queries one device into jd and returns ibv_devinfo's
// result code for it; errors are also recorded in the JSON.
func fillDeviceJSON(jd *jsonDevice, stderr io.Writer, sys system, h hca, ibPort uint8) int {
	dev, err := sys.Open(h)
	if err != nil {
		jd.Usable = false
		jd.Error = err.Error()
		fmt.Fprintf(stderr, "Failed to open device %s: %v\n", h.name, err)
		return rcOpen
	}
	rc := fillOpenDeviceJSON(jd, stderr, dev, h, ibPort)
	if err := dev.Close(); err != nil {
		jd.Error = fmt.Sprintf("close: %v", err)
		fmt.Fprintf(stderr, "Failed to close device %s: %v\n", h.name, err)
		rc = rcClose
	}
	return rc
}

func fillOpenDeviceJSON(jd *jsonDevice, stderr io.Writer, dev device, h hca, ibPort uint8) int {
	attr, err := dev.QueryDevice()
	if err != nil {
		jd.Error = fmt.Sprintf("query device: %v", err)
		fmt.Fprintf(stderr, "Failed to query device props of %s: %v\n", h.name, err)
		return rcQuery
	}
	if ibPort != 0 && ibPort > attr.PhysPortCnt {
		jd.Error = fmt.Sprintf("port %d requested; the device has %d", ibPort, attr.PhysPortCnt)
		fmt.Fprintf(stderr, "Invalid port requested for device %s\n", h.name)
		return rcPort
	}
	jd.jsonDeviceAttr = deviceAttrJSON(&attr, dev.NumCompVectors())
	jd.Ports = []jsonPort{}
	rc := 0
	for port := 1; port <= int(attr.PhysPortCnt); port++ {
		if ibPort != 0 && port != int(ibPort) {
			continue
		}
		pa, err := dev.QueryPort(uint8(port))
		if err != nil {
			jd.Ports = append(jd.Ports, jsonPort{Port: port, Ifname: fmt.Sprintf("%s/%d", h.name, port), GIDs: []jsonGID{}, Error: fmt.Sprintf("query port: %v", err)})
			fmt.Fprintf(stderr, "Failed to query port %d props of %s: %v\n", port, h.name, err)
			rc |= errnoRC(err)
			continue
		}
		jp := portAttrJSON(h.name, port, &pa)
		pi := h.info.Ports[port]
		jp.Netdev = pi.Netdev
		var entries []uverbs.GIDEntry
		for i := 0; i < int(int32(pa.GIDTblLen)); i++ {
			e, err := dev.QueryGID(uint8(port), i)
			if errors.Is(err, uverbs.ErrNoGID) {
				continue
			}
			if err != nil {
				jp.Error = fmt.Sprintf("query GID %d: %v", i, err)
				fmt.Fprintf(stderr, "Failed to query gid to port %d, index %d of %s: %v\n", port, i, h.name, err)
				rc |= -1
				break
			}
			if e.GID.IsZero() {
				continue
			}
			// The kernel's entry may leave these to the caller.
			e.Index, e.Port = i, uint8(port)
			entries = append(entries, e)
			jp.GIDs = append(jp.GIDs, gidJSON(e, pi))
		}
		if best, ok := uverbs.PickRoCEGID(entries); ok {
			g := gidJSON(best, pi)
			jp.RecommendedGID = &g
		}
		// The port's netdev is its GIDs' (sysfs names it when it can).
		for _, g := range jp.GIDs {
			if g.Netdev != "" && (jp.Netdev == "" || jp.Netdev == g.Netdev) {
				jp.Netdev, jp.NetdevIndex = g.Netdev, g.NetdevIndex
				break
			}
		}
		jd.Ports = append(jd.Ports, jp)
	}
	return rc
}

func gidJSON(e uverbs.GIDEntry, pi portInfo) jsonGID {
	g := jsonGID{
		Index:       uint32(e.Index),
		GID:         cli.InetNtop6(e.GID),
		Type:        gidTypeName(e.Type),
		NetdevIndex: e.NetdevIfindex,
	}
	if s, ok := pi.GIDs[int(e.Index)]; ok && s.Netdev != "" {
		g.Netdev = s.Netdev
	} else if e.NetdevIfindex != 0 {
		g.Netdev = interfaceName(e.NetdevIfindex)
	}
	return g
}
