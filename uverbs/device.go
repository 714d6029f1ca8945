package uverbs

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
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
	uv, err := fs.Uverbs(name)
	if err != nil {
		if errors.Is(err, sysfs.ErrNoAccess) && uv.CharDev != "" {
			return deviceInfo{}, fmt.Errorf("uverbs: open %s: %w; %s", name, err, accessAdvice(uv.CharDev))
		}
		return deviceInfo{}, fmt.Errorf("uverbs: open %s: %w", name, err)
	}
	info := deviceInfo{
		name:       name,
		charDev:    uv.CharDev,
		abiVersion: uv.ABIVersion,
		sys:        fs,
	}
	if info.ports, err = portNumbers(root, name); err != nil {
		return deviceInfo{}, fmt.Errorf("uverbs: open %s: %w", name, err)
	}
	if root == "/" || root == "" {
		// The kernel says which driver a device belongs to over netlink;
		// the name match below is for kernels that do not.
		if id, err := rdmanl.DriverID(name); err == nil {
			info.driver = abi.DriverID(id)
		}
	}
	return info, nil
}

// portNumbers lists the device's ports (the sysfs ports directory, as
// rdma-core counts them for phys_port_cnt_ex).
func portNumbers(root, name string) ([]int, error) {
	if root == "" {
		root = "/"
	}
	ents, err := os.ReadDir(filepath.Join(root, "sys/class/infiniband", name, "ports"))
	if err != nil {
		return nil, err
	}
	var ports []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && n >= 0 && n <= 255 {
			ports = append(ports, n)
		}
	}
	sort.Ints(ports)
	return ports, nil
}

// Devices lists the RDMA devices this program can open, in rdma-core's
// order: those sysfs shows usable (a uverbs node the caller may open, an
// ABI rdma-core speaks) and driven by a provider linked into the program.
// Pass a device's Name to Open. sysfs.New("/").AllDevices lists every
// device with the reason it cannot be used, and CheckProvider says why a
// device has no provider.
func Devices() ([]sysfs.Device, error) {
	all, err := sysfs.New("/").Devices()
	if err != nil {
		return nil, fmt.Errorf("uverbs: devices: %w", err)
	}
	var usable []sysfs.Device
	for _, d := range all {
		if CheckProvider(d) == nil {
			usable = append(usable, d)
		}
	}
	return usable, nil
}

// CheckProvider reports why Open would find no usable provider for the
// device d (none linked in, none exists, or its uverbs ABI is outside the
// provider's range), or nil. Tools that list devices use it to tell which
// ones a goverbs program can open.
func CheckProvider(d sysfs.Device) error {
	info := deviceInfo{name: d.Name, abiVersion: d.Uverbs.ABIVersion}
	if id, err := rdmanl.DriverID(d.Name); err == nil {
		info.driver = abi.DriverID(id)
	}
	p, err := info.provider()
	if err != nil {
		return err
	}
	if v := info.abiVersion; v != 0 {
		if lo, hi := p.ABIVersions(); v < lo || v > hi {
			return fmt.Errorf("uverbs: %s: the driver's uverbs ABI %d is outside the %s provider's range %d..%d", d.Name, v, p.Name(), lo, hi)
		}
	}
	return nil
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
// an empty slot (ENODATA). pa is the port's attributes if the caller has
// them; nil queries the port when the type needs its link layer.
func (c *Context) sysfsGIDEntry(port uint8, index int, pa *PortAttr) (GIDEntry, error) {
	g, err := c.dev.sys.ReadGID(c.dev.name, int(port), index)
	if errors.Is(err, unix.ENODATA) {
		return GIDEntry{}, unix.ENODATA
	}
	if errors.Is(err, os.ErrNotExist) {
		// A port the device lacks or an index past the table: the
		// kernel's GID query says EINVAL for both, so say the same
		// whichever path answered.
		return GIDEntry{}, invalid("query_gid", "%s has no port %d GID index %d (sysfs)", c.name, port, index)
	}
	if err != nil {
		return GIDEntry{}, fmt.Errorf("uverbs: query_gid on %s port %d index %d (sysfs): %w", c.name, port, index, err)
	}
	var ll LinkLayer
	if pa != nil {
		ll = pa.LinkLayer
	} else if g.Type != sysfs.GIDAttrRoCEv2 {
		a, err := c.QueryPort(port)
		if err != nil {
			return GIDEntry{}, err
		}
		ll = a.LinkLayer
	}
	e := GIDEntry{
		GID:   g.GID,
		Index: index,
		Port:  port,
		Type:  g.Type.Resolve(ll),
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
	// The kernel's query_port says EINVAL for a port the device lacks; say
	// the same here rather than sysfs' "no such file".
	if !slices.Contains(c.dev.ports, int(port)) {
		return 0, invalid("query_pkey", "%s has no port %d", c.name, port)
	}
	if index < 0 || index > 0xffff {
		return 0, invalid("query_pkey", "%s port %d: P_Key index %d out of range", c.name, port, index)
	}
	pk, err := c.dev.sys.ReadPKey(c.dev.name, int(port), index)
	if errors.Is(err, os.ErrNotExist) {
		return 0, invalid("query_pkey", "%s port %d: P_Key index %d is past the table", c.name, port, index)
	}
	if err != nil {
		return 0, fmt.Errorf("uverbs: query_pkey on %s port %d index %d: %w", c.name, port, index, err)
	}
	return pk, nil
}
