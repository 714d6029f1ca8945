package abi_test

import (
	"bytes"
	"embed"
	"errors"
	"io/fs"
	"path"
	"testing"

	"github.com/cilium/ebpf/btf"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/abi/btfcheck"
	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// The trimmed module BTF of Debian 12's kernels (testdata/btf/README.md).
// It is embedded so that the test binary also runs where the source tree is
// absent, such as inside the test VM.
//
//go:embed testdata/btf/*/*.btf
var offlineBTF embed.FS

// offlineKernels are the kernel lines under testdata/btf, and
// offlineModules the modules extracted for each.
var (
	offlineKernels = []string{"6.1", "6.12"}
	offlineModules = []string{"ib_uverbs", "ib_core", "rdma_rxe", "mlx5_ib", "rdma_ucm", "rdma_cm"}
)

func loadOffline(t *testing.T, kernel, module string) *btf.Spec {
	t.Helper()
	raw, err := offlineBTF.ReadFile(path.Join("testdata/btf", kernel, module+".btf"))
	if err != nil {
		t.Fatalf("no BTF of module %s for kernel %s (run testdata/btf/update.sh): %v", module, kernel, err)
	}
	spec, err := btf.LoadSpecFromReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("load BTF of %s for kernel %s: %v", module, kernel, err)
	}
	return spec
}

// absentFromBTF lists the Layouts whose struct no module's BTF carries: the
// kernel only uses them through sizeof or a cast, so the compiler emits no
// type for them. They are checked to stay absent, so that an entry here is
// dropped as soon as a kernel starts describing the struct.
var absentFromBTF = map[string]string{
	// ib_uverbs_post_send/post_recv copy SGEs straight into struct ib_sge.
	"ib_uverbs_sge": "ib_uverbs reads SGEs as struct ib_sge; no BTF in 6.1 or 6.12",
}

// checkLayouts runs btfcheck on every Layout, one subtest each. specFor
// returns the module's spec, or a reason to skip that module; elsewhere, if
// not nil, names the other modules that do carry a struct.
func checkLayouts(t *testing.T, specFor func(module string) (*btf.Spec, string), elsewhere func(name string) []string) {
	for _, l := range abi.Layouts {
		t.Run(l.Module+"/"+l.C, func(t *testing.T) {
			spec, skip := specFor(l.Module)
			if spec == nil {
				t.Skip(skip)
			}
			problems, err := btfcheck.Check(spec, l)
			if why, ok := absentFromBTF[l.C]; ok {
				if !errors.Is(err, btfcheck.ErrNotInBTF) {
					t.Fatalf("listed as absent from BTF (%s), but Check says: problems %v, error %v; drop it from absentFromBTF",
						why, problems, err)
				}
				t.Skipf("not in the module's BTF: %s", why)
			}
			if errors.Is(err, btfcheck.ErrNotInBTF) && elsewhere != nil {
				if others := elsewhere(l.C); len(others) > 0 {
					t.Fatalf("%v; it is in the BTF of %v", err, others)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				if p.Compatible {
					t.Log(p)
				} else {
					t.Error(p)
				}
			}
		})
	}
}

// TestLayoutsOffline checks every Go mirror against the BTF of Debian's 6.1
// and 6.12 kernels. Every Layout must be found in the module it names.
func TestLayoutsOffline(t *testing.T) {
	for _, kernel := range offlineKernels {
		t.Run(kernel, func(t *testing.T) {
			specs := make(map[string]*btf.Spec)
			load := func(module string) (*btf.Spec, string) {
				if specs[module] == nil {
					specs[module] = loadOffline(t, kernel, module)
				}
				return specs[module], ""
			}
			elsewhere := func(name string) []string {
				var found []string
				for _, module := range offlineModules {
					spec, _ := load(module)
					if _, err := spec.AnyTypesByName(name); err == nil {
						found = append(found, module)
					}
				}
				return found
			}
			checkLayouts(t, load, elsewhere)
		})
	}
}

// TestLayoutsLive checks every Go mirror against the running kernel's BTF in
// /sys/kernel/btf. It runs inside the test VM only: elsewhere the RDMA
// modules are not loaded, and the host kernel is not one the project targets.
func TestLayoutsLive(t *testing.T) {
	if !vmenv.InVM() {
		t.Skip(`not in the goverbs test VM (GOVERBS_VM unset): go test -exec "$PWD/bin/vmexec -kernel 6.1" ./internal/abi/`)
	}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err == nil {
		t.Logf("kernel %s (%s)", unix.ByteSliceToString(uts.Release[:]), vmenv.KernelName())
	}

	cache := btf.NewCache()
	skips := make(map[string]string)
	checkLayouts(t, func(module string) (*btf.Spec, string) {
		if why, ok := skips[module]; ok {
			return nil, why
		}
		spec, err := cache.Module(module)
		if errors.Is(err, fs.ErrNotExist) {
			skips[module] = "module " + module + " is not loaded (no /sys/kernel/btf/" + module + "): " + err.Error()
			return nil, skips[module]
		}
		if err != nil {
			t.Fatalf("load BTF of %s: %v", module, err)
		}
		return spec, ""
	}, nil)

	t.Run("negative", func(t *testing.T) {
		spec, err := cache.Module("ib_uverbs")
		if err != nil {
			t.Skipf("ib_uverbs BTF: %v", err)
		}
		for _, tc := range wrongMirrors {
			t.Run(tc.name, func(t *testing.T) {
				checkWrongMirror(t, spec, tc)
			})
		}
	})
}

// The mirrors below are deliberately wrong copies of QueryPortResp, to prove
// that the check fails when it should.

// queryPortRespSwapped has lid and sm_lid swapped, so both sit 2 bytes off.
type queryPortRespSwapped struct {
	PortCapFlags  uint32
	MaxMsgSz      uint32
	BadPkeyCntr   uint32
	QkeyViolCntr  uint32
	GIDTblLen     uint32
	PkeyTblLen    uint16
	SMLID         uint16
	LID           uint16
	State         uint8
	MaxMTU        uint8
	ActiveMTU     uint8
	LMC           uint8
	MaxVLNum      uint8
	SMSL          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	ActiveWidth   uint8
	ActiveSpeed   uint8
	PhysState     uint8
	LinkLayer     uint8
	Flags         uint8
	Reserved      uint8
}

// queryPortRespNoReserved lacks the last byte, which alignment padding hides
// from the size check; only the coverage check sees it.
type queryPortRespNoReserved struct {
	PortCapFlags  uint32
	MaxMsgSz      uint32
	BadPkeyCntr   uint32
	QkeyViolCntr  uint32
	GIDTblLen     uint32
	PkeyTblLen    uint16
	LID           uint16
	SMLID         uint16
	State         uint8
	MaxMTU        uint8
	ActiveMTU     uint8
	LMC           uint8
	MaxVLNum      uint8
	SMSL          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	ActiveWidth   uint8
	ActiveSpeed   uint8
	PhysState     uint8
	LinkLayer     uint8
	Flags         uint8
}

// queryPortRespWideState has state as a uint16, which moves everything after
// it and grows the struct.
type queryPortRespWideState struct {
	PortCapFlags  uint32
	MaxMsgSz      uint32
	BadPkeyCntr   uint32
	QkeyViolCntr  uint32
	GIDTblLen     uint32
	PkeyTblLen    uint16
	LID           uint16
	SMLID         uint16
	State         uint16
	MaxMTU        uint8
	ActiveMTU     uint8
	LMC           uint8
	MaxVLNum      uint8
	SMSL          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	ActiveWidth   uint8
	ActiveSpeed   uint8
	PhysState     uint8
	LinkLayer     uint8
	Flags         uint8
	Reserved      uint8
}

type wrongMirror struct {
	name    string
	goValue any
	want    []string
}

var wrongMirrors = []wrongMirror{
	{"lid shifted", queryPortRespSwapped{}, []string{
		"ib_uverbs_query_port_resp.sm_lid: Go offset 22, kernel 24",
		"ib_uverbs_query_port_resp.lid: Go offset 24, kernel 22",
	}},
	{"reserved missing", queryPortRespNoReserved{}, []string{
		"ib_uverbs_query_port_resp.reserved: kernel member (offset 39, size 1) has no Go field",
	}},
	{"state widened", queryPortRespWideState{}, []string{
		"ib_uverbs_query_port_resp: Go size 44, kernel 40",
		"ib_uverbs_query_port_resp.state: Go size 2, kernel 1",
		"ib_uverbs_query_port_resp.max_mtu: Go offset 28, kernel 27",
		"ib_uverbs_query_port_resp.active_mtu: Go offset 29, kernel 28",
		"ib_uverbs_query_port_resp.lmc: Go offset 30, kernel 29",
		"ib_uverbs_query_port_resp.max_vl_num: Go offset 31, kernel 30",
		"ib_uverbs_query_port_resp.sm_sl: Go offset 32, kernel 31",
		"ib_uverbs_query_port_resp.subnet_timeout: Go offset 33, kernel 32",
		"ib_uverbs_query_port_resp.init_type_reply: Go offset 34, kernel 33",
		"ib_uverbs_query_port_resp.active_width: Go offset 35, kernel 34",
		"ib_uverbs_query_port_resp.active_speed: Go offset 36, kernel 35",
		"ib_uverbs_query_port_resp.phys_state: Go offset 37, kernel 36",
		"ib_uverbs_query_port_resp.link_layer: Go offset 38, kernel 37",
		"ib_uverbs_query_port_resp.flags: Go offset 39, kernel 38",
		"ib_uverbs_query_port_resp.reserved: Go offset 40, kernel 39",
	}},
}

func checkWrongMirror(t *testing.T, spec *btf.Spec, tc wrongMirror) {
	t.Helper()
	problems, err := btfcheck.Check(spec, abi.Layout{C: "ib_uverbs_query_port_resp", Go: tc.goValue, Module: "ib_uverbs"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	if diff := cmp.Diff(tc.want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// TestLayoutsNegative proves, on the real BTF of both kernels, that a wrong
// mirror is reported, and how.
func TestLayoutsNegative(t *testing.T) {
	for _, kernel := range offlineKernels {
		spec := loadOffline(t, kernel, "ib_uverbs")
		for _, tc := range wrongMirrors {
			t.Run(kernel+"/"+tc.name, func(t *testing.T) {
				checkWrongMirror(t, spec, tc)
			})
		}
	}
}

// TestLayoutsMissingStruct checks that a struct absent from a module's BTF
// is reported as absent, not as a layout mismatch.
func TestLayoutsMissingStruct(t *testing.T) {
	spec := loadOffline(t, "6.1", "rdma_rxe")
	_, err := btfcheck.Check(spec, abi.Layout{C: "ib_uverbs_query_port_resp", Go: abi.QueryPortResp{}, Module: "rdma_rxe"})
	if !errors.Is(err, btfcheck.ErrNotInBTF) {
		t.Fatalf("Check of a struct the module lacks: got %v, want ErrNotInBTF", err)
	}
}

// TestLayoutsTable checks the table itself: known modules, no duplicates.
func TestLayoutsTable(t *testing.T) {
	modules := map[string]bool{"ib_uverbs": true, "rdma_rxe": true, "mlx5_ib": true, "ib_core": true, "rdma_ucm": true}
	seen := make(map[string]bool)
	for _, l := range abi.Layouts {
		if !modules[l.Module] {
			t.Errorf("%s: unknown module %q", l.C, l.Module)
		}
		if seen[l.C] {
			t.Errorf("%s listed twice", l.C)
		}
		seen[l.C] = true
	}
}
