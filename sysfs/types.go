package sysfs

import (
	"fmt"
	"net/netip"

	"github.com/goverbs/goverbs/internal/abi"
)

// GUID is a node or system image GUID as a number: the big-endian value the
// kernel prints in four 16-bit groups, read as one 64-bit integer, so that
// 0x0250_56ff_fe8f_c5b3 prints as "0250:56ff:fe8f:c5b3". It is also the value
// netlink's RDMA_NLDEV_ATTR_NODE_GUID carries.
type GUID uint64

// String formats the GUID the way sysfs and ibv_devinfo do.
func (g GUID) String() string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", uint16(g>>48), uint16(g>>32), uint16(g>>16), uint16(g))
}

// NodeType is the kernel's enum rdma_node_type, the number in the node_type
// file ("1: CA").
type NodeType int

// Node types (kernel enum rdma_node_type, rdma-core enum ibv_node_type).
const (
	NodeCA          NodeType = 1
	NodeSwitch      NodeType = 2
	NodeRouter      NodeType = 3
	NodeRNIC        NodeType = 4
	NodeUSNIC       NodeType = 5
	NodeUSNICUDP    NodeType = 6
	NodeUnspecified NodeType = 7
)

// String names the node type as rdma-core's ibv_node_type_str does
// ("InfiniBand channel adapter", "iWARP NIC", ..., "unknown").
func (t NodeType) String() string {
	switch t {
	case NodeCA:
		return "InfiniBand channel adapter"
	case NodeSwitch:
		return "InfiniBand switch"
	case NodeRouter:
		return "InfiniBand router"
	case NodeRNIC:
		return "iWARP NIC"
	case NodeUSNIC:
		return "usNIC"
	case NodeUSNICUDP:
		return "usNIC UDP"
	case NodeUnspecified:
		return "unspecified"
	}
	return "unknown"
}

// Transport is the transport rdma-core derives from the node type
// (ibv_device.transport_type, set in init.c verbs_init_device); ibv_devinfo
// prints it as "transport: InfiniBand (0)". RoCE devices are CAs, so their
// transport is InfiniBand.
func (t NodeType) Transport() Transport {
	switch t {
	case NodeCA, NodeSwitch, NodeRouter:
		return TransportIB
	case NodeRNIC:
		return TransportIWARP
	case NodeUSNIC:
		return TransportUSNIC
	case NodeUSNICUDP:
		return TransportUSNICUDP
	case NodeUnspecified:
		return TransportUnspecified
	}
	return TransportUnknown
}

// Transport is rdma-core's enum ibv_transport_type; its numbers are what
// ibv_devinfo prints in parentheses.
type Transport int

// Transports (rdma-core enum ibv_transport_type).
const (
	TransportUnknown     Transport = -1
	TransportIB          Transport = 0
	TransportIWARP       Transport = 1
	TransportUSNIC       Transport = 2
	TransportUSNICUDP    Transport = 3
	TransportUnspecified Transport = 4
)

// String names the transport as ibv_devinfo's transport_str does.
func (t Transport) String() string {
	switch t {
	case TransportIB:
		return "InfiniBand"
	case TransportIWARP:
		return "iWARP"
	case TransportUSNIC:
		return "usNIC"
	case TransportUSNICUDP:
		return "usNIC UDP"
	case TransportUnspecified:
		return "unspecified"
	}
	return "invalid transport"
}

// PortState is a port's logical state (IBTA; the kernel's enum
// ib_port_state, rdma-core's enum ibv_port_state). The kernel hands it out
// as a u8 in the verbs port query (ib_uverbs_query_port_resp.state) and in
// netlink's RDMA_NLDEV_ATTR_PORT_STATE, and as the number in sysfs's state
// file ("4: ACTIVE"), which ParsePortState refuses past 255 rather than
// truncate.
type PortState uint8

// Port states, numbered as IB_PORT_* and IBV_PORT_*. NOP ("no state
// change") keeps the IBTA's capitals, as the kernel and rdma-core do.
const (
	PortNOP         PortState = abi.PortNOP
	PortDown        PortState = abi.PortDown
	PortInit        PortState = abi.PortInit
	PortArmed       PortState = abi.PortArmed
	PortActive      PortState = abi.PortActive
	PortActiveDefer PortState = abi.PortActiveDefer
)

var portStateNames = [...]string{"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"}

// String names the state as the kernel's state file and iproute2's rdma
// link do ("ACTIVE"); numbers past PortActiveDefer are "UNKNOWN", as there.
// ibv_devinfo's "PORT_ACTIVE" is that tool's own spelling, kept by the
// programs that print it.
func (s PortState) String() string {
	if int(s) < len(portStateNames) {
		return portStateNames[s]
	}
	return "UNKNOWN"
}

// PhysState is a port's physical state (IBTA; the kernel's enum
// ib_port_phys_state). The kernel hands it out as a u8 in the verbs port
// query (ib_uverbs_query_port_resp.phys_state) and in netlink's
// RDMA_NLDEV_ATTR_PORT_PHYS_STATE, and as the number in sysfs's phys_state
// file ("5: LinkUp"), which ParsePhysState refuses past 255 rather than
// truncate. 0, the IBTA's "no state change", has no constant.
type PhysState uint8

// Physical port states (IB_PORT_PHYS_STATE_*).
const (
	PhysSleep                     PhysState = abi.PhysSleep
	PhysPolling                   PhysState = abi.PhysPolling
	PhysDisabled                  PhysState = abi.PhysDisabled
	PhysPortConfigurationTraining PhysState = abi.PhysPortConfigurationTraining
	PhysLinkUp                    PhysState = abi.PhysLinkUp
	PhysLinkErrorRecovery         PhysState = abi.PhysLinkErrorRecovery
	PhysPhyTest                   PhysState = abi.PhysPhyTest
)

var physStateNames = [...]string{"<unknown>", "Sleep", "Polling", "Disabled",
	"PortConfigurationTraining", "LinkUp", "LinkErrorRecovery", "Phy Test"}

// String names the state as the kernel's phys_state file does ("LinkUp");
// 0 and numbers past PhysPhyTest are "<unknown>", as there. iproute2
// spells the states its own way: see RDMALinkName. ibv_devinfo has a third
// spelling, which the program that imitates it keeps.
func (s PhysState) String() string {
	if int(s) < len(physStateNames) {
		return physStateNames[s]
	}
	return "<unknown>"
}

var physStateLinkNames = [...]string{"NOP", "SLEEP", "POLLING", "DISABLED", "ARMED", "LINK_UP",
	"LINK_ERROR_RECOVER", "PHY_TEST"}

// RDMALinkName names the state as iproute2's "rdma link" prints it, in its
// text and its JSON ("LINK_UP"; 4 is "ARMED" and 6 "LINK_ERROR_RECOVER"
// there); numbers past PhysPhyTest are "UNKNOWN", as there.
func (s PhysState) RDMALinkName() string {
	if int(s) < len(physStateLinkNames) {
		return physStateLinkNames[s]
	}
	return "UNKNOWN"
}

// LinkLayer is a port's link layer: rdma-core's IBV_LINK_LAYER_* (and the
// kernel's enum rdma_link_layer), a u8 in the verbs port query
// (ib_uverbs_query_port_resp.link_layer). sysfs's link_layer file names it
// instead ("InfiniBand", "Ethernet", "Unknown"): see ParseLinkLayer.
type LinkLayer uint8

// Link layers. LinkLayerUnspecified is what kernels from before the field
// existed report; rdma-core takes it for InfiniBand (see
// GIDAttrType.Resolve).
const (
	LinkLayerUnspecified LinkLayer = abi.LinkLayerUnspecified
	LinkLayerInfiniBand  LinkLayer = abi.LinkLayerInfiniBand
	LinkLayerEthernet    LinkLayer = abi.LinkLayerEthernet
)

// String names the link layer as ibv_devinfo does: "Unspecified",
// "InfiniBand", "Ethernet", and "Unknown" for any other number. (The
// kernel's link_layer file writes "Unknown" for LinkLayerUnspecified too.)
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

// GID is a 128-bit port address, the entry of a port's GID table: an IPv6
// address in network byte order (an IPv4-mapped one for a RoCE GID made
// from an IPv4 netdev address).
type GID [16]byte

// Addr returns the GID as an IPv6 address.
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g) }

// IsZero reports whether the GID is all zero: an empty table slot.
func (g GID) IsZero() bool { return g == GID{} }

// String formats the GID as an IPv6 address ("fe80::250:56ff:fe8f:c5b3",
// "::ffff:10.99.0.1"), which is how RoCE GIDs are usually shown.
func (g GID) String() string { return g.Addr().String() }

// GIDType is a GID's type as the verbs API numbers it: rdma-core's enum
// ibv_gid_type and the kernel's IB_UVERBS_GID_TYPE_*. The kernel's GID
// query carries it as a u32 (ib_uverbs_gid_entry.gid_type), so that is
// its size: a number this package does not know is kept, not cut down to
// one it does.
type GIDType uint32

// GID types (IBV_GID_TYPE_*).
const (
	GIDTypeIB     GIDType = abi.GIDTypeIB
	GIDTypeRoCEv1 GIDType = abi.GIDTypeRoCEv1
	GIDTypeRoCEv2 GIDType = abi.GIDTypeRoCEv2
)

// String names the type ("IB", "RoCE v1", "RoCE v2"); other numbers print
// as "GIDType(7)".
func (t GIDType) String() string {
	switch t {
	case GIDTypeIB:
		return "IB"
	case GIDTypeRoCEv1:
		return "RoCE v1"
	case GIDTypeRoCEv2:
		return "RoCE v2"
	}
	return fmt.Sprintf("GIDType(%d)", uint32(t))
}

// GIDAttrType is a GID's type as sysfs's gid_attrs/types file names it
// (rdma-core's enum ibv_gid_type_sysfs). The file does not tell IB from
// RoCE v1, so it has two values where GIDType has three; the port's link
// layer decides (see Resolve). It is a type of its own so that a value
// read from sysfs cannot be taken for a verbs GIDType unresolved.
type GIDAttrType uint8

// GID types as gid_attrs/types names them.
const (
	GIDAttrIBRoCEv1 GIDAttrType = 0 // "IB/RoCE v1"
	GIDAttrRoCEv2   GIDAttrType = 1 // "RoCE v2"
)

// String returns the name the kernel writes to gid_attrs/types.
func (t GIDAttrType) String() string {
	switch t {
	case GIDAttrIBRoCEv1:
		return "IB/RoCE v1"
	case GIDAttrRoCEv2:
		return "RoCE v2"
	}
	return fmt.Sprintf("GIDAttrType(%d)", uint8(t))
}

// Resolve turns the sysfs type into the verbs one the way rdma-core's
// query_sysfs_gid_entry does: "IB/RoCE v1" is RoCE v1 on an Ethernet port and
// IB otherwise (an unspecified link layer counts as InfiniBand).
func (t GIDAttrType) Resolve(ll LinkLayer) GIDType {
	if t == GIDAttrRoCEv2 {
		return GIDTypeRoCEv2
	}
	if ll == LinkLayerEthernet {
		return GIDTypeRoCEv1
	}
	return GIDTypeIB
}

// DevNum is a character device number.
type DevNum struct {
	Major uint32
	Minor uint32
}

// String formats the number as sysfs's dev files do: "231:192".
func (d DevNum) String() string { return fmt.Sprintf("%d:%d", d.Major, d.Minor) }

// GIDEntry is one entry of a port's GID table as sysfs gives it
// (ports/N/gids, gid_attrs/types, gid_attrs/ndevs). It holds less than the
// entry of the kernel's GID query (uverbs.GIDEntry), because sysfs says
// less: the type is the two-valued GIDAttrType until the port's link layer
// resolves it, and the netdev is a name where the query gives an interface
// index (the two meet only through the caller's network namespace). There
// is no port number: the caller names the port.
type GIDEntry struct {
	Index  int // the entry's index in the port's table
	GID    GID
	Type   GIDAttrType
	Netdev string // the netdev the entry belongs to; "" for none (InfiniBand)
}

// Rate is a parsed port rate file, e.g. "2.5 Gb/sec (1X SDR)".
type Rate struct {
	// DeciGbps is the rate in tenths of Gb/s: the kernel computes it in
	// these units, so "2.5 Gb/sec" is 25.
	DeciGbps int
	Width    int    // lanes: 1, 2, 4, 8 or 12
	Speed    string // "SDR", "DDR", ..., "XDR"; "" for kernels that print SDR without a name
}
