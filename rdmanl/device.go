package rdmanl

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	nl "github.com/goverbs/goverbs/internal/rdmanl"
	"github.com/goverbs/goverbs/sysfs"
)

// Device is an RDMA device as RDMA_NLDEV_CMD_GET reports it (rdma dev).
type Device struct {
	Index        uint32 // the kernel's device index (rdma -j: "ifindex")
	Name         string // "rxe0" ("ifname")
	NodeType     sysfs.NodeType
	NodeGUID     sysfs.GUID
	SysImageGUID sysfs.GUID
	FWVersion    string // "" when the driver reports none (rxe)
	// Protocol is the first port's protocol: "ib", "roce", "iw", "opa";
	// "" on kernels that do not send it.
	Protocol string
	Ports    uint32 // number of ports (the last port's number)
	// Caps is the device's capability flags (device_cap_flags,
	// IB_DEVICE_*), as rdma -d dev prints them by name.
	Caps uint64
	// AdaptiveModeration is the device's DIM setting for kernel CQs
	// ("adaptive-moderation").
	AdaptiveModeration bool
	// Driver names the uverbs driver (enum rdma_driver_id: "rxe",
	// "mlx5"), from the uverbs character device; "" when the device has
	// none.
	Driver string
}

func parseDevice(a nl.Attrs) (Device, error) {
	var d Device
	var err error
	if d.Index, d.Name, err = handle(a); err != nil {
		return Device{}, err
	}
	nt, err := a.U8(nl.RDMA_NLDEV_ATTR_DEV_NODE_TYPE)
	if err != nil {
		return Device{}, err
	}
	d.NodeType = sysfs.NodeType(nt)
	g, err := a.U64(nl.RDMA_NLDEV_ATTR_NODE_GUID)
	if err != nil {
		return Device{}, err
	}
	d.NodeGUID = sysfs.GUID(g)
	if g, err = a.OptU64(nl.RDMA_NLDEV_ATTR_SYS_IMAGE_GUID); err != nil {
		return Device{}, err
	}
	d.SysImageGUID = sysfs.GUID(g)
	if d.Ports, err = a.U32(nl.RDMA_NLDEV_ATTR_PORT_INDEX); err != nil {
		return Device{}, err
	}
	if d.Caps, err = a.OptU64(nl.RDMA_NLDEV_ATTR_CAP_FLAGS); err != nil {
		return Device{}, err
	}
	dim, err := a.OptU8(nl.RDMA_NLDEV_ATTR_DEV_DIM)
	if err != nil {
		return Device{}, err
	}
	d.AdaptiveModeration = dim != 0
	d.FWVersion = a.OptStr(nl.RDMA_NLDEV_ATTR_FW_VERSION)
	d.Protocol = a.OptStr(nl.RDMA_NLDEV_ATTR_DEV_PROTOCOL)
	if d.Name == "" {
		return Device{}, &nl.FormatError{What: fmt.Sprintf("device %d has an empty name", d.Index)}
	}
	return d, nil
}

// Devices lists the RDMA devices of the Conn's network namespace in the
// kernel's order (ascending index), as rdma dev does. If the kernel's list
// changed during the dump the results come with ErrDumpInterrupted.
func (c *Conn) Devices(ctx context.Context) ([]Device, error) {
	var devs []Device
	err := c.do(ctx, "get devices", nl.RDMA_NLDEV_CMD_GET, true, nil, func(a nl.Attrs) error {
		d, err := parseDevice(a)
		if err == nil {
			devs = append(devs, d)
		}
		return err
	})
	if err != nil && !errors.Is(err, ErrDumpInterrupted) {
		return nil, err
	}
	for i := range devs {
		devs[i].Driver = c.driver(ctx, devs[i].Index)
	}
	return devs, err
}

// driver names a device's uverbs driver, "" if it has no uverbs device.
func (c *Conn) driver(ctx context.Context, index uint32) string {
	attrs := nl.AppendU32Attr(nil, nl.RDMA_NLDEV_ATTR_DEV_INDEX, index)
	attrs = nl.AppendStringAttr(attrs, nl.RDMA_NLDEV_ATTR_CHARDEV_TYPE, "uverbs")
	var id uint32
	_ = c.do(ctx, "get chardev", nl.RDMA_NLDEV_CMD_GET_CHARDEV, false, attrs, func(a nl.Attrs) error {
		var err error
		id, err = a.OptU32(nl.RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID)
		return err
	})
	return nl.DriverName(id)
}

// Device returns the device called name, or an error matching ErrNotFound.
func (c *Conn) Device(ctx context.Context, name string) (Device, error) {
	if err := checkName("device", name); err != nil {
		return Device{}, err
	}
	devs, err := c.Devices(ctx)
	if err != nil && !errors.Is(err, ErrDumpInterrupted) {
		return Device{}, err
	}
	for _, d := range devs {
		if d.Name == name {
			return d, nil
		}
	}
	return Device{}, fmt.Errorf("%w: %q", ErrNotFound, name)
}

// DeviceByIndex asks the kernel for the device with the given index
// (RDMA_NLDEV_CMD_GET, not a dump); a missing index matches ErrNotFound.
func (c *Conn) DeviceByIndex(ctx context.Context, index uint32) (Device, error) {
	var d Device
	got := false
	attrs := nl.AppendU32Attr(nil, nl.RDMA_NLDEV_ATTR_DEV_INDEX, index)
	err := c.do(ctx, "get device", nl.RDMA_NLDEV_CMD_GET, false, attrs, func(a nl.Attrs) error {
		var err error
		d, err = parseDevice(a)
		got = err == nil
		return err
	})
	if err != nil {
		return Device{}, notFound(err, fmt.Sprintf("index %d", index))
	}
	if !got {
		return Device{}, fmt.Errorf("rdmanl: get device: the kernel acknowledged without a reply: %w", ErrMalformed)
	}
	d.Driver = c.driver(ctx, index)
	return d, nil
}

// notFound maps the EINVAL the kernel gives for a device index it does not
// know (ib_device_get_by_index failing) to ErrNotFound.
func notFound(err error, what string) error {
	if errnoOf(err) == unix.EINVAL {
		return &Error{Op: "look up device " + what, Kind: ErrNotFound, Err: err}
	}
	return err
}

// Port is one port of a device, as RDMA_NLDEV_CMD_PORT_GET reports it
// (rdma link).
type Port struct {
	DevIndex  uint32 // "ifindex"
	DevName   string // "ifname"
	Port      uint32 // "port"
	State     sysfs.PortState
	PhysState sysfs.PhysState
	// Caps is the port's capability mask (port_cap_flags, IB_PORT_*).
	Caps uint64
	// SubnetPrefix, LID, SMLID and LMC are sent for InfiniBand ports only.
	SubnetPrefix uint64
	LID          uint32
	SMLID        uint32
	LMC          uint8
	// Netdev and NetdevIndex name the network device under the port (RoCE,
	// iWARP), when the kernel reports one in the caller's namespace.
	Netdev      string
	NetdevIndex uint32
}

func parsePort(a nl.Attrs) (Port, error) {
	var p Port
	var err error
	if p.DevIndex, p.DevName, err = handle(a); err != nil {
		return Port{}, err
	}
	if p.Port, err = a.U32(nl.RDMA_NLDEV_ATTR_PORT_INDEX); err != nil {
		return Port{}, err
	}
	st, err := a.U8(nl.RDMA_NLDEV_ATTR_PORT_STATE)
	if err != nil {
		return Port{}, err
	}
	ph, err := a.U8(nl.RDMA_NLDEV_ATTR_PORT_PHYS_STATE)
	if err != nil {
		return Port{}, err
	}
	p.State, p.PhysState = sysfs.PortState(st), sysfs.PhysState(ph)
	if p.Caps, err = a.OptU64(nl.RDMA_NLDEV_ATTR_CAP_FLAGS); err != nil {
		return Port{}, err
	}
	if p.SubnetPrefix, err = a.OptU64(nl.RDMA_NLDEV_ATTR_SUBNET_PREFIX); err != nil {
		return Port{}, err
	}
	if p.LID, err = a.OptU32(nl.RDMA_NLDEV_ATTR_LID); err != nil {
		return Port{}, err
	}
	if p.SMLID, err = a.OptU32(nl.RDMA_NLDEV_ATTR_SM_LID); err != nil {
		return Port{}, err
	}
	if p.LMC, err = a.OptU8(nl.RDMA_NLDEV_ATTR_LMC); err != nil {
		return Port{}, err
	}
	if p.NetdevIndex, err = a.OptU32(nl.RDMA_NLDEV_ATTR_NDEV_INDEX); err != nil {
		return Port{}, err
	}
	p.Netdev = a.OptStr(nl.RDMA_NLDEV_ATTR_NDEV_NAME)
	return p, nil
}

// Ports lists the ports of the device with the given index.
func (c *Conn) Ports(ctx context.Context, devIndex uint32) ([]Port, error) {
	var ports []Port
	attrs := nl.AppendU32Attr(nil, nl.RDMA_NLDEV_ATTR_DEV_INDEX, devIndex)
	err := c.do(ctx, "get ports", nl.RDMA_NLDEV_CMD_PORT_GET, true, attrs, func(a nl.Attrs) error {
		p, err := parsePort(a)
		if err == nil {
			ports = append(ports, p)
		}
		return err
	})
	if err != nil && !errors.Is(err, ErrDumpInterrupted) {
		return nil, notFound(err, fmt.Sprintf("index %d", devIndex))
	}
	return ports, err
}

// Links lists every port of every device, as rdma link does.
func (c *Conn) Links(ctx context.Context) ([]Port, error) {
	devs, err := c.Devices(ctx)
	if err != nil && !errors.Is(err, ErrDumpInterrupted) {
		return nil, err
	}
	var all []Port
	for _, d := range devs {
		ps, err := c.Ports(ctx, d.Index)
		if errors.Is(err, ErrNotFound) {
			continue // removed since the dump
		}
		if err != nil && !errors.Is(err, ErrDumpInterrupted) {
			return nil, err
		}
		all = append(all, ps...)
	}
	return all, nil
}

// Port returns one port of the device with the given index.
func (c *Conn) Port(ctx context.Context, devIndex, port uint32) (Port, error) {
	var p Port
	got := false
	attrs := nl.AppendU32Attr(nil, nl.RDMA_NLDEV_ATTR_DEV_INDEX, devIndex)
	attrs = nl.AppendU32Attr(attrs, nl.RDMA_NLDEV_ATTR_PORT_INDEX, port)
	err := c.do(ctx, "get port", nl.RDMA_NLDEV_CMD_PORT_GET, false, attrs, func(a nl.Attrs) error {
		var err error
		p, err = parsePort(a)
		got = err == nil
		return err
	})
	if err != nil {
		return Port{}, notFound(err, fmt.Sprintf("index %d port %d", devIndex, port))
	}
	if !got {
		return Port{}, fmt.Errorf("rdmanl: get port: the kernel acknowledged without a reply: %w", ErrMalformed)
	}
	return p, nil
}

// Rename gives the device called name the name newName (rdma dev set NAME
// name NEW). A name in use gives ErrNameTaken.
func (c *Conn) Rename(ctx context.Context, name, newName string) error {
	if err := checkName("new name", newName); err != nil {
		return err
	}
	d, err := c.Device(ctx, name)
	if err != nil {
		return err
	}
	attrs := nl.AppendU32Attr(nil, nl.RDMA_NLDEV_ATTR_DEV_INDEX, d.Index)
	attrs = nl.AppendStringAttr(attrs, nl.RDMA_NLDEV_ATTR_DEV_NAME, newName)
	err = c.do(ctx, "rename "+name, nl.RDMA_NLDEV_CMD_SET, false, attrs, nil)
	if err != nil {
		op := fmt.Sprintf("rename %s to %s", name, newName)
		switch errnoOf(err) {
		case unix.EEXIST, unix.ENFILE: // assign_name finds the name in use
			return &Error{Op: op, Kind: ErrNameTaken, Err: err}
		}
		return &Error{Op: op, Err: err}
	}
	return nil
}

// maxNameLen is IB_DEVICE_NAME_MAX - 1: the longest device name.
const maxNameLen = 63

// checkName refuses a device name the kernel would refuse or truncate.
func checkName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("rdmanl: %s is empty", what)
	case len(name) > maxNameLen:
		return fmt.Errorf("rdmanl: %s %q is longer than %d bytes", what, name, maxNameLen)
	}
	for _, r := range name {
		if r == 0 || r == '/' || r == '%' || r == ' ' {
			return fmt.Errorf("rdmanl: %s %q contains %q", what, name, r)
		}
	}
	return nil
}
