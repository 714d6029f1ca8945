//go:build linux

// Command record writes the RDMA part of a running system to stdout, for
// recorded test data:
//
//	record -sysfs    the sysfs and /dev/infiniband tree, as a sysfstest archive
//	record -netlink  a transcript of rdma-core's netlink queries
//
// It is meant to run inside the test VM as a static program:
//
//	CGO_ENABLED=0 go build -o /tmp/record ./sysfs/internal/record
//	bin/vmexec -kernel 6.1 -- /tmp/record -sysfs > sysfs/testdata/rxe-6.1.txtar
//
// Only what the sysfs package reads is kept, and of the GID and P_Key tables
// only the non-empty entries plus a few empty ones, to keep recordings small.
package main

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/rdmanl"
	"github.com/goverbs/goverbs/sysfs/sysfstest"
)

func main() {
	doSysfs := flag.Bool("sysfs", false, "record the sysfs tree")
	doNetlink := flag.Bool("netlink", false, "record a netlink transcript")
	root := flag.String("root", "/", "root of the system to record")
	keepEmpty := flag.Int("empty", 2, "empty GID and P_Key entries to keep per table")
	flag.Parse()
	var err error
	switch {
	case *doSysfs:
		var tree []byte
		if tree, err = recordSysfs(*root, *keepEmpty); err == nil {
			_, err = os.Stdout.Write(tree)
		}
	case *doNetlink:
		err = recordNetlink()
	default:
		err = errors.New("say -sysfs or -netlink")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "record:", err)
		os.Exit(1)
	}
}

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

type recorder struct {
	root      string
	keepEmpty int
	entries   []sysfstest.Entry
	seen      map[string]bool
}

func (r *recorder) abs(rel string) string { return filepath.Join(r.root, filepath.FromSlash(rel)) }

func (r *recorder) add(e sysfstest.Entry) {
	if r.seen[e.Name] {
		return
	}
	r.seen[e.Name] = true
	r.entries = append(r.entries, e)
}

// recordSysfs records the system under root as a sysfstest archive.
func recordSysfs(root string, keepEmpty int) ([]byte, error) {
	r := &recorder{root: root, keepEmpty: keepEmpty, seen: map[string]bool{}}
	for _, class := range []string{"sys/class/infiniband", "sys/class/infiniband_verbs"} {
		if err := r.class(class); err != nil {
			return nil, err
		}
	}
	if err := r.devNodes("dev/infiniband"); err != nil {
		return nil, err
	}
	comment := fmt.Sprintf("Recorded by sysfs/internal/record -sysfs on Linux %s.\n", kernelRelease())
	return sysfstest.Format(comment, r.entries), nil
}

// class records a class directory: its links and the device directories
// they point to.
func (r *recorder) class(dir string) error {
	entries, err := os.ReadDir(r.abs(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := path.Join(dir, e.Name())
		if e.Type()&fs.ModeSymlink == 0 {
			if e.Type().IsRegular() {
				r.file(p)
			}
			continue
		}
		target, err := r.link(p)
		if err != nil {
			return err
		}
		if err := r.walk(target); err != nil {
			return err
		}
	}
	return nil
}

// link records a symbolic link and returns where it leads, relative to the
// root.
func (r *recorder) link(p string) (string, error) {
	target, err := os.Readlink(r.abs(p))
	if err != nil {
		return "", err
	}
	r.add(sysfstest.Entry{Name: p, Kind: sysfstest.Symlink, Target: target})
	resolved, err := filepath.EvalSymlinks(r.abs(p))
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(r.root, resolved)
	if err != nil {
		return "", err
	}
	return filepath.ToSlash(rel), nil
}

// Directories and files under a device that sysfs does not read and that
// would only make recordings large or noisy.
var skipped = map[string]bool{
	"power": true, "subsystem": true, "uevent": true, "hw_counters": true,
	"counters": true, "proto_stats": true, "mr_cache": true,
}

// walk records a device directory.
func (r *recorder) walk(dir string) error {
	entries, err := os.ReadDir(r.abs(dir))
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := path.Join(dir, e.Name())
		switch {
		case skipped[e.Name()]:
		case e.Type()&fs.ModeSymlink != 0:
			target, err := r.link(p)
			if err != nil {
				continue // a dangling link is recorded, its target is not
			}
			if e.Name() == "device" {
				// The parent device: only its driver link is read.
				// A dangling driver link is still recorded: only its
				// name is read.
				if _, err := os.Lstat(r.abs(path.Join(target, "driver"))); err == nil {
					r.link(path.Join(target, "driver"))
				}
			}
		case e.IsDir() && e.Name() == "ports":
			if err := r.ports(p); err != nil {
				return err
			}
		case e.IsDir():
			if err := r.walk(p); err != nil {
				return err
			}
		case e.Type().IsRegular():
			r.file(p)
		}
	}
	return nil
}

func (r *recorder) ports(dir string) error {
	entries, err := os.ReadDir(r.abs(dir))
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := path.Join(dir, e.Name())
		if err := r.port(p); err != nil {
			return err
		}
	}
	return nil
}

// port records a port, with the GID table cut down to the non-empty
// entries and a few empty ones, and the same cut for gid_attrs.
func (r *recorder) port(dir string) error {
	entries, err := os.ReadDir(r.abs(dir))
	if err != nil {
		return err
	}
	gids := r.table(path.Join(dir, "gids"), func(s string) bool {
		return strings.Trim(s, "0:\n") == ""
	})
	for _, e := range entries {
		p := path.Join(dir, e.Name())
		switch {
		case skipped[e.Name()]:
		case e.Name() == "gids":
			r.tableFiles(p, gids)
		case e.Name() == "pkeys":
			keep := r.table(p, func(s string) bool { return strings.TrimSpace(s) == "0x0000" })
			r.tableFiles(p, keep)
		case e.Name() == "gid_attrs":
			for _, sub := range []string{"types", "ndevs"} {
				r.tableFiles(path.Join(p, sub), gids)
			}
		case e.IsDir():
			if err := r.walk(p); err != nil {
				return err
			}
		case e.Type().IsRegular():
			r.file(p)
		}
	}
	return nil
}

// table picks which entries of a numbered table to keep: all that are not
// empty, and the first keepEmpty empty ones.
func (r *recorder) table(dir string, empty func(string) bool) []int {
	entries, err := os.ReadDir(r.abs(dir))
	if err != nil {
		return nil
	}
	var idx []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			idx = append(idx, n)
		}
	}
	slices.Sort(idx)
	var keep []int
	emptyKept := 0
	for _, i := range idx {
		data, err := os.ReadFile(r.abs(path.Join(dir, strconv.Itoa(i))))
		if err == nil && empty(string(data)) {
			if emptyKept >= r.keepEmpty {
				continue
			}
			emptyKept++
		}
		keep = append(keep, i)
	}
	return keep
}

func (r *recorder) tableFiles(dir string, keep []int) {
	for _, i := range keep {
		r.file(path.Join(dir, strconv.Itoa(i)))
	}
}

// file records a regular file, or the errno reading it gives.
func (r *recorder) file(p string) {
	fi, err := os.Lstat(r.abs(p))
	if err != nil {
		return
	}
	if fi.Mode().Perm()&0o444 == 0 {
		return // write-only
	}
	data, err := os.ReadFile(r.abs(p))
	if err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			r.add(sysfstest.Entry{Name: p, Kind: sysfstest.ReadError, Errno: errno})
		}
		return
	}
	r.add(sysfstest.Entry{Name: p, Kind: sysfstest.File, Data: string(data)})
}

// devNodes records the character devices in /dev/infiniband.
func (r *recorder) devNodes(dir string) error {
	entries, err := os.ReadDir(r.abs(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := path.Join(dir, e.Name())
		fi, err := os.Lstat(r.abs(p))
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if fi.Mode()&fs.ModeCharDevice == 0 || !ok {
			continue
		}
		noAccess := unix.Faccessat(unix.AT_FDCWD, r.abs(p), unix.R_OK|unix.W_OK, unix.AT_EACCESS) != nil
		r.add(sysfstest.Entry{Name: p, Kind: sysfstest.CharDev,
			Major: unix.Major(st.Rdev), Minor: unix.Minor(st.Rdev), NoAccess: noAccess})
	}
	return nil
}

// recordNetlink asks the kernel what rdma-core's ibdev_nl.c asks and prints
// every message both ways, as a transcript for internal/rdmanl's tests:
//
//	# comment
//	> hex of a request
//	< hex of a received datagram
func recordNetlink() error {
	c, err := rdmanl.Dial()
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Printf("# Recorded by sysfs/internal/record -netlink on Linux %s.\n", kernelRelease())
	c.Record = func(sent bool, b []byte) {
		dir := "<"
		if sent {
			dir = ">"
		}
		fmt.Printf("%s %s\n", dir, hex.EncodeToString(b))
	}
	fmt.Println("# get devices")
	devs, err := c.Devices()
	if err != nil {
		return err
	}
	for _, d := range devs {
		fmt.Printf("# get chardev uverbs %s (index %d)\n", d.Name, d.Index)
		if _, err := c.CharDev(d.Index, "uverbs"); err != nil {
			return err
		}
	}
	fmt.Println("# get chardev uverbs for an index that does not exist")
	if _, err := c.CharDev(1<<20, "uverbs"); err == nil {
		return errors.New("the kernel answered for device index 1<<20")
	}
	fmt.Println("# get system")
	_, err = c.Sys()
	return err
}
