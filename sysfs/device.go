package sysfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"

	"github.com/goverbs/goverbs/internal/rdmanl"
)

// Device is an RDMA device as sysfs describes it
// (/sys/class/infiniband/<name>; kernel drivers/infiniband/core/sysfs.c).
type Device struct {
	Name         string // "rxe0", "mlx5_0"
	NodeType     NodeType
	NodeGUID     GUID
	SysImageGUID GUID
	FWVer        string // fw_ver; "" when the driver reports none (rxe)
	NodeDesc     string // node_desc
	HWRev        string // hw_rev; driver-provided, "" when absent (rxe)
	HCAType      string // hca_type; driver-provided, "" when absent (rxe)
	BoardID      string // board_id; driver-provided, "" when absent (rxe)
	// Driver is the kernel driver behind the device. For a device with a
	// parent (PCI, auxiliary bus) it is the name of the parent's driver,
	// from the device/driver symlink: "mlx5_core" for mlx5. Software
	// devices (rxe, siw) have no parent; for them it is the kernel's
	// uverbs driver ID named as in enum rdma_driver_id ("rxe", "siw"), which
	// only netlink tells, so it is "" for an FS other than New("/").
	Driver string
	Uverbs Uverbs // zero when no uverbs device is bound (see Problem)
	Ports  []Port // ascending port numbers (port 0 alone on a switch)
	// Problem says why the device cannot be used, nil if it can: one of
	// ErrNoUverbs, ErrNoCharDev, ErrNoAccess, ErrABIVersion (match with
	// errors.Is), or an error about a sysfs file that could not be read or
	// parsed (a *ParseError or an *fs.PathError naming the file).
	Problem error
}

// Uverbs is the uverbs character device bound to an RDMA device
// (/sys/class/infiniband_verbs/uverbsN).
type Uverbs struct {
	Name string // "uverbs0"
	// CharDev is the path to open: "/dev/infiniband/uverbs0" on the
	// running system, under the root given to New otherwise.
	CharDev string
	Dev     DevNum // from uverbsN/dev, e.g. 231:192
	// ABIVersion is the driver's uverbs ABI (uverbsN/abi_version: rxe 2,
	// mlx5 1), which providers check against their supported range; 0 if
	// the file is missing, as rdma-core leaves it.
	ABIVersion int
}

// Port is one port of a device (/sys/class/infiniband/<dev>/ports/<num>).
type Port struct {
	Num       int
	State     PortState
	PhysState PhysState
	LinkLayer LinkLayer
	LID       uint32 // "0x%x"; 32 bits since OPA
	SMLID     uint32
	LMC       uint8  // lid_mask_count
	CapMask   uint32 // cap_mask: the port capability flags
	// Rate is the rate file's text ("10 Gb/sec (1X FDR10)"), "" when the
	// kernel refuses to compute one (invalid width); ParseRate splits it.
	Rate  string
	GIDs  []GIDEntry // the non-empty entries of the GID table, by index
	PKeys []uint16   // the P_Key table by index; empty when the port has none
}

// problem keeps the first error met while reading a device.
type problem struct{ err error }

func (p *problem) note(err error) {
	if err != nil && p.err == nil {
		p.err = err
	}
}

func (f *FS) readDevice(name string, s *scan) Device {
	dir := path.Join(ibClassDir, name)
	d := Device{Name: name}
	var p problem

	// Usability first: these are the problems worth reporting over a
	// malformed attribute.
	if uv, ok := s.uverbs[name]; ok {
		var err error
		d.Uverbs, err = f.readUverbs(uv)
		p.note(err)
		p.note(s.classABI)
	} else {
		p.note(fmt.Errorf("sysfs: %s: %w", name, ErrNoUverbs))
	}

	var err error
	d.NodeType, err = readParsed(f, path.Join(dir, "node_type"), ParseNodeType)
	p.note(err)
	d.NodeGUID, err = readParsed(f, path.Join(dir, "node_guid"), ParseGUID)
	p.note(err)
	d.SysImageGUID, err = readParsed(f, path.Join(dir, "sys_image_guid"), ParseGUID)
	p.note(err)
	for _, o := range []struct {
		file string
		dst  *string
	}{
		{"fw_ver", &d.FWVer}, {"node_desc", &d.NodeDesc}, {"hw_rev", &d.HWRev},
		{"hca_type", &d.HCAType}, {"board_id", &d.BoardID},
	} {
		*o.dst, err = f.readOptional(path.Join(dir, o.file))
		p.note(err)
	}
	d.Driver = f.driver(dir, name, s)

	ports, err := f.sortedIndices(path.Join(dir, "ports"))
	p.note(err)
	for _, num := range ports {
		port, err := f.readPort(dir, num)
		p.note(err)
		d.Ports = append(d.Ports, port)
	}
	d.Problem = p.err
	return d
}

// driver finds the kernel driver: the parent device's driver link when
// there is a parent, else the uverbs driver ID from netlink.
func (f *FS) driver(dir, name string, s *scan) string {
	if target, err := fs.ReadLink(f.fsys, path.Join(dir, "device", "driver")); err == nil {
		return path.Base(target)
	}
	for _, d := range s.nl {
		if d.name == name {
			return rdmanl.DriverName(d.driverID)
		}
	}
	return ""
}

func (f *FS) readUverbs(name string) (Uverbs, error) {
	dir := path.Join(uverbsClassDir, name)
	u := Uverbs{Name: name, CharDev: f.cdevRoot + "/" + path.Join(cdevDir, name)}
	var err error
	if u.Dev, err = readParsed(f, path.Join(dir, "dev"), ParseDevNum); err != nil {
		return u, err
	}
	abi, err := f.readOptional(path.Join(dir, "abi_version"))
	if err != nil {
		return u, err
	}
	if abi != "" {
		v, err := parseDec(abi, 31, "a decimal ABI version")
		if err != nil {
			return u, inFile(err, path.Join(dir, "abi_version"))
		}
		u.ABIVersion = int(v)
	}
	return u, f.checkCharDev(u)
}

// checkCharDev checks the node rdma-core's try_access_device stats, and
// that it can be opened read-write.
func (f *FS) checkCharDev(u Uverbs) error {
	node := path.Join(cdevDir, u.Name)
	fi, err := fs.Stat(f.fsys, node)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sysfs: %s: %w: %w", u.CharDev, ErrNoCharDev, err)
	}
	if err != nil {
		return fmt.Errorf("sysfs: %s: %w", u.CharDev, err)
	}
	if fi.Mode()&fs.ModeCharDevice == 0 {
		return fmt.Errorf("sysfs: %s is not a character device: %w", u.CharDev, ErrNoCharDev)
	}
	if got, ok := charDevNum(fi); ok && got != u.Dev {
		return fmt.Errorf("sysfs: %s is device %v, but %s/%s/dev says %v: %w",
			u.CharDev, got, uverbsClassDir, u.Name, u.Dev, ErrNoCharDev)
	}
	if a, ok := f.fsys.(AccessFS); ok {
		if err := a.AccessReadWrite(node); err != nil {
			return fmt.Errorf("sysfs: %s: %w: %w", u.CharDev, ErrNoAccess, err)
		}
	}
	return nil
}

func (f *FS) readPort(dir string, num int) (Port, error) {
	pdir := path.Join(dir, "ports", strconv.Itoa(num))
	pt := Port{Num: num}
	var p problem
	var err error
	pt.State, err = readParsed(f, path.Join(pdir, "state"), ParsePortState)
	p.note(err)
	pt.PhysState, err = readParsed(f, path.Join(pdir, "phys_state"), ParsePhysState)
	p.note(err)
	pt.LinkLayer, err = readParsed(f, path.Join(pdir, "link_layer"), ParseLinkLayer)
	p.note(err)
	lid, err := readParsed(f, path.Join(pdir, "lid"), hexParser(32, `a LID like "0x1"`))
	p.note(err)
	smlid, err := readParsed(f, path.Join(pdir, "sm_lid"), hexParser(32, `a LID like "0x1"`))
	p.note(err)
	lmc, err := readParsed(f, path.Join(pdir, "lid_mask_count"), decParser(8, "a decimal LMC"))
	p.note(err)
	capMask, err := readParsed(f, path.Join(pdir, "cap_mask"), hexParser(32, `a mask like "0x00010000"`))
	p.note(err)
	pt.LID, pt.SMLID, pt.LMC, pt.CapMask = uint32(lid), uint32(smlid), uint8(lmc), uint32(capMask)

	rateFile := path.Join(pdir, "rate")
	rate, err := f.readAttr(rateFile)
	switch {
	case errors.Is(err, errInvalid):
		// rate_show returns EINVAL when the active width is invalid.
	case err != nil:
		p.note(err)
	default:
		_, perr := ParseRate(rate)
		p.note(inFile(perr, rateFile))
		pt.Rate = rate
	}

	gids, err := f.sortedIndices(path.Join(pdir, "gids"))
	p.note(err)
	for _, i := range gids {
		g, empty, err := f.readGID(pdir, i)
		p.note(err)
		if err == nil && !empty {
			pt.GIDs = append(pt.GIDs, g)
		}
	}
	pkeys, err := f.sortedIndices(path.Join(pdir, "pkeys"))
	p.note(err)
	for _, i := range pkeys {
		k, err := readParsed(f, path.Join(pdir, "pkeys", strconv.Itoa(i)), ParsePKey)
		p.note(err)
		pt.PKeys = append(pt.PKeys, k)
	}
	return pt, p.err
}

func hexParser(bits int, want string) func(string) (uint64, error) {
	return func(s string) (uint64, error) { return parseHex(trimNL(s), bits, want) }
}

func decParser(bits int, want string) func(string) (uint64, error) {
	return func(s string) (uint64, error) { return parseDec(trimNL(s), bits, want) }
}

// ReadGID reads entry index of a port's GID table, the way rdma-core's
// query_sysfs_gid_entry does when the kernel has no GID ioctl:
//   - the GID from ports/<port>/gids/<index>; an all-zero GID is an empty
//     slot and gives ErrGIDEmpty (which also matches unix.ENODATA);
//   - the type from gid_attrs/types/<index>. The kernel refuses to read it
//     (EINVAL) for entries without attributes, and kernels before 4.5 have
//     no gid_attrs at all: both mean "IB/RoCE v1". Any other failure is an
//     error;
//   - the netdev from gid_attrs/ndevs/<index>, "" when it cannot be read
//     (InfiniBand entries have none).
//
// The type is sysfs's; GIDAttrType.Resolve with the port's link layer gives
// the verbs type.
func (f *FS) ReadGID(device string, port, index int) (GIDEntry, error) {
	if err := f.checkDevice(device); err != nil {
		return GIDEntry{}, err
	}
	if port < 0 || index < 0 {
		return GIDEntry{}, fmt.Errorf("sysfs: %s port %d GID %d: negative number: %w", device, port, index, fs.ErrInvalid)
	}
	pdir := path.Join(ibClassDir, device, "ports", strconv.Itoa(port))
	g, empty, err := f.readGID(pdir, index)
	if err != nil {
		return GIDEntry{}, err
	}
	if empty {
		return GIDEntry{}, fmt.Errorf("sysfs: %s port %d GID %d: %w", device, port, index, ErrGIDEmpty)
	}
	return g, nil
}

// readGID reads one GID entry; empty reports an all-zero GID, for which the
// type and netdev are not read.
func (f *FS) readGID(pdir string, index int) (g GIDEntry, empty bool, err error) {
	i := strconv.Itoa(index)
	g.Index = index
	if g.GID, err = readParsed(f, path.Join(pdir, "gids", i), ParseGID); err != nil {
		return GIDEntry{}, false, err
	}
	if g.GID.IsZero() {
		return GIDEntry{}, true, nil
	}
	if g.Type, err = f.readGIDAttrType(pdir, i); err != nil {
		return GIDEntry{}, false, err
	}
	ndev, err := f.readAttr(path.Join(pdir, "gid_attrs", "ndevs", i))
	if err == nil && validName(ndev) {
		g.Netdev = ndev
	}
	return g, false, nil
}

func (f *FS) readGIDAttrType(pdir, i string) (GIDAttrType, error) {
	file := path.Join(pdir, "gid_attrs", "types", i)
	s, err := f.readAttr(file)
	if err == nil && s != "" {
		t, err := ParseGIDAttrType(s)
		return t, inFile(err, file)
	}
	if errors.Is(err, errInvalid) {
		return GIDAttrIBRoCEv1, nil
	}
	attrs := path.Join(pdir, "gid_attrs")
	if _, serr := fs.Stat(f.fsys, attrs); errors.Is(serr, fs.ErrNotExist) {
		return GIDAttrIBRoCEv1, nil // a kernel from before GID attributes
	}
	if err == nil {
		err = &ParseError{File: file, Text: s, Want: `"IB/RoCE v1" or "RoCE v2"`}
	}
	return 0, err
}

// Uverbs returns the uverbs character device of the device called name,
// checked as Device checks it: the part of Device a program needs to open
// the device, without reading ports and GID tables (rxe has 1024 GID
// entries per port, so Device costs over a thousand file reads). The error
// is ErrNoDevice, or the reason the device cannot be opened: ErrNoUverbs,
// ErrNoCharDev, ErrNoAccess or ErrABIVersion, or a sysfs file error.
func (f *FS) Uverbs(name string) (Uverbs, error) {
	if err := f.checkDevice(name); err != nil {
		return Uverbs{}, err
	}
	uv, ok := f.uverbsByDevice()[name]
	if !ok {
		return Uverbs{}, fmt.Errorf("sysfs: %s: %w", name, ErrNoUverbs)
	}
	u, err := f.readUverbs(uv)
	if err != nil {
		return u, err
	}
	return u, f.checkClassABI()
}

// ReadPKey reads entry index of a port's P_Key table
// (ports/<port>/pkeys/<index>), as rdma-core's ibv_query_pkey does. An index
// past the table (or a port without one) gives an error matching
// fs.ErrNotExist.
func (f *FS) ReadPKey(device string, port, index int) (uint16, error) {
	if err := f.checkDevice(device); err != nil {
		return 0, err
	}
	if port < 0 || index < 0 {
		return 0, fmt.Errorf("sysfs: %s port %d P_Key %d: negative number: %w", device, port, index, fs.ErrInvalid)
	}
	return readParsed(f, path.Join(ibClassDir, device, "ports", strconv.Itoa(port), "pkeys", strconv.Itoa(index)), ParsePKey)
}
