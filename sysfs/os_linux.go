package sysfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/rdmanl"
)

// osFS is the real file system under a root, with access checks.
type osFS struct {
	fs.FS
	root string
}

func newOSFS(root string) fs.FS { return osFS{FS: os.DirFS(root), root: root} }

// Stat, ReadDir, ReadLink and Lstat pass through to the DirFS; Stat matters
// most: without it fs.Stat would open the file, and opening a uverbs
// character device has effects in the kernel.
func (o osFS) Stat(name string) (fs.FileInfo, error)      { return fs.Stat(o.FS, name) }
func (o osFS) ReadDir(name string) ([]fs.DirEntry, error) { return fs.ReadDir(o.FS, name) }
func (o osFS) ReadLink(name string) (string, error)       { return fs.ReadLink(o.FS, name) }
func (o osFS) Lstat(name string) (fs.FileInfo, error)     { return fs.Lstat(o.FS, name) }

// AccessReadWrite checks, with the effective IDs, that name could be opened
// O_RDWR, without opening it: opening a uverbs device has effects in the
// kernel.
func (o osFS) AccessReadWrite(name string) error {
	p := filepath.Join(o.root, filepath.FromSlash(name))
	if err := unix.Faccessat(unix.AT_FDCWD, p, unix.R_OK|unix.W_OK, unix.AT_EACCESS); err != nil {
		return &fs.PathError{Op: "access", Path: p, Err: err}
	}
	return nil
}

func devNumOf(st *syscall.Stat_t) DevNum {
	return DevNum{Major: unix.Major(st.Rdev), Minor: unix.Minor(st.Rdev)}
}

// liveNetlink asks the running kernel for its devices in index order and
// each one's uverbs driver ID, as rdma-core's find_sysfs_devs_nl does.
func liveNetlink() ([]nlDevice, error) {
	c, err := rdmanl.Dial()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	devs, err := c.Devices()
	if err != nil && !errors.Is(err, rdmanl.ErrDumpInterrupted) {
		return nil, err
	}
	out := make([]nlDevice, 0, len(devs))
	for _, d := range devs {
		n := nlDevice{name: d.Name}
		// Devices without uverbs answer with an error; they keep their
		// place in the order all the same.
		if cd, err := c.CharDev(d.Index, "uverbs"); err == nil {
			n.driverID = cd.DriverID
		}
		out = append(out, n)
	}
	return out, nil
}
