package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/sysfs"
	"github.com/goverbs/goverbs/uverbs"
)

// realSystem is the running machine: sysfs for the device list, uverbs to
// open devices.
type realSystem struct {
	root fs.FS // the machine's root directory, for the files sysfs does not parse
	fs   *sysfs.FS
}

func newRealSystem() system { return &realSystem{root: os.DirFS("/"), fs: sysfs.New("/")} }

// interfaceName is the name of the network interface with the index, or ""
// when there is none.
var interfaceName = func(ifindex uint32) string {
	ifi, err := net.InterfaceByIndex(int(ifindex))
	if err != nil {
		return ""
	}
	return ifi.Name
}

// Devices lists what rdma-core's ibv_get_device_list would: devices with a
// uverbs character device node and a provider, in sysfs's rdma-core order.
// Devices whose node exists but cannot be opened are listed, as rdma-core
// lists them; opening them fails later with the reason.
func (s *realSystem) Devices() ([]hca, []unusable, error) {
	if err := s.checkSubsystem(); err != nil {
		return nil, nil, err
	}
	all, err := s.fs.AllDevices()
	if err != nil {
		return nil, nil, &listError{perror: perrorText(err), err: err}
	}
	var usable []hca
	var skipped []unusable
	for _, d := range all {
		if errors.Is(d.Problem, sysfs.ErrABIVersion) {
			// rdma-core refuses the whole list when the kernel's uverbs
			// ABI is out of its range (check_abi_version: ENOSYS).
			return nil, nil, &listError{perror: perrorText(unix.ENOSYS), err: d.Problem}
		}
		if why := s.unlisted(d); why != nil {
			skipped = append(skipped, unusable{name: d.Name, reason: why, h: s.hcaOf(d)})
			continue
		}
		usable = append(usable, s.hcaOf(d))
	}
	return usable, skipped, nil
}

// checkSubsystem fails the way rdma-core's device list does when the RDMA
// core is not loaded: no RDMA netlink (so no /sys/class/infiniband) and no
// /sys/class/infiniband_verbs.
func (s *realSystem) checkSubsystem() error {
	_, errIB := fs.Stat(s.root, "sys/class/infiniband")
	_, errVerbs := fs.Stat(s.root, "sys/class/infiniband_verbs")
	if errors.Is(errIB, fs.ErrNotExist) && errors.Is(errVerbs, fs.ErrNotExist) {
		return &listError{
			perror: perrorText(unix.ENOSYS),
			err: fmt.Errorf("/sys/class/infiniband and /sys/class/infiniband_verbs are missing: the RDMA modules are not loaded "+
				"(load ib_uverbs and the device's driver, e.g. modprobe ib_uverbs rdma_rxe): %w", fs.ErrNotExist),
		}
	}
	return nil
}

// unlisted says why rdma-core would leave a device out of its list, or nil.
func (s *realSystem) unlisted(d sysfs.Device) error {
	p := d.Problem
	switch {
	case errors.Is(p, sysfs.ErrNoUverbs):
		return fmt.Errorf("%w (is ib_uverbs loaded?)", p)
	case errors.Is(p, sysfs.ErrNoCharDev) && errors.Is(p, fs.ErrNotExist):
		// rdma-core stats the node and drops the device when it is absent.
		return fmt.Errorf("%w (is /dev populated, or the device passed into the container?)", p)
	case p != nil && d.Uverbs.Name == "":
		return p
	}
	return providerProblem(d)
}

// providerProblem says why goverbs has no provider for the device, or nil:
// the same choice uverbs.Open makes.
func providerProblem(d sysfs.Device) error { return uverbs.CheckProvider(d) }

func (s *realSystem) hcaOf(d sysfs.Device) hca {
	h := hca{
		name:     d.Name,
		nodeType: int(d.NodeType),
		boardID:  readOnce(s.root, path.Join("sys/class/infiniband", d.Name, "board_id"), 256),
		info: hcaInfo{
			NodeDesc:   d.NodeDesc,
			CharDev:    d.Uverbs.CharDev,
			ABIVersion: d.Uverbs.ABIVersion,
			Driver:     d.Driver,
			Ports:      map[int]portInfo{},
		},
	}
	if d.Uverbs.Name == "" {
		h.info.ABIVersion = -1
	}
	for _, p := range d.Ports {
		pi := portInfo{GIDs: map[int]gidSysfs{}}
		for _, g := range p.GIDs {
			pi.GIDs[g.Index] = gidSysfs{Type: g.Type.String(), Netdev: g.Netdev}
			if pi.Netdev == "" {
				pi.Netdev = g.Netdev
			}
		}
		h.info.Ports[p.Num] = pi
	}
	return h
}

// readOnce is what one read() of at most size bytes returns, as rdma-core
// reads sysfs attributes; nil when the file cannot be read.
func readOnce(fsys fs.FS, name string, size int) []byte {
	f, err := fsys.Open(name)
	if err != nil {
		return nil
	}
	defer f.Close()
	buf := make([]byte, size)
	n, err := f.Read(buf)
	if err != nil && n == 0 && !errors.Is(err, io.EOF) {
		return nil
	}
	return buf[:n]
}

// Open opens the device with uverbs; GOVERBS_TRANSPORT picks the command
// path, as for every goverbs program.
func (s *realSystem) Open(h hca) (device, error) {
	c, err := uverbs.Open(h.name)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// perrorText is the strerror text of the errno in err, as perror prints
// it (glibc capitalises what Go's errno strings do not).
func perrorText(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return capitalize(errno.Error())
	}
	return err.Error()
}

func capitalize(s string) string {
	if s != "" && s[0] >= 'a' && s[0] <= 'z' {
		return string(s[0]-'a'+'A') + s[1:]
	}
	return s
}
