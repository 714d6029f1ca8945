package testvm

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Kernel names the harness knows, and the Debian metapackage each follows.
// Any other name that starts with "linux-image-" is used as the package.
var kernelMetapackages = map[string]string{
	"6.1":  "linux-image-amd64",
	"6.12": "linux-image-6.12-amd64",
}

// KernelNames lists the known kernel names in test order.
var KernelNames = []string{"6.1", "6.12"}

// RXEModules are the modules the guest loads, in load order: dependencies
// first (modinfo depends), and crc32_generic before rdma_rxe, which asks
// the crypto API for "crc32" only when a link is added and cannot
// autoload it without modprobe. configfs, iw_cm, ib_cm, rdma_cm and
// rdma_ucm are the connection manager: with them /dev/infiniband/rdma_cm
// exists and librdmacm's tools (and package rdmacm) work.
var RXEModules = []string{"ib_core", "ib_uverbs", "configfs", "iw_cm", "ib_cm", "rdma_cm", "rdma_ucm",
	"udp_tunnel", "ip6_udp_tunnel", "crc32_generic", "rdma_rxe", "veth"}

// ExtraModules are kept decompressed in the cache but not loaded: their BTF
// describes the mlx5 ABI.
var ExtraModules = []string{"mlx5_ib", "mlx5_core"}

// Errors of the kernel cache.
var (
	ErrUnknownKernel = errors.New("unknown kernel name")
	ErrResolve       = errors.New("cannot resolve kernel package")
	ErrKernelPackage = errors.New("unexpected kernel package contents")
)

// Kernel is a Debian kernel package unpacked in the cache.
type Kernel struct {
	Name           string // harness name, e.g. "6.12"
	Package        string // exact package, e.g. linux-image-6.12.117+deb12-amd64
	PackageVersion string // Debian version of the package, e.g. 6.12.117-1~deb12u1
	Release        string // uname -r of the kernel, e.g. 6.12.117+deb12-amd64
	Dir            string // cache directory of this package
	Root           string // the package's contents (dpkg-deb -x)
	Vmlinuz        string // the kernel image (bzImage)
	// Vmlinux is the uncompressed kernel taken out of Vmlinuz, booted
	// through its PVH entry point: that skips the real-mode setup and the
	// decompressor, which under TCG cost seconds per boot. Empty if it
	// could not be extracted; Vmlinuz is booted then.
	Vmlinux string
	Modules map[string]string // module name -> uncompressed .ko in the cache (RXEModules and ExtraModules)
}

// CacheDir returns $GOVERBS_VM_CACHE, or ~/.cache/goverbs-vm.
func CacheDir() (string, error) {
	if d := os.Getenv("GOVERBS_VM_CACHE"); d != "" {
		return filepath.Abs(d)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cache directory: set GOVERBS_VM_CACHE: %w", err)
	}
	return filepath.Join(home, ".cache", "goverbs-vm"), nil
}

// resolveTTL bounds how long a name-to-package Resolution is reused
// without asking apt again (apt-cache costs about a second per kernel, and
// every test binary boots a VM).
const resolveTTL = 12 * time.Hour

// Resolution is the exact package a kernel name stands for.
type Resolution struct {
	Package string    // e.g. linux-image-6.1.0-56-amd64
	Version string    // candidate version, e.g. 6.1.192-2
	At      time.Time // when apt was asked
}

// FetchKernel returns the named kernel, downloading and unpacking its
// package into the cache the first time. Set GOVERBS_VM_REFRESH=1 to
// re-resolve the name against apt now instead of within resolveTTL.
func FetchKernel(ctx context.Context, name string) (*Kernel, error) {
	cache, err := CacheDir()
	if err != nil {
		return nil, err
	}
	unlock, err := lockCache(cache)
	if err != nil {
		return nil, err
	}
	defer unlock()
	res, err := resolveCached(ctx, cache, name)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cache, "kernels", res.Package+"_"+res.Version)
	if k, err := loadKernelMeta(dir); err == nil {
		k.Name = name
		if k.Vmlinux == "" {
			if err := k.extractVmlinux(ctx); err != nil {
				return nil, err
			}
		}
		return k, nil
	}
	k, err := unpackKernel(ctx, cache, dir, res)
	if err != nil {
		return nil, err
	}
	k.Name = name
	return k, nil
}

// DebRoot returns the directory holding the unpacked package of the named
// kernel (boot/, lib/modules/<release>/...), fetching it if needed. Modules
// under it keep their packaged form (.ko.xz on 6.12); Kernel.Module gives an
// uncompressed copy.
func DebRoot(ctx context.Context, name string) (string, error) {
	k, err := FetchKernel(ctx, name)
	if err != nil {
		return "", err
	}
	return k.Root, nil
}

// Module returns an uncompressed copy of the named module (e.g. "mlx5_ib"),
// decompressing it into the cache if needed.
func (k *Kernel) Module(name string) (string, error) {
	if p, ok := k.Modules[name]; ok {
		return p, nil
	}
	return extractModule(k.Root, k.Release, filepath.Join(k.Dir, "modules"), name)
}

func lockCache(cache string) (func(), error) {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, fmt.Errorf("create cache: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(cache, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open cache lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock cache %s: %w", cache, err)
	}
	return func() {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

func resolveCached(ctx context.Context, cache, name string) (Resolution, error) {
	pin := filepath.Join(cache, "resolved", name+".json")
	var old Resolution
	b, readErr := os.ReadFile(pin)
	if readErr == nil && json.Unmarshal(b, &old) == nil && old.Package != "" {
		if os.Getenv("GOVERBS_VM_REFRESH") == "" && time.Since(old.At) < resolveTTL {
			return old, nil
		}
	}
	res, err := ResolveKernel(ctx, name)
	if err != nil {
		if old.Package != "" {
			// apt unusable (offline, no lists): keep the last known package.
			return old, nil
		}
		return Resolution{}, err
	}
	res.At = time.Now()
	if err := os.MkdirAll(filepath.Dir(pin), 0o755); err == nil {
		b, _ := json.Marshal(res)
		_ = writeFileAtomic(pin, b, 0o644)
	}
	return res, nil
}

// ResolveKernel maps a kernel name to the exact package apt would install
// now and its candidate version.
func ResolveKernel(ctx context.Context, name string) (Resolution, error) {
	pkg := name
	if !strings.HasPrefix(name, "linux-image-") {
		meta, ok := kernelMetapackages[name]
		if !ok {
			return Resolution{}, fmt.Errorf("%w %q (known: %s, or an exact linux-image-* package)", ErrUnknownKernel, name, strings.Join(KernelNames, ", "))
		}
		out, err := command(ctx, "", "apt-cache", "depends", meta)
		if err != nil {
			return Resolution{}, fmt.Errorf("%w %s: %w", ErrResolve, name, err)
		}
		pkg, err = parseKernelDepends(out)
		if err != nil {
			return Resolution{}, fmt.Errorf("%w %s via %s: %w", ErrResolve, name, meta, err)
		}
	}
	// A virtual name (linux-image-6.12.NN+deb12-amd64 can be provided by the
	// -unsigned package) cannot be downloaded; find its provider.
	out, err := command(ctx, "", "apt-cache", "policy", pkg)
	if err != nil {
		return Resolution{}, fmt.Errorf("%w %s: %w", ErrResolve, pkg, err)
	}
	version := parseCandidate(out)
	if version == "" {
		out, err := command(ctx, "", "apt-cache", "showpkg", pkg)
		if err != nil {
			return Resolution{}, fmt.Errorf("%w %s: %w", ErrResolve, pkg, err)
		}
		provider := parseReverseProvides(out)
		if provider == "" {
			return Resolution{}, fmt.Errorf("%w: %s has no candidate version and no provider", ErrResolve, pkg)
		}
		pkg = provider
		out, err = command(ctx, "", "apt-cache", "policy", pkg)
		if err != nil {
			return Resolution{}, fmt.Errorf("%w %s: %w", ErrResolve, pkg, err)
		}
		if version = parseCandidate(out); version == "" {
			return Resolution{}, fmt.Errorf("%w: provider %s has no candidate version", ErrResolve, pkg)
		}
	}
	return Resolution{Package: pkg, Version: version}, nil
}

// parseKernelDepends picks the kernel image out of `apt-cache depends
// <metapackage>`. A virtual dependency is printed as "<name>" followed by
// its providers, indented further; an -unsigned provider is preferred as it
// is the plain build.
func parseKernelDepends(out string) (string, error) {
	lines := strings.Split(out, "\n")
	for i, line := range lines {
		dep, ok := strings.CutPrefix(strings.TrimLeft(strings.TrimSpace(line), "|"), "Depends: ")
		if !ok || !strings.HasPrefix(strings.Trim(dep, "<>"), "linux-image-") {
			continue
		}
		if !strings.HasPrefix(dep, "<") {
			return dep, nil
		}
		var providers []string
		for _, p := range lines[i+1:] {
			if !strings.HasPrefix(p, "    ") {
				break
			}
			providers = append(providers, strings.TrimSpace(p))
		}
		sort.SliceStable(providers, func(a, b int) bool {
			return strings.HasSuffix(providers[a], "-unsigned") && !strings.HasSuffix(providers[b], "-unsigned")
		})
		for _, p := range providers {
			if strings.HasPrefix(p, "linux-image-") {
				return p, nil
			}
		}
		return "", fmt.Errorf("virtual %s has no linux-image provider", dep)
	}
	return "", fmt.Errorf("no linux-image dependency in %q", strings.TrimSpace(out))
}

// parseCandidate returns the "Candidate:" of `apt-cache policy`, or "".
func parseCandidate(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Candidate: "); ok && v != "(none)" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// parseReverseProvides returns a package listed under "Reverse Provides:"
// in `apt-cache showpkg`, preferring an -unsigned one.
func parseReverseProvides(out string) string {
	_, rest, ok := strings.Cut(out, "Reverse Provides:")
	if !ok {
		return ""
	}
	best := ""
	for _, line := range strings.Split(rest, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "linux-image-") {
			continue
		}
		if best == "" || strings.HasSuffix(f[0], "-unsigned") && !strings.HasSuffix(best, "-unsigned") {
			best = f[0]
		}
	}
	return best
}

const kernelMetaFile = "kernel.json"

func loadKernelMeta(dir string) (*Kernel, error) {
	b, err := os.ReadFile(filepath.Join(dir, kernelMetaFile))
	if err != nil {
		return nil, err
	}
	var k Kernel
	if err := json.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	for _, p := range append([]string{k.Vmlinuz}, mapValues(k.Modules)...) {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("incomplete cache entry: %w", err)
		}
	}
	// An entry unpacked before a module joined the lists is unpacked again.
	for _, m := range append(append([]string(nil), RXEModules...), ExtraModules...) {
		if _, ok := k.Modules[m]; !ok {
			return nil, fmt.Errorf("incomplete cache entry: module %s not extracted", m)
		}
	}
	return &k, nil
}

func mapValues(m map[string]string) []string {
	var v []string
	for _, p := range m {
		v = append(v, p)
	}
	return v
}

func unpackKernel(ctx context.Context, cache, dir string, res Resolution) (*Kernel, error) {
	debs := filepath.Join(cache, "debs")
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", debs, err)
	}
	deb, err := downloadDeb(ctx, debs, res.Package, res.Version)
	if err != nil {
		return nil, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("clear %s: %w", dir, err)
	}
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", root, err)
	}
	if _, err := command(ctx, "", "dpkg-deb", "-x", deb, root); err != nil {
		return nil, fmt.Errorf("unpack %s: %w", deb, err)
	}
	releases, err := os.ReadDir(filepath.Join(root, "lib", "modules"))
	if err != nil || len(releases) != 1 {
		return nil, fmt.Errorf("%w: %s: want one lib/modules/<release> (%v)", ErrKernelPackage, deb, err)
	}
	release := releases[0].Name()
	k := &Kernel{
		Package:        res.Package,
		PackageVersion: res.Version,
		Release:        release,
		Dir:            dir,
		Root:           root,
		Vmlinuz:        filepath.Join(root, "boot", "vmlinuz-"+release),
		Modules:        map[string]string{},
	}
	if _, err := os.Stat(k.Vmlinuz); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKernelPackage, err)
	}
	for _, m := range append(append([]string(nil), RXEModules...), ExtraModules...) {
		p, err := extractModule(root, release, filepath.Join(dir, "modules"), m)
		if err != nil {
			return nil, err
		}
		k.Modules[m] = p
	}
	if err := k.extractVmlinux(ctx); err != nil {
		return nil, err
	}
	return k, nil
}

// extractVmlinux fills k.Vmlinux if the image has a PVH entry point, and
// records the kernel in the cache.
func (k *Kernel) extractVmlinux(ctx context.Context) error {
	out := filepath.Join(k.Dir, "vmlinux")
	if err := ExtractVmlinux(ctx, k.Vmlinuz, out); err == nil {
		k.Vmlinux = out
	} else {
		// Not fatal: the bzImage boots too, only slower. Remember the
		// failure so it is not retried on every run.
		k.Vmlinux = ""
		_ = os.WriteFile(filepath.Join(k.Dir, "vmlinux.err"), []byte(err.Error()+"\n"), 0o644)
	}
	b, _ := json.MarshalIndent(k, "", "\t")
	return writeFileAtomic(filepath.Join(k.Dir, kernelMetaFile), b, 0o644)
}

// ErrNoPVH reports a kernel image that cannot be booted through PVH.
var ErrNoPVH = errors.New("no PVH-bootable vmlinux in the image")

// Compressed payload formats of a bzImage: magic, host decompressor, and
// whether the kernel build appended the 4-byte uncompressed size (which
// the tools reject as trailing garbage).
var payloadFormats = []struct {
	magic      string
	tool       []string
	sizeSuffix bool
}{
	{"\xfd7zXZ\x00", []string{"xz", "-dc"}, true},
	{"\x28\xb5\x2f\xfd", []string{"zstd", "-dc"}, true},
	{"\x1f\x8b", []string{"gzip", "-dc"}, false},
	{"\x02\x21\x4c\x18", []string{"lz4", "-dc"}, true},
}

// ExtractVmlinux writes the uncompressed kernel of the bzImage vmlinuz to
// out, if it is an ELF image with a PVH entry note. The payload is found
// through the boot protocol header (payload_offset and payload_length,
// protocol 2.08 and later).
func ExtractVmlinux(ctx context.Context, vmlinuz, out string) error {
	b, err := os.ReadFile(vmlinuz)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoPVH, err)
	}
	payload, err := bzImagePayload(b)
	if err != nil {
		return err
	}
	for _, f := range payloadFormats {
		if !bytes.HasPrefix(payload, []byte(f.magic)) {
			continue
		}
		if f.sizeSuffix && len(payload) > 4 {
			payload = payload[:len(payload)-4]
		}
		cmd := exec.CommandContext(ctx, f.tool[0], f.tool[1:]...)
		cmd.Stdin = bytes.NewReader(payload)
		elfData, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrNoPVH, strings.Join(f.tool, " "), exitDetail(err))
		}
		if err := checkPVH(elfData); err != nil {
			return err
		}
		return writeFileAtomic(out, elfData, 0o644)
	}
	return fmt.Errorf("%w: unknown payload compression % x", ErrNoPVH, payload[:min(len(payload), 6)])
}

func bzImagePayload(b []byte) ([]byte, error) {
	if len(b) < 0x250 || string(b[0x202:0x206]) != "HdrS" {
		return nil, fmt.Errorf("%w: not a bzImage", ErrNoPVH)
	}
	if version := binary.LittleEndian.Uint16(b[0x206:]); version < 0x208 {
		return nil, fmt.Errorf("%w: boot protocol %#x has no payload fields", ErrNoPVH, version)
	}
	setupSects := int(b[0x1f1])
	if setupSects == 0 {
		setupSects = 4
	}
	off := (setupSects+1)*512 + int(binary.LittleEndian.Uint32(b[0x248:]))
	n := int(binary.LittleEndian.Uint32(b[0x24c:]))
	if off < 0 || n <= 0 || off+n > len(b) {
		return nil, fmt.Errorf("%w: payload %d+%d outside the %d-byte image", ErrNoPVH, off, n, len(b))
	}
	return b[off : off+n], nil
}

// checkPVH accepts an x86-64 ELF image with a XEN_ELFNOTE_PHYS32_ENTRY
// note, the entry QEMU's PVH loader needs.
func checkPVH(data []byte) error {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoPVH, err)
	}
	defer f.Close()
	const xenElfnotePhys32Entry = 18
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		notes, err := io.ReadAll(p.Open())
		if err != nil {
			return fmt.Errorf("%w: %w", ErrNoPVH, err)
		}
		for len(notes) >= 12 {
			namesz := int(binary.LittleEndian.Uint32(notes))
			descsz := int(binary.LittleEndian.Uint32(notes[4:]))
			typ := binary.LittleEndian.Uint32(notes[8:])
			name := notes[12:min(len(notes), 12+namesz)]
			if typ == xenElfnotePhys32Entry && bytes.HasPrefix(name, []byte("Xen")) {
				return nil
			}
			next := 12 + align4(namesz) + align4(descsz)
			if next > len(notes) {
				break
			}
			notes = notes[next:]
		}
	}
	return fmt.Errorf("%w: no XEN_ELFNOTE_PHYS32_ENTRY note", ErrNoPVH)
}

func align4(n int) int { return (n + 3) &^ 3 }

// downloadDeb fetches pkg=version into dir unless it is there already.
func downloadDeb(ctx context.Context, dir, pkg, version string) (string, error) {
	// apt names the file pkg_version_arch.deb with ':' of an epoch as %3a.
	prefix := pkg + "_" + strings.ReplaceAll(version, ":", "%3a") + "_"
	find := func() string {
		m, _ := filepath.Glob(filepath.Join(dir, globEscape(prefix)+"*.deb"))
		if len(m) > 0 {
			return m[0]
		}
		return ""
	}
	if p := find(); p != "" {
		return p, nil
	}
	tmp, err := os.MkdirTemp(dir, "download-")
	if err != nil {
		return "", fmt.Errorf("download %s: %w", pkg, err)
	}
	defer os.RemoveAll(tmp)
	if _, err := command(ctx, tmp, "apt-get", "download", pkg+"="+version); err != nil {
		return "", fmt.Errorf("download %s=%s: %w", pkg, version, err)
	}
	got, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(got) != 1 {
		return "", fmt.Errorf("download %s=%s: got %d files", pkg, version, len(got))
	}
	dst := filepath.Join(dir, filepath.Base(got[0]))
	if err := os.Rename(got[0], dst); err != nil {
		return "", fmt.Errorf("download %s: %w", pkg, err)
	}
	return dst, nil
}

func globEscape(s string) string {
	r := strings.NewReplacer(`*`, `\*`, `?`, `\?`, `[`, `\[`, `\`, `\\`)
	return r.Replace(s)
}

// extractModule finds name.ko or name.ko.xz under the package's modules
// and leaves an uncompressed copy in dst (the guest's finit_module gets no
// decompression flag, and BTF readers want plain ELF).
func extractModule(root, release, dst, name string) (string, error) {
	modRoot := filepath.Join(root, "lib", "modules", release)
	var found string
	err := filepath.WalkDir(modRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		base := d.Name()
		if base == name+".ko" || base == name+".ko.xz" {
			found = p
			return fs.SkipAll
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("search module %s: %w", name, err)
	}
	if found == "" {
		return "", fmt.Errorf("%w: no module %s under %s", ErrKernelPackage, name, modRoot)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", dst, err)
	}
	out := filepath.Join(dst, name+".ko")
	var data []byte
	if strings.HasSuffix(found, ".xz") {
		data, err = exec.Command("xz", "-dc", found).Output()
		if err != nil {
			return "", fmt.Errorf("decompress %s: %w", found, exitDetail(err))
		}
	} else if data, err = os.ReadFile(found); err != nil {
		return "", fmt.Errorf("read module: %w", err)
	}
	if !bytes.HasPrefix(data, []byte("\x7fELF")) {
		return "", fmt.Errorf("%w: %s is not an ELF object", ErrKernelPackage, found)
	}
	if err := writeFileAtomic(out, data, 0o644); err != nil {
		return "", err
	}
	return out, nil
}

func writeFileAtomic(path string, data []byte, perm fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// command runs a host tool and returns its stdout; the error carries its
// stderr.
func command(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), exitDetail(err))
	}
	return string(out), nil
}

// exitDetail adds a failed command's stderr to its error.
func exitDetail(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(lastLines(string(ee.Stderr), 5)))
	}
	return err
}

func lastLines(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
