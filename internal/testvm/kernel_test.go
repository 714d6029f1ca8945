package testvm

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseKernelDepends(t *testing.T) {
	tests := []struct {
		name, out, want string
	}{
		{"real package", "linux-image-amd64\n  Depends: linux-image-6.1.0-56-amd64\n", "linux-image-6.1.0-56-amd64"},
		{"6.12", "linux-image-6.12-amd64\n  Depends: linux-image-6.12.117+deb12-amd64\n", "linux-image-6.12.117+deb12-amd64"},
		{"virtual, unsigned preferred", "linux-image-6.12-amd64\n  Depends: <linux-image-6.12.9+deb12-amd64>\n    linux-image-6.12.9+deb12-amd64-dbg-x\n    linux-image-6.12.9+deb12-amd64-unsigned\n  Recommends: firmware\n",
			"linux-image-6.12.9+deb12-amd64-unsigned"},
		{"alternatives", "m\n |Depends: linux-image-6.1.0-1-amd64\n  Depends: linux-image-6.1.0-2-amd64\n", "linux-image-6.1.0-1-amd64"},
		{"other deps first", "m\n  Depends: kmod\n  Depends: linux-image-6.1.0-9-amd64\n", "linux-image-6.1.0-9-amd64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseKernelDepends(tt.out)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseKernelDependsBadInput(t *testing.T) {
	for name, out := range map[string]string{
		"empty":                    "",
		"no kernel":                "m\n  Depends: kmod\n",
		"virtual without provider": "m\n  Depends: <linux-image-6.12.9+deb12-amd64>\n  Depends: kmod\n",
	} {
		t.Run(name, func(t *testing.T) {
			if got, err := parseKernelDepends(out); err == nil {
				t.Fatalf("got %q, want an error", got)
			}
		})
	}
}

func TestParseAptPolicyAndProvides(t *testing.T) {
	policy := "linux-image-6.12.117+deb12-amd64:\n  Installed: (none)\n  Candidate: 6.12.117-1~deb12u1\n  Version table:\n"
	if diff := cmp.Diff("6.12.117-1~deb12u1", parseCandidate(policy)); diff != "" {
		t.Errorf("candidate (-want +got):\n%s", diff)
	}
	if got := parseCandidate("x:\n  Installed: (none)\n  Candidate: (none)\n"); got != "" {
		t.Errorf("candidate of a virtual package: %q, want empty", got)
	}
	showpkg := "Package: linux-image-6.12.9+deb12-amd64\nVersions: \n\nReverse Provides: \nlinux-image-6.12.9+deb12-amd64-dbg 6.12.9-1\nlinux-image-6.12.9+deb12-amd64-unsigned 6.12.9-1 (= )\n"
	if diff := cmp.Diff("linux-image-6.12.9+deb12-amd64-unsigned", parseReverseProvides(showpkg)); diff != "" {
		t.Errorf("provider (-want +got):\n%s", diff)
	}
	if got := parseReverseProvides("Package: x\nReverse Provides: \n"); got != "" {
		t.Errorf("provider of nothing: %q", got)
	}
}

func TestResolveKernelUnknownName(t *testing.T) {
	_, err := ResolveKernel(context.Background(), "5.10")
	if !errors.Is(err, ErrUnknownKernel) {
		t.Fatalf("got %v, want ErrUnknownKernel", err)
	}
}

func TestExtractVmlinuxBadInput(t *testing.T) {
	header := func(version uint16, off, n uint32, size int) []byte {
		b := make([]byte, size)
		b[0x1f1] = 1
		copy(b[0x202:], "HdrS")
		binary.LittleEndian.PutUint16(b[0x206:], version)
		binary.LittleEndian.PutUint32(b[0x248:], off)
		binary.LittleEndian.PutUint32(b[0x24c:], n)
		return b
	}
	unknown := header(0x20f, 0, 8, 2048)
	copy(unknown[1024:], "NOTCOMPR")
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"not a bzImage", make([]byte, 4096)},
		{"old protocol", header(0x207, 0, 16, 4096)},
		{"payload outside", header(0x20f, 4000, 1000, 4096)},
		{"unknown compression", unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "vmlinuz")
			if err := os.WriteFile(in, tt.data, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := ExtractVmlinux(context.Background(), in, filepath.Join(dir, "vmlinux")); !errors.Is(err, ErrNoPVH) {
				t.Fatalf("got %v, want ErrNoPVH", err)
			}
		})
	}
	if err := checkPVH([]byte("\x7fELF not really")); !errors.Is(err, ErrNoPVH) {
		t.Errorf("checkPVH of garbage: %v, want ErrNoPVH", err)
	}
}

// TestCachedKernels checks the kernels already in the cache (it downloads
// nothing): the modules the guest loads are plain ELF and the PVH image was
// extracted.
func TestCachedKernels(t *testing.T) {
	cache, err := CacheDir()
	if err != nil {
		t.Skip(err)
	}
	metas, _ := filepath.Glob(filepath.Join(cache, "kernels", "*", kernelMetaFile))
	if len(metas) == 0 {
		t.Skip("no kernel in the cache", cache)
	}
	for _, m := range metas {
		k, err := loadKernelMeta(filepath.Dir(m))
		if err != nil {
			t.Errorf("%s: %v", m, err)
			continue
		}
		for _, name := range append(append([]string(nil), RXEModules...), ExtraModules...) {
			p, err := k.Module(name)
			if err != nil {
				t.Errorf("%s: %v", k.Package, err)
				continue
			}
			b, err := os.ReadFile(p)
			if err != nil || len(b) < 4 || string(b[:4]) != "\x7fELF" {
				t.Errorf("%s: module %s at %s is not ELF (%v)", k.Package, name, p, err)
			}
		}
		if k.Vmlinux == "" {
			t.Errorf("%s: no PVH vmlinux extracted", k.Package)
		}
	}
}
