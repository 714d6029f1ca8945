package testvm

import (
	"bufio"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// GuestTools are the host programs copied into every VM, with their shared
// libraries: rdma-core's reference tools and perftest (to compare goverbs
// against), librdmacm's example tools (rping, ucmatose, udaddy, mckey,
// rdma_server/rdma_client, cmtime, rstream, riostream), and iproute2's ip
// and rdma, which the guest init uses.
var GuestTools = []string{
	"ibv_devinfo", "ibv_devices",
	"ibv_rc_pingpong", "ibv_uc_pingpong", "ibv_ud_pingpong", "ibv_srq_pingpong",
	"ib_write_lat", "ib_write_bw", "ib_read_lat", "ib_read_bw",
	"ib_send_lat", "ib_send_bw", "ib_atomic_lat", "ib_atomic_bw",
	"rping", "ucmatose", "udaddy", "mckey", "rdma_server", "rdma_client", "cmtime",
	"rstream", "riostream",
	"ip", "rdma",
}

// guestDlopenLibs are libraries the guest tools load with dlopen, which ldd
// does not list: glibc's pthread_exit (rping's threads) loads libgcc_s.
var guestDlopenLibs = []string{"/usr/lib/x86_64-linux-gnu/libgcc_s.so.1"}

// Host files of the rxe userspace provider. Only rxe's driver file goes in,
// so libibverbs does not warn about the other providers' missing libraries.
const (
	rxeProviderLib    = "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so"
	rxeProviderDriver = "/etc/libibverbs.d/rxe.driver"
	busyboxDir        = "/usr/libexec/busybox" // applet links, last in PATH
)

// GuestPATH is the PATH of programs in the VM: the real tools first, then
// busybox's applets.
const GuestPATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:" + busyboxDir

// ErrMissingTool reports a host program or library the initramfs needs
// that is not installed (make deps installs them).
var ErrMissingTool = errors.New("missing host tool")

// baseFormat changes whenever the layout of the base archive does, so old
// cached ones are rebuilt.
const baseFormat = 3

type fileStamp struct {
	Path  string
	Size  int64
	MTime int64
}

// baseManifest describes a cached base archive: what it was built from
// (checked by stat before reuse) and what it holds (so the per-run archive
// does not repeat it).
type baseManifest struct {
	Format  int
	Vmlinuz string
	Inputs  []fileStamp
	Entries map[string]byte // name -> 'd' dir, 'f' file, 'l' symlink
	Modules []string        // guest paths, load order
}

// ensureBase returns the per-kernel base archive, building it if missing or
// if any input changed.
func ensureBase(ctx context.Context, k *Kernel) (string, *baseManifest, error) {
	cache, err := CacheDir()
	if err != nil {
		return "", nil, err
	}
	archive := filepath.Join(k.Dir, "base.cpio")
	manifestPath := filepath.Join(k.Dir, "base.json")
	if m, err := loadManifest(manifestPath, k); err == nil {
		if _, err := os.Stat(archive); err == nil {
			return archive, m, nil
		}
	}
	unlock, err := lockCache(cache)
	if err != nil {
		return "", nil, err
	}
	defer unlock()
	if m, err := loadManifest(manifestPath, k); err == nil { // built while we waited
		if _, err := os.Stat(archive); err == nil {
			return archive, m, nil
		}
	}
	m, err := buildBase(ctx, k, archive)
	if err != nil {
		return "", nil, err
	}
	b, _ := json.Marshal(m)
	if err := writeFileAtomic(manifestPath, b, 0o644); err != nil {
		return "", nil, err
	}
	return archive, m, nil
}

func loadManifest(p string, k *Kernel) (*baseManifest, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var m baseManifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if m.Format != baseFormat || m.Vmlinuz != k.Vmlinuz {
		return nil, errors.New("stale base manifest")
	}
	for _, in := range m.Inputs {
		st, err := stamp(in.Path)
		if err != nil || st != in {
			return nil, errors.New("base input changed")
		}
	}
	return &m, nil
}

func stamp(p string) (fileStamp, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{Path: p, Size: fi.Size(), MTime: fi.ModTime().UnixNano()}, nil
}

func buildBase(ctx context.Context, k *Kernel, archive string) (*baseManifest, error) {
	f, err := os.CreateTemp(filepath.Dir(archive), ".base-*.cpio")
	if err != nil {
		return nil, fmt.Errorf("build base initramfs: %w", err)
	}
	defer os.Remove(f.Name())
	t := newTree(NewCPIOWriter(f), nil)
	m := &baseManifest{Format: baseFormat, Vmlinuz: k.Vmlinuz}

	for _, d := range []struct {
		name string
		perm fs.FileMode
	}{
		{"dev", 0o755}, {"proc", 0o555}, {"sys", 0o555}, {"run", 0o755}, {"root", 0o700},
		{"tmp", 0o777 | fs.ModeSticky}, {"var", 0o755}, {"var/tmp", 0o777 | fs.ModeSticky},
		{"etc", 0o755}, {"etc/goverbs", 0o755}, {"mnt", 0o755},
	} {
		if err := t.dir(d.name, d.perm); err != nil {
			return nil, err
		}
	}
	// The kernel opens /dev/console for init's stdio before init can mount
	// devtmpfs; without the node init starts with no stdout at all.
	if err := t.cw.CharDev("dev/console", 0o600, 5, 1); err != nil {
		return nil, err
	}
	if err := t.cw.CharDev("dev/null", 0o666, 1, 3); err != nil {
		return nil, err
	}
	for name, data := range map[string]string{
		"etc/passwd":   "root:x:0:0:root:/root:/bin/sh\n",
		"etc/group":    "root:x:0:\n",
		"etc/hosts":    "127.0.0.1\tlocalhost\n::1\tlocalhost\n",
		"etc/hostname": "goverbs-vm\n",
	} {
		if err := t.bytes(name, 0o644, []byte(data)); err != nil {
			return nil, err
		}
	}

	var inputs []string
	for _, tool := range GuestTools {
		p, err := lookHostTool(tool)
		if err != nil {
			return nil, err
		}
		inputs = append(inputs, p)
	}
	inputs = append(inputs, rxeProviderLib, rxeProviderDriver)
	inputs = append(inputs, guestDlopenLibs...)
	busybox, err := lookHostTool("busybox")
	if err != nil {
		return nil, err
	}
	libs, err := sharedLibs(ctx, inputs)
	if err != nil {
		return nil, err
	}
	inputs = append(append(inputs, libs...), busybox)
	for _, p := range inputs {
		if err := t.hostPath(p); err != nil {
			return nil, err
		}
	}

	// busybox applets go in a directory of their own, last in PATH, so they
	// never shadow the real ip (busybox has an ip applet too).
	applets, err := command(ctx, "", busybox, "--list")
	if err != nil {
		return nil, fmt.Errorf("list busybox applets: %w", err)
	}
	if err := t.mkdirAll(strings.TrimPrefix(busyboxDir, "/")); err != nil {
		return nil, err
	}
	for _, a := range strings.Fields(applets) {
		if a == "busybox" || strings.Contains(a, "/") {
			continue
		}
		if err := t.symlink(path.Join(strings.TrimPrefix(busyboxDir, "/"), a), busybox); err != nil {
			return nil, err
		}
	}

	// Modules go to /usr/lib/modules/<release>, flat, loaded by path.
	modDir := path.Join("usr/lib/modules", k.Release)
	if err := t.mkdirAll(modDir); err != nil {
		return nil, err
	}
	for _, name := range RXEModules {
		src, ok := k.Modules[name]
		if !ok {
			return nil, fmt.Errorf("%w: module %s not extracted", ErrKernelPackage, name)
		}
		dst := path.Join(modDir, name+".ko")
		if err := t.copyFile(dst, src, 0o644); err != nil {
			return nil, err
		}
		inputs = append(inputs, src)
		m.Modules = append(m.Modules, "/"+dst)
	}
	if err := t.cw.Close(); err != nil {
		return nil, err
	}
	if err := f.Chmod(0o644); err != nil {
		return nil, fmt.Errorf("build base initramfs: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("build base initramfs: %w", err)
	}
	for _, p := range inputs {
		st, err := stamp(p)
		if err != nil {
			return nil, fmt.Errorf("build base initramfs: %w", err)
		}
		m.Inputs = append(m.Inputs, st)
	}
	m.Entries = t.entries
	if err := os.Rename(f.Name(), archive); err != nil {
		return nil, fmt.Errorf("build base initramfs: %w", err)
	}
	return m, nil
}

func lookHostTool(name string) (string, error) {
	for _, dir := range []string{"/usr/sbin", "/usr/bin", "/sbin", "/bin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %s (run make deps)", ErrMissingTool, name)
}

// isDynamicELF reports whether p is an ELF object that needs the dynamic
// loader or shared libraries (Go binaries built with CGO_ENABLED=0 do not).
func isDynamicELF(p string) (bool, error) {
	f, err := elf.Open(p)
	if err != nil {
		var fe *elf.FormatError
		if errors.As(err, &fe) || errors.Is(err, io.EOF) {
			return false, nil // not ELF: a script, data
		}
		return false, err
	}
	defer f.Close()
	for _, ph := range f.Progs {
		if ph.Type == elf.PT_INTERP || ph.Type == elf.PT_DYNAMIC {
			return true, nil
		}
	}
	return false, nil
}

// sharedLibs returns the ldd closure of the dynamic ELF files among paths
// (the dynamic loader included), sorted.
func sharedLibs(ctx context.Context, paths []string) ([]string, error) {
	var dyn []string
	for _, p := range paths {
		ok, err := isDynamicELF(p)
		if err != nil {
			return nil, fmt.Errorf("inspect %s: %w", p, err)
		}
		if ok {
			dyn = append(dyn, p)
		}
	}
	if len(dyn) == 0 {
		return nil, nil
	}
	out, err := command(ctx, "", "ldd", dyn...)
	if err != nil {
		return nil, fmt.Errorf("%w: shared libraries: %w", ErrMissingTool, err)
	}
	return parseLdd(out)
}

// parseLdd extracts library paths from ldd output, which has lines like
// "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)",
// "/lib64/ld-linux-x86-64.so.2 (0x...)", "linux-vdso.so.1 (0x...)" and, for
// several files, "file:" headers.
func parseLdd(out string) ([]string, error) {
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || !strings.HasPrefix(sc.Text(), "\t") {
			continue // blank or a "file:" header
		}
		if _, after, ok := strings.Cut(line, "=>"); ok {
			f := strings.Fields(after)
			if len(f) == 0 || f[0] == "not" {
				return nil, fmt.Errorf("%w: library not found: %s", ErrMissingTool, line)
			}
			if strings.HasPrefix(f[0], "/") {
				seen[f[0]] = true
			}
			continue
		}
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "/") {
			seen[f[0]] = true
		}
	}
	var libs []string
	for p := range seen {
		libs = append(libs, p)
	}
	sort.Strings(libs)
	return libs, nil
}

// tree adds paths to a cpio archive like a filesystem would hold them:
// parents before children, each name once, host symlinks kept as symlinks.
// Names present in an earlier archive (prior) are not repeated.
type tree struct {
	cw      *CPIOWriter
	entries map[string]byte
	links   map[string]string // targets of this archive's symlinks
	prior   map[string]byte
}

func newTree(cw *CPIOWriter, prior map[string]byte) *tree {
	return &tree{cw: cw, entries: map[string]byte{}, links: map[string]string{}, prior: prior}
}

func (t *tree) kind(name string) (byte, bool) {
	if k, ok := t.entries[name]; ok {
		return k, true
	}
	k, ok := t.prior[name]
	return k, ok
}

// resolve rewrites name so that no parent component is a symlink already
// in the archive (a directory entry under a symlink's name would clash).
func (t *tree) resolve(name string) string {
	parts := strings.Split(name, "/")
	for i := 1; i < len(parts); i++ {
		prefix := strings.Join(parts[:i], "/")
		if k, _ := t.kind(prefix); k == 'l' {
			target := t.linkTarget(prefix)
			if target == "" {
				continue
			}
			var base string
			if strings.HasPrefix(target, "/") {
				base = strings.TrimPrefix(path.Clean(target), "/")
			} else {
				base = path.Join(path.Dir(prefix), target)
			}
			return t.resolve(path.Join(base, strings.Join(parts[i:], "/")))
		}
	}
	return name
}

// linkTarget returns the target of a symlink of the archive. The prior
// archive's links are copies of the host's, so for those the host is asked.
func (t *tree) linkTarget(name string) string {
	if target, ok := t.links[name]; ok {
		return target
	}
	target, err := os.Readlink("/" + name)
	if err != nil {
		return ""
	}
	return target
}

func (t *tree) mkdirAll(name string) error {
	name = t.resolve(strings.Trim(path.Clean("/"+name), "/"))
	if name == "" {
		return nil
	}
	if err := t.mkdirAll(path.Dir(name)); err != nil {
		return err
	}
	if _, ok := t.kind(name); ok {
		return nil
	}
	return t.dir(name, 0o755)
}

func (t *tree) dir(name string, perm fs.FileMode) error {
	if _, ok := t.kind(name); ok {
		return nil
	}
	t.entries[name] = 'd'
	return t.cw.Dir(name, perm)
}

func (t *tree) bytes(name string, perm fs.FileMode, data []byte) error {
	if err := t.mkdirAll(path.Dir(name)); err != nil {
		return err
	}
	t.entries[name] = 'f'
	return t.cw.Bytes(name, perm, data)
}

func (t *tree) symlink(name, target string) error {
	if _, ok := t.kind(name); ok {
		return nil
	}
	t.entries[name] = 'l'
	t.links[name] = target
	return t.cw.Symlink(name, target)
}

// copyFile adds the host file src (symlinks followed) as name.
func (t *tree) copyFile(name, src string, perm fs.FileMode) error {
	name = t.resolve(name)
	if err := t.mkdirAll(path.Dir(name)); err != nil {
		return err
	}
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	if perm == 0 {
		perm = fi.Mode().Perm()
	}
	t.entries[name] = 'f'
	return t.cw.File(name, perm, fi.ModTime().Unix(), fi.Size(), f)
}

// hostPath adds the absolute host path p at the same place in the guest,
// reproducing every symlink on the way (/lib -> usr/lib, libfoo.so.1 ->
// libfoo.so.1.2.3) so that the loader finds libraries under the names it
// was linked with. A directory is added with everything below it.
func (t *tree) hostPath(p string) error { return t.hostPathMode(p, true) }

// hostDirChain creates the host directory p in the guest, and the symlinks
// and directories on the way to it, but none of its contents.
func (t *tree) hostDirChain(p string) error { return t.hostPathMode(p, false) }

func (t *tree) hostPathMode(p string, contents bool) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("initramfs: %q is not absolute", p)
	}
	parts := strings.Split(strings.Trim(filepath.Clean(p), "/"), "/")
	for i := range parts {
		host := "/" + strings.Join(parts[:i+1], "/")
		name := strings.Join(parts[:i+1], "/")
		fi, err := os.Lstat(host)
		if err != nil {
			return fmt.Errorf("initramfs: %w", err)
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(host)
			if err != nil {
				return fmt.Errorf("initramfs: %w", err)
			}
			if err := t.symlink(name, target); err != nil {
				return err
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(host), target)
			}
			return t.hostPathMode(filepath.Join(append([]string{target}, parts[i+1:]...)...), contents)
		case fi.IsDir() && (i < len(parts)-1 || !contents):
			if k, ok := t.kind(name); ok && k == 'd' {
				continue
			}
			if err := t.dir(name, fi.Mode().Perm()|fi.Mode()&fs.ModeSticky); err != nil {
				return err
			}
		case fi.IsDir():
			return t.hostDir(host, name)
		case fi.Mode().IsRegular():
			if k, ok := t.kind(name); ok && k == 'f' {
				return nil
			}
			return t.copyFile(name, host, 0)
		default:
			return fmt.Errorf("initramfs: %s is neither file, directory nor symlink", host)
		}
	}
	return nil
}

// hostDir adds the host directory dir as name, recursively; symlinks
// inside it are kept as they are (not followed).
func (t *tree) hostDir(dir, name string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("initramfs: %w", err)
		}
		rel, _ := filepath.Rel(dir, p)
		guest := path.Join(name, filepath.ToSlash(rel))
		fi, err := d.Info()
		if err != nil {
			return fmt.Errorf("initramfs: %w", err)
		}
		switch {
		case d.IsDir():
			if err := t.mkdirAll(path.Dir(guest)); err != nil {
				return err
			}
			return t.dir(guest, fi.Mode().Perm())
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return fmt.Errorf("initramfs: %w", err)
			}
			return t.symlink(guest, target)
		case d.Type().IsRegular():
			return t.copyFile(guest, p, fi.Mode().Perm())
		}
		return nil // sockets, devices: nothing a test needs
	})
}

// dirSize sums the sizes of the regular files under dir, stopping once the
// sum passes limit.
func dirSize(dir string, limit int64) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			total += fi.Size()
			if total > limit {
				return fs.SkipAll
			}
		}
		return nil
	})
	return total, err
}

// guestLibs returns the shared libraries a host program needs that the base
// archive does not already hold.
func guestLibs(ctx context.Context, prog string) ([]string, error) {
	ok, err := isDynamicELF(prog)
	if err != nil || !ok {
		return nil, err
	}
	if _, err := exec.LookPath("ldd"); err != nil {
		return nil, fmt.Errorf("%w: ldd, for the libraries of %s", ErrMissingTool, prog)
	}
	return sharedLibs(ctx, []string{prog})
}
