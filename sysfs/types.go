package sysfs

import (
	"fmt"
	"net/netip"
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

// PortState is a port's logical state (kernel enum ib_port_state, the number
// in the state file "4: ACTIVE"; the same numbers as ibv_port_state).
type PortState int

// Port states.
const (
	PortNOP         PortState = 0
	PortDown        PortState = 1
	PortInit        PortState = 2
	PortArmed       PortState = 3
	PortActive      PortState = 4
	PortActiveDefer PortState = 5
)

var portStateNames = [...]string{"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"}

// String names the state as the kernel's state file does ("ACTIVE");
// numbers it does not know are "UNKNOWN", as there.
func (s PortState) String() string {
	if s >= 0 && int(s) < len(portStateNames) {
		return portStateNames[s]
	}
	return "UNKNOWN"
}

// PhysState is a port's physical state (the number in the phys_state file
// "5: LinkUp").
type PhysState int

// Physical port states (IBTA; kernel enum ib_port_phys_state).
const (
	PhysSleep                     PhysState = 1
	PhysPolling                   PhysState = 2
	PhysDisabled                  PhysState = 3
	PhysPortConfigurationTraining PhysState = 4
	PhysLinkUp                    PhysState = 5
	PhysLinkErrorRecovery         PhysState = 6
	PhysPhyTest                   PhysState = 7
)

var physStateNames = [...]string{"<unknown>", "Sleep", "Polling", "Disabled",
	"PortConfigurationTraining", "LinkUp", "LinkErrorRecovery", "Phy Test"}

// String names the state as the kernel's phys_state file does ("LinkUp");
// numbers it does not know are "<unknown>", as there.
func (s PhysState) String() string {
	if s >= 0 && int(s) < len(physStateNames) {
		return physStateNames[s]
	}
	return "<unknown>"
}

// LinkLayer is a port's link layer, numbered as rdma-core's
// IBV_LINK_LAYER_* (and the kernel's enum rdma_link_layer).
type LinkLayer int

// Link layers.
const (
	LinkLayerUnspecified LinkLayer = 0
	LinkLayerInfiniBand  LinkLayer = 1
	LinkLayerEthernet    LinkLayer = 2
)

// String names the link layer as the kernel's link_layer file does
// ("InfiniBand", "Ethernet"; "Unknown" for anything else).
func (l LinkLayer) String() string {
	switch l {
	case LinkLayerInfiniBand:
		return "InfiniBand"
	case LinkLayerEthernet:
		return "Ethernet"
	}
	return "Unknown"
}

// GIDType is a GID's type as sysfs names it in gid_attrs/types. sysfs does
// not tell IB from RoCE v1; the port's link layer does (rdma-core's
// query_sysfs_gid_entry): see [GIDType.Resolve].
type GIDType int

// GID types as sysfs knows them.
const (
	GIDTypeIBRoCEv1 GIDType = 0 // "IB/RoCE v1"
	GIDTypeRoCEv2   GIDType = 1 // "RoCE v2"
)

// String returns the name the kernel writes to gid_attrs/types.
func (t GIDType) String() string {
	switch t {
	case GIDTypeIBRoCEv1:
		return "IB/RoCE v1"
	case GIDTypeRoCEv2:
		return "RoCE v2"
	}
	return fmt.Sprintf("GIDType(%d)", int(t))
}

// VerbsGIDType is a GID type as the verbs API numbers it (enum ibv_gid_type
// and the kernel's IB_UVERBS_GID_TYPE_*): 0 IB, 1 RoCE v1, 2 RoCE v2.
type VerbsGIDType int

// Verbs GID types.
const (
	VerbsGIDTypeIB     VerbsGIDType = 0
	VerbsGIDTypeRoCEv1 VerbsGIDType = 1
	VerbsGIDTypeRoCEv2 VerbsGIDType = 2
)

// Resolve turns the sysfs type into the verbs one the way rdma-core's
// query_sysfs_gid_entry does: "IB/RoCE v1" is RoCE v1 on an Ethernet port and
// IB otherwise (an unspecified link layer counts as InfiniBand).
func (t GIDType) Resolve(ll LinkLayer) VerbsGIDType {
	if t == GIDTypeRoCEv2 {
		return VerbsGIDTypeRoCEv2
	}
	if ll == LinkLayerEthernet {
		return VerbsGIDTypeRoCEv1
	}
	return VerbsGIDTypeIB
}

// DevNum is a character device number.
type DevNum struct {
	Major uint32
	Minor uint32
}

// String formats the number as sysfs's dev files do: "231:192".
func (d DevNum) String() string { return fmt.Sprintf("%d:%d", d.Major, d.Minor) }

// GID is one entry of a port's GID table.
type GID struct {
	Index  int      // the entry's index in the port's table
	GID    [16]byte // network byte order
	Type   GIDType
	Netdev string // the netdev the entry belongs to; "" for none (InfiniBand)
}

// Addr returns the GID as an IPv6 address, which is how RoCE v2 GIDs are
// usually shown (an IPv4-mapped address for an IPv4 netdev address).
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g.GID) }

// Rate is a parsed port rate file, e.g. "2.5 Gb/sec (1X SDR)".
type Rate struct {
	// DeciGbps is the rate in tenths of Gb/s: the kernel computes it in
	// these units, so "2.5 Gb/sec" is 25.
	DeciGbps int
	Width    int    // lanes: 1, 2, 4, 8 or 12
	Speed    string // "SDR", "DDR", ..., "XDR"; "" for kernels that print SDR without a name
}
