package rdmanl

import "fmt"

// Device is one entry of the RDMA_NLDEV_CMD_GET dump.
type Device struct {
	Index        uint32 // the kernel's device index (RDMA_NLDEV_ATTR_DEV_INDEX)
	Name         string // "rxe0", "mlx5_0"
	NodeType     uint8  // enum rdma_node_type: 1 CA, 2 switch, 3 router, 4 RNIC, ...
	NodeGUID     uint64 // host order of the big-endian GUID, as sysfs prints it
	SysImageGUID uint64 // 0 if the kernel did not send it
	Ports        uint32 // number of ports (PORT_INDEX in the device-level dump)
	FWVersion    string // "" if the kernel did not send it
	Protocol     string // "ib", "roce", "iw", "opa"; "" if the kernel did not send it
}

// ParseDevice decodes one RDMA_NLDEV_CMD_GET reply. Like rdma-core's
// find_sysfs_devs_nl_cb it requires index, name, node type, node GUID and
// port count; the other fields are optional.
func ParseDevice(payload []byte) (Device, error) {
	a, err := newAttrSet(payload)
	if err != nil {
		return Device{}, err
	}
	var d Device
	if d.Index, err = a.U32(RDMA_NLDEV_ATTR_DEV_INDEX); err != nil {
		return Device{}, err
	}
	if d.Name, err = a.Str(RDMA_NLDEV_ATTR_DEV_NAME); err != nil {
		return Device{}, err
	}
	if d.NodeType, err = a.U8(RDMA_NLDEV_ATTR_DEV_NODE_TYPE); err != nil {
		return Device{}, err
	}
	if d.NodeGUID, err = a.U64(RDMA_NLDEV_ATTR_NODE_GUID); err != nil {
		return Device{}, err
	}
	if d.Ports, err = a.U32(RDMA_NLDEV_ATTR_PORT_INDEX); err != nil {
		return Device{}, err
	}
	if a.Has(RDMA_NLDEV_ATTR_SYS_IMAGE_GUID) {
		if d.SysImageGUID, err = a.U64(RDMA_NLDEV_ATTR_SYS_IMAGE_GUID); err != nil {
			return Device{}, err
		}
	}
	if a.Has(RDMA_NLDEV_ATTR_FW_VERSION) {
		d.FWVersion, _ = a.Str(RDMA_NLDEV_ATTR_FW_VERSION)
	}
	if a.Has(RDMA_NLDEV_ATTR_DEV_PROTOCOL) {
		d.Protocol, _ = a.Str(RDMA_NLDEV_ATTR_DEV_PROTOCOL)
	}
	if d.Name == "" {
		return Device{}, &FormatError{What: fmt.Sprintf("device %d has an empty name", d.Index)}
	}
	return d, nil
}

// CharDev is the reply to RDMA_NLDEV_CMD_GET_CHARDEV: the character device
// a kernel client (here "uverbs") offers for one RDMA device.
type CharDev struct {
	Name  string // "uverbs0"
	Major uint32
	Minor uint32
	// ABI is the client's ABI for this device: for uverbs, the driver's
	// uverbs ABI version (rxe 2, mlx5 1). The kernel reserves the top 32
	// bits of the attribute; they are dropped here.
	ABI uint32
	// DriverID is UVERBS_DRIVER_ID (enum rdma_driver_id: rxe 14, mlx5 1); 0
	// (RDMA_DRIVER_UNKNOWN) when the kernel did not send one.
	DriverID uint32
}

// ParseCharDev decodes a RDMA_NLDEV_CMD_GET_CHARDEV reply. Like rdma-core's
// find_uverbs_nl_cb it requires the dev_t, the ABI and the name; the driver
// ID is optional.
func ParseCharDev(payload []byte) (CharDev, error) {
	a, err := newAttrSet(payload)
	if err != nil {
		return CharDev{}, err
	}
	dev, err := a.U64(RDMA_NLDEV_ATTR_CHARDEV)
	if err != nil {
		return CharDev{}, err
	}
	abi, err := a.U64(RDMA_NLDEV_ATTR_CHARDEV_ABI)
	if err != nil {
		return CharDev{}, err
	}
	name, err := a.Str(RDMA_NLDEV_ATTR_CHARDEV_NAME)
	if err != nil {
		return CharDev{}, err
	}
	if name == "" {
		return CharDev{}, &FormatError{What: "character device has an empty name"}
	}
	c := CharDev{Name: name, ABI: uint32(abi)}
	c.Major, c.Minor = DecodeDev(dev)
	if a.Has(RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID) {
		if c.DriverID, err = a.U32(RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID); err != nil {
			return CharDev{}, err
		}
	}
	return c, nil
}

// DecodeDev splits the kernel's huge_encode_dev() form of a dev_t, as sent
// in RDMA_NLDEV_ATTR_CHARDEV, into major and minor numbers. This is the
// decoding rdma-core's find_uverbs_nl_cb uses: the minor's low 8 bits sit in
// bits 0-7 and its high bits from bit 20; the 12-bit major sits in bits 8-19.
func DecodeDev(dev uint64) (major, minor uint32) {
	major = uint32((dev & 0xfff00) >> 8)
	minor = uint32((dev & 0xff) | ((dev >> 12) & 0xfff00))
	return major, minor
}

// Sys is the reply to RDMA_NLDEV_CMD_SYS_GET.
type Sys struct {
	// NetnsShared is true when RDMA devices are shared by all network
	// namespaces (the default), false in exclusive mode.
	NetnsShared bool
	// CopyOnFork is true when the kernel copies pinned pages on fork
	// (5.13+), so user memory registered for DMA stays safe across fork
	// without madvise(MADV_DONTFORK).
	CopyOnFork bool
	// HaveCopyOnFork is false on kernels that do not report the attribute;
	// rdma-core's get_copy_on_fork then assumes false.
	HaveCopyOnFork bool
}

// ParseSys decodes a RDMA_NLDEV_CMD_SYS_GET reply. No attribute is required.
func ParseSys(payload []byte) (Sys, error) {
	a, err := newAttrSet(payload)
	if err != nil {
		return Sys{}, err
	}
	var s Sys
	if a.Has(RDMA_NLDEV_SYS_ATTR_NETNS_MODE) {
		m, err := a.U8(RDMA_NLDEV_SYS_ATTR_NETNS_MODE)
		if err != nil {
			return Sys{}, err
		}
		s.NetnsShared = m != 0
	}
	if a.Has(RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK) {
		c, err := a.U8(RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK)
		if err != nil {
			return Sys{}, err
		}
		s.CopyOnFork, s.HaveCopyOnFork = c != 0, true
	}
	return s, nil
}
