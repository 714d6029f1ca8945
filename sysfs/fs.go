package sysfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Where things are, relative to the root.
const (
	ibClassDir     = "sys/class/infiniband"
	uverbsClassDir = "sys/class/infiniband_verbs"
	cdevDir        = "dev/infiniband" // rdma-core's RDMA_CDEV_DIR
)

// maxAttrSize bounds what is read from one sysfs file: the kernel's
// attributes are at most a page.
const maxAttrSize = 8192

// FS reads RDMA devices from a sysfs tree. Its methods read the files anew
// on every call; an FS holds no state about the devices and is safe for
// concurrent use.
type FS struct {
	fsys fs.FS
	// cdevRoot is prepended to "/dev/infiniband/uverbsN" to form
	// Uverbs.CharDev: the root given to New, or "" for NewFS.
	cdevRoot string
	// netlink lists the kernel's devices in index order with their uverbs
	// driver IDs; set only for the live system (New("/")).
	netlink func() ([]nlDevice, error)
}

// nlDevice is what netlink says about a device that sysfs cannot.
type nlDevice struct {
	name     string
	driverID uint32 // 0 when unknown
}

// AccessFS is implemented by file systems that can say whether the caller
// may open a file for reading and writing (access(2) with R_OK|W_OK and the
// effective IDs). The FS made by New checks the real files; for other file
// systems given to NewFS without this method, access is not checked.
type AccessFS interface {
	fs.FS
	AccessReadWrite(name string) error
}

// New returns an FS for the system whose root directory is root: sysfs is
// read from root/sys and character devices are looked for in
// root/dev/infiniband. New("/") is the running system; it also asks the
// kernel over netlink for the device order and driver IDs, as rdma-core
// does. Any other root is a copy of a system (e.g. a recorded tree) and is
// read from files alone. An empty root means "/".
func New(root string) *FS {
	if root == "" {
		root = "/"
	}
	f := &FS{fsys: newOSFS(root), cdevRoot: strings.TrimSuffix(root, "/")}
	if path.Clean(root) == "/" {
		f.netlink = liveNetlink
	}
	return f
}

// NewFS returns an FS that reads a system's files from fsys, whose root
// holds "sys/..." and "dev/...". Symbolic links matter in sysfs: fsys should
// implement fs.ReadLinkFS (os.DirFS does) and follow links when opening, as
// a real file system does. Uverbs.CharDev paths are given as on that system
// ("/dev/infiniband/uverbs0"). Package sysfstest loads recorded trees for
// NewFS.
func NewFS(fsys fs.FS) *FS { return &FS{fsys: fsys} }

// readAttr reads a sysfs attribute file and removes its trailing newline.
func (f *FS) readAttr(name string) (string, error) {
	file, err := f.fsys.Open(name)
	if err != nil {
		return "", err
	}
	defer file.Close()
	b, err := io.ReadAll(io.LimitReader(file, maxAttrSize+1))
	if err != nil {
		return "", &fs.PathError{Op: "read", Path: name, Err: unwrapPathErr(err)}
	}
	if len(b) > maxAttrSize {
		return "", &ParseError{File: name, Text: string(b[:80]), Want: fmt.Sprintf("at most %d bytes", maxAttrSize)}
	}
	return trimNL(string(b)), nil
}

func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// readOptional reads an attribute that drivers may leave out; a missing file
// gives "" and no error.
func (f *FS) readOptional(name string) (string, error) {
	s, err := f.readAttr(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return s, err
}

// readParsed reads an attribute and parses it, naming the file in errors.
func readParsed[T any](f *FS, name string, parse func(string) (T, error)) (T, error) {
	s, err := f.readAttr(name)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := parse(s)
	return v, inFile(err, name)
}

// validName reports whether name can be a device name: one path element.
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

// Devices returns the devices a verbs program can open: those of
// AllDevices whose Problem is nil. The order is rdma-core's (see
// AllDevices), so ibv_devinfo lists the same devices in the same order,
// provided rdma-core has a provider for each.
func (f *FS) Devices() ([]Device, error) {
	all, err := f.AllDevices()
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(d Device) bool { return d.Problem != nil }), nil
}

// AllDevices returns every RDMA device in sysfs, usable or not; each has
// Problem set to why it cannot be used, or nil.
//
// The order is rdma-core's ibv_get_device_list order: the kernel's device
// index, as the netlink device dump returns it (rdma-core's list handling
// reverses that list twice, so it keeps the kernel's order). Without
// netlink (an FS other than New("/"), or a kernel without RDMA netlink)
// devices are ordered by their uverbs device number, which follows
// registration order like the index unless devices were removed and added
// again; devices without uverbs come last, by name. rdma-core's own sysfs
// fallback uses the raw directory order of /sys/class/infiniband_verbs,
// which is kernfs's hash order and not worth imitating.
//
// A system without RDMA (no /sys/class/infiniband) has no devices and no
// error.
func (f *FS) AllDevices() ([]Device, error) {
	entries, err := fs.ReadDir(f.fsys, ibClassDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sysfs: list RDMA devices: %w", err)
	}
	ctx := f.newScan()
	var devs []Device
	for _, e := range entries {
		if !validName(e.Name()) {
			continue
		}
		devs = append(devs, f.readDevice(e.Name(), ctx))
	}
	ctx.sort(devs)
	return devs, nil
}

// Device returns the device called name, usable or not. A name that is not
// an RDMA device gives an error matching ErrNoDevice and fs.ErrNotExist.
func (f *FS) Device(name string) (Device, error) {
	if err := f.checkDevice(name); err != nil {
		return Device{}, err
	}
	return f.readDevice(name, f.newScan()), nil
}

func (f *FS) checkDevice(name string) error {
	if !validName(name) {
		return fmt.Errorf("sysfs: RDMA device %q: %w (%w)", name, ErrNoDevice, fs.ErrNotExist)
	}
	if _, err := fs.Stat(f.fsys, path.Join(ibClassDir, name)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("sysfs: RDMA device %q: %w (%w)", name, ErrNoDevice, err)
		}
		return fmt.Errorf("sysfs: RDMA device %q: %w", name, err)
	}
	return nil
}

// scan holds what one enumeration reads once for all devices.
type scan struct {
	uverbs   map[string]string // ib device name -> "uverbsN"
	classABI error             // nil if the class ABI is in range
	nl       []nlDevice        // nil without netlink
	nlErr    error
}

func (f *FS) newScan() *scan {
	s := &scan{uverbs: f.uverbsByDevice(), classABI: f.checkClassABI()}
	if f.netlink != nil {
		s.nl, s.nlErr = f.netlink()
	}
	return s
}

// uverbsByDevice maps device names to their uverbs class entries, reading
// each uverbsN/ibdev as rdma-core's find_sysfs_devs does. Entries that
// cannot be read are skipped, as there.
func (f *FS) uverbsByDevice() map[string]string {
	m := map[string]string{}
	entries, err := fs.ReadDir(f.fsys, uverbsClassDir)
	if err != nil {
		return m
	}
	// Lowest number first, so that if two entries claimed one device the
	// choice would not depend on directory order.
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return compareNumbered(a.Name(), b.Name()) })
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "uverbs") || !validName(name) {
			continue // abi_version, or something new
		}
		ibdev, err := f.readAttr(path.Join(uverbsClassDir, name, "ibdev"))
		if err != nil || !validName(ibdev) {
			continue
		}
		if _, dup := m[ibdev]; !dup {
			m[ibdev] = name
		}
	}
	return m
}

// checkClassABI checks the class-wide uverbs ABI as rdma-core's
// check_abi_version does.
func (f *FS) checkClassABI() error {
	file := path.Join(uverbsClassDir, "abi_version")
	s, err := f.readAttr(file)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrABIVersion, err)
	}
	v, err := parseDec(s, 31, "a decimal ABI version")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrABIVersion, inFile(err, file))
	}
	if v < MinUverbsABI || v > MaxUverbsABI {
		return fmt.Errorf("%w: %s says %d, want %d..%d", ErrABIVersion, file, v, MinUverbsABI, MaxUverbsABI)
	}
	return nil
}

func (s *scan) sort(devs []Device) {
	rank := map[string]int{}
	for i, d := range s.nl {
		rank[d.name] = i
	}
	slices.SortStableFunc(devs, func(a, b Device) int {
		ra, oka := rank[a.Name]
		rb, okb := rank[b.Name]
		switch {
		case oka && okb:
			return ra - rb
		case oka != okb: // devices netlink knows first
			if oka {
				return -1
			}
			return 1
		}
		ua, ub := a.Uverbs.Name != "", b.Uverbs.Name != ""
		switch {
		case ua && ub:
			return compareNumbered(a.Uverbs.Name, b.Uverbs.Name)
		case ua != ub:
			if ua {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// compareNumbered orders names like "uverbs2" < "uverbs10" by their
// trailing number, then by name.
func compareNumbered(a, b string) int {
	na, pa := trailingNumber(a)
	nb, pb := trailingNumber(b)
	if pa == pb && na >= 0 && nb >= 0 && na != nb {
		if na < nb {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

func trailingNumber(s string) (int, string) {
	i := len(s)
	for i > 0 && '0' <= s[i-1] && s[i-1] <= '9' {
		i--
	}
	n, err := strconv.Atoi(s[i:])
	if err != nil {
		return -1, s
	}
	return n, s[:i]
}

// sortedIndices returns the numeric entries of a directory (ports, gids,
// pkeys) in ascending order. A missing directory gives none and no error.
func (f *FS) sortedIndices(dir string) ([]int, error) {
	entries, err := fs.ReadDir(f.fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var idx []int
	for _, e := range entries {
		n, err := strconv.ParseUint(e.Name(), 10, 31)
		if err != nil {
			continue // not a table entry
		}
		idx = append(idx, int(n))
	}
	slices.Sort(idx)
	return idx, nil
}

// charDevNum returns the device number of a character device file, from
// the fs.FileInfo's Sys (a *syscall.Stat_t for real files and recorded
// trees alike).
func charDevNum(fi fs.FileInfo) (DevNum, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return DevNum{}, false
	}
	return devNumOf(st), true
}
