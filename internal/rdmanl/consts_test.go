package rdmanl

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf/btf"
	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// enumValues collects every named enum value of a BTF spec.
func enumValues(t *testing.T, spec *btf.Spec) map[string]int {
	t.Helper()
	vals := map[string]int{}
	for typ, err := range spec.All() {
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := typ.(*btf.Enum); ok {
			for _, v := range e.Values {
				vals[v.Name] = int(v.Value)
			}
		}
	}
	return vals
}

// checkEnums compares kernelEnums with the enum values of one kernel.
func checkEnums(t *testing.T, kernel string, vals map[string]int) {
	t.Helper()
	got, want := map[string]int{}, map[string]int{}
	for name, v := range kernelEnums {
		kv, ok := vals[name]
		if kernel == "6.1" && only612[name] {
			if ok {
				t.Errorf("%s: %s = %d exists; drop it from only612", kernel, name, kv)
			}
			continue
		}
		if !ok {
			t.Errorf("%s: %s is not in the kernel's BTF", kernel, name)
			continue
		}
		got[name], want[name] = v, kv
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: constants differ from the kernel's enums (-kernel +ours):\n%s", kernel, diff)
	}
}

// TestConstsBTF checks every nldev number against the enums in the BTF of
// ib_core: offline against Debian's 6.1 and 6.12 (internal/abi/testdata),
// and live against the running kernel in the test VM.
func TestConstsBTF(t *testing.T) {
	for _, k := range []string{"6.1", "6.12"} {
		t.Run(k, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("..", "abi", "testdata", "btf", k, "ib_core.btf"))
			if err != nil {
				t.Skipf("no offline BTF (the source tree is absent here): %v", err)
			}
			spec, err := btf.LoadSpecFromReader(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			checkEnums(t, k, enumValues(t, spec))
		})
	}
	t.Run("live", func(t *testing.T) {
		if !vmenv.InVM() {
			t.Skip("needs the test VM's kernel")
		}
		// ib_core's BTF is split on vmlinux's, which holds the enums both
		// use (the restrack and counter ones): read both.
		cache := btf.NewCache()
		vals := map[string]int{}
		for _, load := range []func() (*btf.Spec, error){cache.Kernel, func() (*btf.Spec, error) { return cache.Module("ib_core") }} {
			spec, err := load()
			if err != nil {
				t.Fatal(err)
			}
			maps.Copy(vals, enumValues(t, spec))
		}
		checkEnums(t, vmenv.KernelName(), vals)
	})
}
