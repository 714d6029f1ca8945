package uverbs

import (
	"fmt"

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

// PortState is a port's logical state (enum ibv_port_state), as
// PortAttr.State reports it: DOWN, INIT, ARMED, ACTIVE. It is the type
// sysfs.PortState under this package's name, so a state read here and one
// read from sysfs or netlink compare directly. It is a uint8, the size the
// kernel's port query gives it. String gives the kernel's and iproute2's
// names ("ACTIVE"; numbers past PortActiveDefer are "UNKNOWN").
type PortState = sysfs.PortState

// Port states (IBV_PORT_*; the same constants as sysfs's). PortNOP, "no
// state change", keeps the IBTA's capitals.
const (
	PortNOP         PortState = sysfs.PortNOP
	PortDown        PortState = sysfs.PortDown
	PortInit        PortState = sysfs.PortInit
	PortArmed       PortState = sysfs.PortArmed
	PortActive      PortState = sysfs.PortActive
	PortActiveDefer PortState = sysfs.PortActiveDefer
)

// PhysState is a port's physical state (IBTA PortPhysicalState), as
// PortAttr.PhysState reports it: LinkUp once the link is trained. It is
// the type sysfs.PhysState under this package's name, a uint8 as in the
// kernel's port query. String gives the kernel's phys_state names
// ("LinkUp"; 0 and unknown numbers are "<unknown>"); RDMALinkName gives the
// words iproute2's rdma link prints ("LINK_UP").
type PhysState = sysfs.PhysState

// Physical port states (the same constants as sysfs's).
const (
	PhysSleep                     PhysState = sysfs.PhysSleep
	PhysPolling                   PhysState = sysfs.PhysPolling
	PhysDisabled                  PhysState = sysfs.PhysDisabled
	PhysPortConfigurationTraining PhysState = sysfs.PhysPortConfigurationTraining
	PhysLinkUp                    PhysState = sysfs.PhysLinkUp
	PhysLinkErrorRecovery         PhysState = sysfs.PhysLinkErrorRecovery
	PhysPhyTest                   PhysState = sysfs.PhysPhyTest
)

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

// LinkLayer is a port's link layer (IBV_LINK_LAYER_*), as
// PortAttr.LinkLayer reports it: InfiniBand, or Ethernet for RoCE. It is
// the type sysfs.LinkLayer under this package's name, a uint8 as in the
// kernel's port query. String gives ibv_devinfo's names ("InfiniBand",
// "Ethernet", "Unspecified" for 0, "Unknown" for other numbers).
type LinkLayer = sysfs.LinkLayer

// Link layers (the same constants as sysfs's). LinkLayerUnspecified is what
// kernels from before the field report; it counts as InfiniBand.
const (
	LinkLayerUnspecified LinkLayer = sysfs.LinkLayerUnspecified
	LinkLayerInfiniBand  LinkLayer = sysfs.LinkLayerInfiniBand
	LinkLayerEthernet    LinkLayer = sysfs.LinkLayerEthernet
)

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
	PhysState     PhysState
	LinkLayer     LinkLayer
	Flags         uint8
	PortCapFlags2 uint16 // only the ioctl path reports it
	// ActiveSpeedEx is the extended speed (6.12 and later, ioctl path);
	// 0 where the kernel reports only ActiveSpeed.
	ActiveSpeedEx uint32
}

// GID is a 128-bit port address, an entry of a port's GID table: an IPv6
// address in network byte order (IPv4-mapped for a RoCE v2 GID made from an
// IPv4 address). It is the type sysfs.GID under this package's name, with
// Addr (the netip.Addr), IsZero (an empty table slot) and String (the
// address's text, "fe80::250:56ff:fe8f:c5b3").
type GID = sysfs.GID

// GIDType is the kind of a GID table entry (enum ibv_gid_type): IB, RoCE v1
// or RoCE v2. It is the type sysfs.GIDType under this package's name, a
// uint32 as in the kernel's GID query. (What sysfs's gid_attrs/types file
// says is sysfs.GIDAttrType, which cannot tell IB from RoCE v1.) String
// gives "IB", "RoCE v1", "RoCE v2", or "GIDType(n)" for another number.
type GIDType = sysfs.GIDType

// GID types (IBV_GID_TYPE_*; the same constants as sysfs's).
const (
	GIDTypeIB     GIDType = sysfs.GIDTypeIB
	GIDTypeRoCEv1 GIDType = sysfs.GIDTypeRoCEv1
	GIDTypeRoCEv2 GIDType = sysfs.GIDTypeRoCEv2
)

// GIDEntry is one GID table entry, as QueryGID and QueryGIDTable report it
// (ibv_gid_entry). It is not sysfs.GIDEntry: the kernel's GID query says
// which port the entry is on, resolves the type to IB, RoCE v1 or RoCE v2,
// and names the netdev by interface index, where sysfs has the two-valued
// gid_attrs type and the netdev's name. On kernels without the query this
// package builds the entry from sysfs's as rdma-core does.
type GIDEntry struct {
	GID           GID
	Index         int   // the GID index (ConnectAttr.SGIDIndex, GlobalRoute.SGIDIndex)
	Port          uint8 // the port number
	Type          GIDType
	NetdevIfindex uint32 // 0 when no netdev is associated
}
