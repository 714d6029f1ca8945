// Command btfextract writes small standalone BTF blobs of the RDMA modules'
// UAPI types, for the offline layout tests of package abi.
//
// It reads a kernel as Debian ships it: the vmlinuz bzImage (whose
// compressed payload is vmlinux, an ELF file with the base .BTF section) and
// the module files (.ko, or .ko.xz/.ko.zst/.ko.gz), whose .BTF sections are
// split BTF on top of that base. For each module it keeps the structs,
// unions and enums named like the uverbs, rxe and mlx5 UAPI types, plus every
// struct named in abi.Layouts, and what they reference (see trimmer), and
// writes <out>/<module>.btf.
//
// Usage:
//
//	btfextract -vmlinuz boot/vmlinuz-6.1.0-56-amd64 -moddir lib/modules/6.1.0-56-amd64 -out testdata/btf/6.1
//
// internal/abi/testdata/btf/update.sh fetches the Debian packages and runs it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cilium/ebpf/btf"

	"github.com/goverbs/goverbs/internal/abi"
)

// ErrModuleNotFound reports a module with no file under -moddir.
var ErrModuleNotFound = errors.New("module file not found")

func main() {
	vmlinuz := flag.String("vmlinuz", "", "kernel bzImage (vmlinuz) whose payload holds the base BTF")
	vmlinux := flag.String("vmlinux", "", "uncompressed vmlinux ELF, instead of -vmlinuz")
	moddir := flag.String("moddir", "", "directory searched for the module files (lib/modules/<version>)")
	modules := flag.String("modules", "ib_uverbs,ib_core,rdma_rxe,mlx5_ib", "comma-separated modules to extract")
	out := flag.String("out", "", "output directory for <module>.btf")
	flag.Parse()

	if (*vmlinuz == "") == (*vmlinux == "") || *moddir == "" || *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: btfextract (-vmlinuz FILE | -vmlinux FILE) -moddir DIR -out DIR [-modules a,b]")
		os.Exit(2)
	}
	if err := run(*vmlinuz, *vmlinux, *moddir, strings.Split(*modules, ","), *out); err != nil {
		fmt.Fprintln(os.Stderr, "btfextract:", err)
		os.Exit(1)
	}
}

func run(vmlinuzPath, vmlinuxPath, moddir string, modules []string, outDir string) error {
	base, err := loadBase(vmlinuzPath, vmlinuxPath)
	if err != nil {
		return err
	}
	extra := make(map[string]bool, len(abi.Layouts))
	for _, l := range abi.Layouts {
		extra[l.C] = true
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	for _, module := range modules {
		if err := extractModule(base, moddir, module, extra, outDir); err != nil {
			return fmt.Errorf("%s: %w", module, err)
		}
	}
	return nil
}

// loadBase reads the vmlinux base BTF the module BTF is split from.
func loadBase(vmlinuzPath, vmlinuxPath string) (*btf.Spec, error) {
	var vmlinux []byte
	if vmlinuxPath != "" {
		data, err := os.ReadFile(vmlinuxPath)
		if err != nil {
			return nil, err
		}
		vmlinux = data
	} else {
		image, err := os.ReadFile(vmlinuzPath)
		if err != nil {
			return nil, err
		}
		if vmlinux, err = vmlinuxFromBzImage(image); err != nil {
			return nil, fmt.Errorf("%s: %w", vmlinuzPath, err)
		}
	}
	raw, err := btfSection(vmlinux)
	if err != nil {
		return nil, fmt.Errorf("vmlinux: %w", err)
	}
	spec, err := btf.LoadSpecFromReader(bytesReaderAt(raw))
	if err != nil {
		return nil, fmt.Errorf("vmlinux BTF: %w", err)
	}
	return spec, nil
}

func extractModule(base *btf.Spec, moddir, module string, extra map[string]bool, outDir string) error {
	path, err := findModule(moddir, module)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !strings.HasSuffix(path, ".ko") {
		if data, err = decompress(data); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	raw, err := btfSection(data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	spec, err := btf.LoadSplitSpecFromReader(bytesReaderAt(raw), base)
	if err != nil {
		return fmt.Errorf("%s: split BTF: %w", path, err)
	}
	blob, roots, err := trimSpec(spec, extra)
	if err != nil {
		return err
	}
	if err := verifyTrimmed(spec, blob, extra); err != nil {
		return fmt.Errorf("trimmed BTF differs from the module's: %w", err)
	}
	outPath := filepath.Join(outDir, module+".btf")
	if err := writeFileAtomic(outPath, blob); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%s: %d types from %s (%d bytes of module BTF) -> %d bytes\n",
		outPath, roots, filepath.Base(path), len(raw), len(blob))
	return nil
}

// findModule finds the one file of module under dir.
func findModule(dir, module string) (string, error) {
	names := []string{module + ".ko", module + ".ko.xz", module + ".ko.zst", module + ".ko.gz"}
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && slices.Contains(names, d.Name()) {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%w under %s", ErrModuleNotFound, dir)
	case 1:
		return found[0], nil
	default:
		return "", fmt.Errorf("several files for one module: %v", found)
	}
}

// verifyTrimmed reloads the blob and checks that every root kept the layout
// it has in the module: same members, offsets and sizes, anonymous members
// included.
func verifyTrimmed(orig *btf.Spec, blob []byte, extra map[string]bool) error {
	trimmed, err := btf.LoadSpecFromReader(bytesReaderAt(blob))
	if err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	roots, err := selectRoots(orig, extra)
	if err != nil {
		return err
	}
	for _, r := range roots {
		candidates, err := trimmed.AnyTypesByName(r.TypeName())
		if err != nil {
			return fmt.Errorf("%s: %w", r.TypeName(), err)
		}
		want, err := layoutSignature(r)
		if err != nil {
			return fmt.Errorf("%s: %w", r.TypeName(), err)
		}
		ok := false
		for _, c := range candidates {
			got, err := layoutSignature(c)
			if err == nil && slices.Equal(got, want) {
				ok = true
				break
			}
		}
		if !ok {
			return fmt.Errorf("%s: layout not preserved", r.TypeName())
		}
	}
	return nil
}

// maxAnonymousDepth bounds how deep anonymous structs and unions nest.
const maxAnonymousDepth = 32

// layoutSignature describes a type's layout as comparable lines: its kind
// and size and, for structs and unions, each member's name, offset and size,
// anonymous members expanded.
func layoutSignature(t btf.Type) ([]string, error) {
	var lines []string
	var walk func(prefix string, members []btf.Member, base btf.Bits) error
	walk = func(prefix string, members []btf.Member, base btf.Bits) error {
		// Anonymous members nest a few levels in real code; a deeper chain
		// is a cycle in corrupt BTF.
		if len(prefix) > 2*maxAnonymousDepth {
			return fmt.Errorf("%w: anonymous members nested too deep", ErrUnexpectedType)
		}
		for _, m := range members {
			size, err := btf.Sizeof(m.Type)
			if err != nil {
				return fmt.Errorf("member %s: %w", m.Name, err)
			}
			lines = append(lines, fmt.Sprintf("%s%s@%d:%d/%d", prefix, m.Name, base+m.Offset, size, m.BitfieldSize))
			if m.Name == "" {
				switch inner := btf.UnderlyingType(m.Type).(type) {
				case *btf.Struct:
					if err := walk(prefix+"  ", inner.Members, base+m.Offset); err != nil {
						return err
					}
				case *btf.Union:
					if err := walk(prefix+"  ", inner.Members, base+m.Offset); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	switch v := t.(type) {
	case *btf.Struct:
		lines = append(lines, fmt.Sprintf("struct %d", v.Size))
		return lines, walk("", v.Members, 0)
	case *btf.Union:
		lines = append(lines, fmt.Sprintf("union %d", v.Size))
		return lines, walk("", v.Members, 0)
	case *btf.Enum:
		lines = append(lines, fmt.Sprintf("enum %d %v", v.Size, v.Signed))
		for _, val := range v.Values {
			lines = append(lines, fmt.Sprintf("%s=%d", val.Name, val.Value))
		}
		return lines, nil
	}
	return nil, fmt.Errorf("%w: root %v", ErrUnexpectedType, t)
}

func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".btfextract-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
