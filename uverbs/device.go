package uverbs

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/rdmanl"
	"github.com/goverbs/goverbs/sysfs"
)

// deviceInfo is what opening a device needs to know about it.
type deviceInfo struct {
	name       string
	charDev    string
	abiVersion int
	driver     abi.DriverID // DriverUnknown when netlink did not say
	ports      []int
	sys        *sysfs.FS
}

func findDevice(root, name string) (deviceInfo, error) {
	fs := sysfs.New(root)
	d, err := fs.Device(name)
	if err != nil {
		return deviceInfo{}, fmt.Errorf("uverbs: open %s: %w", name, err)
	}
	if d.Problem != nil {
		return deviceInfo{}, fmt.Errorf("uverbs: open %s: %w", name, d.Problem)
	}
	info := deviceInfo{
		name:       d.Name,
		charDev:    d.Uverbs.CharDev,
		abiVersion: d.Uverbs.ABIVersion,
		sys:        fs,
	}
	for _, p := range d.Ports {
		info.ports = append(info.ports, p.Num)
	}
	sort.Ints(info.ports)
	if root == "/" {
		// The kernel says which driver a device belongs to over netlink;
		// the name match below is for kernels that do not.
		if id, err := rdmanl.DriverID(name); err == nil {
			info.driver = abi.DriverID(id)
		}
	}
	return info, nil
}

// provider picks the device's provider: by driver ID, else by name.
func (d deviceInfo) provider() (provider.Provider, error) {
	if d.driver != abi.DriverUnknown {
		if p, ok := provider.Lookup(d.driver); ok {
			return p, nil
		}
		if k, ok := provider.Known[d.driver]; ok {
			return nil, fmt.Errorf("uverbs: open %s: the %s provider is not linked into this program: import _ %q", d.name, k.Name, k.Import)
		}
		return nil, fmt.Errorf("uverbs: open %s: goverbs has no provider for the %s driver (driver id %d): %w",
			d.name, provider.DriverName(d.driver), uint32(d.driver), ErrNotSupported)
	}
	if p, ok := provider.MatchName(d.name); ok {
		return p, nil
	}
	for id, k := range provider.Known {
		if _, linked := provider.Lookup(id); !linked && strings.HasPrefix(d.name, k.Name) {
			return nil, fmt.Errorf("uverbs: open %s: the %s provider is not linked into this program: import _ %q", d.name, k.Name, k.Import)
		}
	}
	return nil, fmt.Errorf("uverbs: open %s: no goverbs provider recognises the device: %w", d.name, ErrNotSupported)
}

// sysfsGIDEntry answers a GID query from sysfs the way rdma-core's
// fallback does: an "IB/RoCE v1" type means RoCE v1 on Ethernet and IB
// otherwise, the netdev name becomes its ifindex, and an all-zero GID is
// an empty slot (ENODATA). linkLayer < 0 means "query the port".
func (c *Context) sysfsGIDEntry(port uint8, index int, linkLayer int) (GIDEntry, error) {
	g, err := c.dev.sys.ReadGID(c.dev.name, int(port), index)
	if errors.Is(err, unix.ENODATA) {
		return GIDEntry{}, unix.ENODATA
	}
	if err != nil {
		return GIDEntry{}, fmt.Errorf("uverbs: query_gid on %s port %d index %d (sysfs): %w", c.name, port, index, err)
	}
	if linkLayer < 0 && g.Type != sysfs.GIDTypeRoCEv2 {
		pa, err := c.QueryPort(port)
		if err != nil {
			return GIDEntry{}, err
		}
		linkLayer = int(pa.LinkLayer)
	}
	e := GIDEntry{
		GID:   GID(g.GID),
		Index: uint32(index),
		Port:  uint32(port),
		Type:  GIDType(g.Type.Resolve(sysfs.LinkLayer(linkLayer))),
	}
	if g.Netdev != "" {
		if ifi, err := net.InterfaceByName(g.Netdev); err == nil {
			e.NetdevIfindex = uint32(ifi.Index)
		}
	}
	return e, nil
}

// QueryPKey returns entry index of port's P_Key table (read from sysfs, as
// rdma-core does).
func (c *Context) QueryPKey(port uint8, index int) (uint16, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	if err := c.checkPort("query_pkey", port); err != nil {
		return 0, err
	}
	d, err := c.dev.sys.Device(c.dev.name)
	if err != nil {
		return 0, fmt.Errorf("uverbs: query_pkey on %s: %w", c.name, err)
	}
	for _, p := range d.Ports {
		if p.Num == int(port) {
			if index < 0 || index >= len(p.PKeys) {
				return 0, fmt.Errorf("uverbs: query_pkey on %s port %d: index %d outside the %d-entry table", c.name, port, index, len(p.PKeys))
			}
			return p.PKeys[index], nil
		}
	}
	return 0, fmt.Errorf("uverbs: query_pkey on %s: no port %d", c.name, port)
}
