package uverbs

import (
	"fmt"
	"net/netip"

	"github.com/goverbs/goverbs/sysfs"
)

// GUID is a 64-bit globally unique identifier, held as the number the
// kernel's big-endian bytes spell; it prints as sysfs and ibv_devinfo do.
type GUID = sysfs.GUID

// AtomicCap says which atomics a device guarantees (enum ibv_atomic_cap).
type AtomicCap uint32

// Atomic capabilities.
const (
	AtomicNone AtomicCap = 0
	AtomicHCA  AtomicCap = 1
	AtomicGlob AtomicCap = 2
)

func (a AtomicCap) String() string {
	switch a {
	case AtomicNone:
		return "ATOMIC_NONE"
	case AtomicHCA:
		return "ATOMIC_HCA"
	case AtomicGlob:
		return "ATOMIC_GLOB"
	}
	return fmt.Sprintf("AtomicCap(%d)", uint32(a))
}

// ODPCaps are the on-demand-paging capabilities.
type ODPCaps struct {
	General uint64 // IBV_ODP_SUPPORT, IBV_ODP_SUPPORT_IMPLICIT
	RC      uint32 // per transport: IBV_ODP_SUPPORT_SEND, _RECV, ...
	UC      uint32
	UD      uint32
	XRC     uint32
}

// TSOCaps are the TCP segmentation offload capabilities (provider data).
type TSOCaps struct {
	MaxTSO        uint32
	SupportedQPTs uint32
}

// RSSCaps are the receive-side scaling capabilities.
type RSSCaps struct {
	SupportedQPTs              uint32
	MaxRWQIndirectionTables    uint32
	MaxRWQIndirectionTableSize uint32
	RxHashFieldsMask           uint64 // provider data
	RxHashFunction             uint8  // provider data
}

// PacketPacingCaps are the rate-limit capabilities (provider data).
type PacketPacingCaps struct {
	QPRateLimitMin uint32 // kbps
	QPRateLimitMax uint32 // kbps
	SupportedQPTs  uint32
}

// TMCaps are the tag-matching capabilities.
type TMCaps struct {
	MaxRndvHdrSize uint32
	MaxNumTags     uint32
	Flags          uint32
	MaxOps         uint32
	MaxSGE         uint32
}

// CQModerationCaps are the completion-moderation limits.
type CQModerationCaps struct {
	MaxCQCount  uint16
	MaxCQPeriod uint16 // microseconds
}

// DeviceAttr is what QueryDevice reports: ibv_device_attr_ex's content.
// Counts are the kernel's unsigned 32-bit values.
type DeviceAttr struct {
	FWVer                 string // formatted by the provider
	NodeGUID              GUID
	SysImageGUID          GUID
	MaxMRSize             uint64
	PageSizeCap           uint64
	VendorID              uint32
	VendorPartID          uint32
	HWVer                 uint32
	MaxQP                 uint32
	MaxQPWr               uint32
	DeviceCapFlags        uint32 // IBV_DEVICE_* bits
	MaxSGE                uint32
	MaxSGERd              uint32
	MaxCQ                 uint32
	MaxCQE                uint32
	MaxMR                 uint32
	MaxPD                 uint32
	MaxQPRdAtom           uint32
	MaxEERdAtom           uint32
	MaxResRdAtom          uint32
	MaxQPInitRdAtom       uint32
	MaxEEInitRdAtom       uint32
	AtomicCap             AtomicCap
	MaxEE                 uint32
	MaxRDD                uint32
	MaxMW                 uint32
	MaxRawIPv6QP          uint32
	MaxRawEthyQP          uint32
	MaxMcastGrp           uint32
	MaxMcastQPAttach      uint32
	MaxTotalMcastQPAttach uint32
	MaxAH                 uint32
	MaxFMR                uint32
	MaxMapPerFMR          uint32
	MaxSRQ                uint32
	MaxSRQWr              uint32
	MaxSRQSGE             uint32
	MaxPkeys              uint16
	LocalCAAckDelay       uint8
	PhysPortCnt           uint8

	// Extended attributes: zero when the kernel answered only the basic
	// query (Extended false).
	Extended                bool
	ODPCaps                 ODPCaps
	CompletionTimestampMask uint64
	HCACoreClock            uint64 // kHz
	DeviceCapFlagsEx        uint64
	TSOCaps                 TSOCaps
	RSSCaps                 RSSCaps
	MaxWQTypeRQ             uint32
	PacketPacingCaps        PacketPacingCaps
	RawPacketCaps           uint32
	TMCaps                  TMCaps
	CQModCaps               CQModerationCaps
	MaxDMSize               uint64
	PCIAtomicCaps           PCIAtomicCaps // provider data
	PhysPortCntEx           uint32
}

// PCIAtomicCaps are the PCIe atomic sizes supported (provider data).
type PCIAtomicCaps struct {
	FetchAdd    uint16
	Swap        uint16
	CompareSwap uint16
}

// PortState is a port's logical state (enum ibv_port_state).
type PortState uint8

// Port states.
const (
	PortNop         PortState = 0
	PortDown        PortState = 1
	PortInit        PortState = 2
	PortArmed       PortState = 3
	PortActive      PortState = 4
	PortActiveDefer PortState = 5
)

func (s PortState) String() string {
	switch s {
	case PortNop:
		return "PORT_NOP"
	case PortDown:
		return "PORT_DOWN"
	case PortInit:
		return "PORT_INIT"
	case PortArmed:
		return "PORT_ARMED"
	case PortActive:
		return "PORT_ACTIVE"
	case PortActiveDefer:
		return "PORT_ACTIVE_DEFER"
	}
	return fmt.Sprintf("PortState(%d)", uint8(s))
}

// MTU is the enum ibv_mtu encoding of a path MTU.
type MTU uint8

// MTUs.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes returns the MTU in bytes, or 0 for an invalid value.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

func (m MTU) String() string {
	if b := m.Bytes(); b != 0 {
		return fmt.Sprint(b)
	}
	return fmt.Sprintf("MTU(%d)", uint8(m))
}

// LinkLayer is a port's link layer (IBV_LINK_LAYER_*).
type LinkLayer uint8

// Link layers.
const (
	LinkLayerUnspecified LinkLayer = 0
	LinkLayerInfiniBand  LinkLayer = 1
	LinkLayerEthernet    LinkLayer = 2
)

func (l LinkLayer) String() string {
	switch l {
	case LinkLayerUnspecified:
		return "Unspecified"
	case LinkLayerInfiniBand:
		return "InfiniBand"
	case LinkLayerEthernet:
		return "Ethernet"
	}
	return "Unknown"
}

// PortAttr is what QueryPort reports (ibv_port_attr).
type PortAttr struct {
	State         PortState
	MaxMTU        MTU
	ActiveMTU     MTU
	GIDTblLen     uint32
	PortCapFlags  uint32
	MaxMsgSz      uint32
	BadPkeyCntr   uint32
	QkeyViolCntr  uint32
	PkeyTblLen    uint16
	LID           uint16
	SMLID         uint16
	LMC           uint8
	MaxVLNum      uint8
	SMSL          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	ActiveWidth   uint8
	ActiveSpeed   uint8
	PhysState     uint8
	LinkLayer     LinkLayer
	Flags         uint8
	PortCapFlags2 uint16 // only the ioctl path reports it
	// ActiveSpeedEx is the extended speed (6.12 and later, ioctl path);
	// 0 where the kernel reports only ActiveSpeed.
	ActiveSpeedEx uint32
}

// GID is a 128-bit port address.
type GID [16]byte

// Addr returns the GID as an IPv6 address (an IPv4-mapped one for RoCE v2
// GIDs derived from IPv4 addresses).
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g) }

// IsZero reports whether the GID is all zero (an empty table slot).
func (g GID) IsZero() bool { return g == GID{} }

// String formats the GID as an IPv6 address.
func (g GID) String() string { return g.Addr().String() }

// GIDType is the kind of a GID table entry.
type GIDType uint8

// GID types (enum ibv_gid_type).
const (
	GIDTypeIB     GIDType = 0
	GIDTypeRoCEv1 GIDType = 1
	GIDTypeRoCEv2 GIDType = 2
)

func (t GIDType) String() string {
	switch t {
	case GIDTypeIB:
		return "IB"
	case GIDTypeRoCEv1:
		return "RoCE v1"
	case GIDTypeRoCEv2:
		return "RoCE v2"
	}
	return fmt.Sprintf("GIDType(%d)", uint8(t))
}

// GIDEntry is one GID table entry.
type GIDEntry struct {
	GID           GID
	Index         int   // the GID index (ConnectAttr.SGIDIndex, GlobalRoute.SGIDIndex)
	Port          uint8 // the port number
	Type          GIDType
	NetdevIfindex uint32 // 0 when no netdev is associated
}
