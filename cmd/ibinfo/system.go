package main

import (
	"github.com/goverbs/goverbs/uverbs"
)

// hca is one device as ibv_get_device_list reports it, plus what sysfs
// says about it for the JSON output.
type hca struct {
	name     string
	nodeType int    // kernel node type (sysfs node_type): 1 CA, 4 RNIC, ...
	boardID  []byte // board_id as one read() returned it; nil when unreadable

	// For the JSON output only.
	info hcaInfo
}

// hcaInfo is sysfs's description of a device beyond what ibv_devinfo
// prints.
type hcaInfo struct {
	NodeDesc   string // node_desc
	CharDev    string // /dev/infiniband/uverbsN
	ABIVersion int    // uverbs ABI version of the driver; -1 when unknown
	Driver     string // kernel driver, e.g. "rdma_rxe"; "" when unknown
	Ports      map[int]portInfo
}

// portInfo is sysfs's description of a port.
type portInfo struct {
	Netdev string           // the port's network device (RoCE, iWARP); "" for IB
	GIDs   map[int]gidSysfs // non-empty GID table entries by index
	Rate   string           // sysfs rate text
}

// gidSysfs is a GID entry's sysfs attributes.
type gidSysfs struct {
	Type   string // "IB/RoCE v1" or "RoCE v2" as sysfs spells it
	Netdev string
}

// unusable is a device that exists in sysfs but that ibv_devinfo would not
// list, with the reason.
type unusable struct {
	name   string
	reason error
	h      hca // what sysfs says of it, for the JSON output; may be zero
}

// system is the machine as ibinfo sees it. The real one reads sysfs and
// opens uverbs devices; tests use fakes.
type system interface {
	// Devices returns the usable devices in ibv_get_device_list's order,
	// and those present but unusable with the reason. err is set when the
	// device list cannot be had at all (no RDMA subsystem).
	Devices() (usable []hca, skipped []unusable, err error)
	// Open opens a device of the list.
	Open(h hca) (device, error)
}

// The uverbs context is ibinfo's device.
var _ device = (*uverbs.Context)(nil)
