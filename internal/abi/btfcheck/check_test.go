package btfcheck

import (
	"bytes"
	"cmp"
	"errors"
	"testing"

	"github.com/cilium/ebpf/btf"
	gocmp "github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/abi"
)

var (
	u8  = &btf.Int{Name: "__u8", Size: 1}
	u16 = &btf.Int{Name: "__u16", Size: 2}
	u32 = &btf.Int{Name: "__u32", Size: 4}
	u64 = &btf.Int{Name: "__u64", Size: 8}
	idx = &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed}
)

func array(t btf.Type, n uint32) *btf.Array { return &btf.Array{Index: idx, Type: t, Nelems: n} }

// member builds a BTF member at a byte offset.
func member(name string, t btf.Type, byteOffset uint32) btf.Member {
	return btf.Member{Name: name, Type: t, Offset: btf.Bits(byteOffset * 8)}
}

// testSpec holds small structs shaped like the uverbs ones, covering each
// matching rule.
func testSpec(t testing.TB) *btf.Spec {
	t.Helper()
	inner := &btf.Struct{Name: "inner", Size: 8, Members: []btf.Member{
		member("a", u32, 0), member("b", u32, 4),
	}}
	types := []btf.Type{
		// struct plain { __u64 response; __u32 pd_handle; __u16 lid; __u8 state; __u8 reserved; }
		&btf.Struct{Name: "plain", Size: 16, Members: []btf.Member{
			member("response", u64, 0), member("pd_handle", u32, 8), member("lid", u16, 12),
			member("state", u8, 14), member("reserved", u8, 15),
		}},
		// struct with_anon { __u16 id; __u16 len; union { __aligned_u64 data; __s64 data_s64; }; }
		&btf.Struct{Name: "with_anon", Size: 16, Members: []btf.Member{
			member("id", u16, 0), member("len", u16, 2),
			member("", &btf.Union{Size: 8, Members: []btf.Member{
				member("data", u64, 0), member("data_s64", u64, 0),
			}}, 8),
		}},
		// struct with_union { __u32 op; union { __be32 imm_data; __u32 invalidate_rkey; __u8 b[4]; } ex; }
		&btf.Struct{Name: "with_union", Size: 8, Members: []btf.Member{
			member("op", u32, 0),
			member("ex", &btf.Union{Size: 4, Members: []btf.Member{
				member("imm_data", u32, 0), member("invalidate_rkey", u32, 0), member("b", array(u8, 4), 0),
			}}, 4),
		}},
		// struct with_small_anon { __u32 x; union { __u8 tag; __u32 wide; }; }
		&btf.Struct{Name: "with_small_anon", Size: 8, Members: []btf.Member{
			member("x", u32, 0),
			member("", &btf.Union{Size: 4, Members: []btf.Member{
				member("tag", u8, 0), member("wide", u32, 0),
			}}, 4),
		}},
		// struct with_flex { __u32 n; __u32 reserved; __u64 driver_data[]; }
		&btf.Struct{Name: "with_flex", Size: 8, Members: []btf.Member{
			member("n", u32, 0), member("reserved", u32, 4), member("driver_data", array(u64, 0), 8),
		}},
		// struct with_bits { __u32 low:4, high:28; __u32 next; }
		&btf.Struct{Name: "with_bits", Size: 8, Members: []btf.Member{
			{Name: "low", Type: u32, Offset: 0, BitfieldSize: 4},
			{Name: "high", Type: u32, Offset: 4, BitfieldSize: 28},
			member("next", u32, 4),
		}},
		// struct outer { struct inner in; __u32 c; __u32 reserved[3]; }
		&btf.Struct{Name: "outer", Size: 24, Members: []btf.Member{
			member("in", inner, 0), member("c", u32, 8), member("reserved", array(u32, 3), 12),
		}},
		// struct grown { __u16 flags2; __u8 reserved[2]; __u32 speed_ex; } (a newer kernel)
		&btf.Struct{Name: "grown", Size: 8, Members: []btf.Member{
			member("flags2", u16, 0), member("reserved", array(u8, 2), 2), member("speed_ex", u32, 4),
		}},
		// union top_union { __u32 word; __u8 bytes[4]; }
		&btf.Union{Name: "top_union", Size: 4, Members: []btf.Member{
			member("word", u32, 0), member("bytes", array(u8, 4), 0),
		}},
		// A forward declaration or typedef with a struct's name is not a layout.
		&btf.Fwd{Name: "only_fwd", Kind: btf.FwdStruct},
		&btf.Typedef{Name: "only_typedef", Type: inner},
		// Two definitions of one name; the second is the one mirrored.
		&btf.Struct{Name: "twice", Size: 4, Members: []btf.Member{member("other", u32, 0)}},
		&btf.Struct{Name: "twice", Size: 4, Members: []btf.Member{member("word", u32, 0)}},
	}
	b, err := btf.NewBuilder(types, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := b.Spec()
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

type plain struct {
	Response uint64
	PDHandle uint32
	LID      uint16
	State    uint8
	Reserved uint8
}

type plainShifted struct {
	Response uint64
	PDHandle uint32
	State    uint8
	Reserved uint8
	LID      uint16
}

type plainRenamed struct {
	Response uint64
	PDHandle uint32
	LID      uint16
	Status   uint8
	Reserved uint8
}

type plainTooBig struct {
	Response uint64
	PDHandle uint32
	LID      uint16
	State    uint8
	Reserved uint8
	Extra    uint32
}

type plainBlank struct {
	Response uint64
	PDHandle uint32
	LID      uint16
	State    uint8
	_        uint8
}

type plainInt struct {
	_        [0]uintptr
	Response uint64
	PDHandle int32
	LID      uint16
	State    uint8
	Reserved uint8
}

type withAnon struct {
	ID   uint16
	Len  uint16
	_    uint32
	Data uint64
}

type withUnion struct {
	Op uint32
	Ex uint32
}

type withSmallAnon struct {
	X   uint32
	Tag uint32 // named after the 1-byte alternative, sized like the union
}

type withFlex struct {
	N        uint32
	Reserved uint32
}

type withBitsStorage struct {
	LowHigh uint32
	Next    uint32
}

type withBitsNamed struct {
	Low  uint32
	Next uint32
}

type innerGo struct{ A, B uint32 }

type innerWrong struct {
	B uint32
	A uint32
}

type outerGo struct {
	In       innerGo
	C        uint32
	Reserved [3]uint32
}

type outerNestedWrong struct {
	In       innerWrong
	C        uint32
	Reserved [3]uint32
}

// grownOld mirrors the older definition: all reserved.
type grownOld struct {
	Flags2   uint16
	Reserved [6]uint8
}

// grownNew mirrors a definition newer than the kernel, checked against
// struct old_style below.
type grownNew struct {
	Flags2   uint16
	Reserved [2]uint8
	SpeedEx  uint32
}

type topUnion struct{ Word uint32 }

func TestCheck(t *testing.T) {
	spec := testSpec(t)

	// The "older kernel" shape of grown, for a mirror newer than it.
	oldStyle, err := btf.NewBuilder([]btf.Type{&btf.Struct{Name: "grown", Size: 8, Members: []btf.Member{
		member("flags2", u16, 0), member("reserved", array(u8, 6), 2),
	}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	oldSpec, err := oldStyle.Spec()
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		spec *btf.Spec
		c    string
		goV  any
		want []string
	}{
		{"exact", spec, "plain", plain{}, nil},
		{"pointer to struct", spec, "plain", &plain{}, nil},
		{"blank field covers reserved", spec, "plain", plainBlank{}, nil},
		{"field shifted", spec, "plain", plainShifted{}, []string{
			"plain.state: Go offset 12, kernel 14",
			"plain.reserved: Go offset 13, kernel 15",
			"plain.lid: Go offset 14, kernel 12",
		}},
		{"field renamed", spec, "plain", plainRenamed{}, []string{
			"plain: Go field Status (offset 14, size 1) matches no kernel member",
			"plain.state: kernel member (offset 14, size 1) has no Go field",
		}},
		{"struct too big", spec, "plain", plainTooBig{}, []string{
			"plain: Go size 24, kernel 16",
			"plain: Go field Extra (offset 16, size 4) matches no kernel member",
		}},
		{"platform-dependent type", spec, "plain", plainInt{}, []string{
			"plain: Go field _ has type [0]uintptr, whose size depends on GOARCH",
		}},
		{"anonymous union by one alternative", spec, "with_anon", withAnon{}, nil},
		{"named union as one field", spec, "with_union", withUnion{}, nil},
		{"anonymous union spanned by a named field", spec, "with_small_anon", withSmallAnon{}, nil},
		{"flexible array ignored", spec, "with_flex", withFlex{}, nil},
		{"bitfields as storage", spec, "with_bits", withBitsStorage{}, nil},
		{"bitfields named after the first", spec, "with_bits", withBitsNamed{}, nil},
		{"nested struct", spec, "outer", outerGo{}, nil},
		{"nested struct wrong", spec, "outer", outerNestedWrong{}, []string{
			"inner.b: Go offset 0, kernel 4",
			"inner.a: Go offset 4, kernel 0",
		}},
		{"mirror older than kernel", spec, "grown", grownOld{}, []string{
			"grown.reserved: Go bytes 2..8, kernel 2..4; reserved bytes, the rest used by newer fields (compatible)",
			"grown.speed_ex: kernel member (offset 4, size 4) lies in Go reserved bytes; the mirror predates it (compatible)",
		}},
		{"mirror newer than kernel", oldSpec, "grown", grownNew{}, []string{
			"grown.reserved: Go bytes 2..4, kernel 2..8; reserved bytes, the rest used by newer fields (compatible)",
			"grown: Go field SpeedEx (offset 4, size 4) lies in kernel member reserved (offset 2, size 6); the kernel predates it (compatible)",
		}},
		{"top-level union", spec, "top_union", topUnion{}, nil},
		{"either of two definitions", spec, "twice", topUnion{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems, err := Check(tc.spec, abi.Layout{C: tc.c, Go: tc.goV, Module: "test"})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range problems {
				got = append(got, p.String())
			}
			if diff := gocmp.Diff(tc.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckErrors(t *testing.T) {
	spec := testSpec(t)
	for _, tc := range []struct {
		name    string
		spec    *btf.Spec
		layout  abi.Layout
		wantErr error
	}{
		{"missing struct", spec, abi.Layout{C: "absent", Go: plain{}, Module: "ib_uverbs"}, ErrNotInBTF},
		{"forward declaration only", spec, abi.Layout{C: "only_fwd", Go: plain{}}, ErrNotInBTF},
		{"typedef only", spec, abi.Layout{C: "only_typedef", Go: innerGo{}}, ErrNotInBTF},
		{"nil spec", nil, abi.Layout{C: "plain", Go: plain{}}, ErrNotInBTF},
		{"Go value not a struct", spec, abi.Layout{C: "plain", Go: uint32(0)}, ErrBadLayout},
		{"nil Go value", spec, abi.Layout{C: "plain"}, ErrBadLayout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems, err := Check(tc.spec, tc.layout)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Check: error %v, want %v", err, tc.wantErr)
			}
			if problems != nil {
				t.Errorf("Check: problems %v alongside error", problems)
			}
		})
	}
}

func TestCheckMessageNamesModule(t *testing.T) {
	_, err := Check(testSpec(t), abi.Layout{C: "absent", Go: plain{}, Module: "rdma_rxe"})
	if want := "struct absent not in BTF of module rdma_rxe: struct not in BTF"; err == nil || err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

// fuzzLayouts are the layouts FuzzCheck picks from: the test mirrors, then
// every mirror of package abi.
var fuzzLayouts = append([]abi.Layout{
	{C: "plain", Go: plain{}}, {C: "with_anon", Go: withAnon{}}, {C: "grown", Go: grownNew{}},
	{C: "outer", Go: outerGo{}}, {C: "with_bits", Go: withBitsStorage{}},
}, abi.Layouts...)

// checkSeed is one FuzzCheck input: a BTF blob holding one struct (and
// what it references) and the index in fuzzLayouts of its mirror.
type checkSeed struct {
	raw   []byte
	which uint16
}

// checkSeeds builds FuzzCheck's seeds: each test struct alone, a hundred
// bytes or so, and a few real uverbs structs cut from the checked-in 6.12
// BTF. Small matters: the fuzzer minimises every input that finds new
// coverage by dropping each byte and each run of bytes, which takes time
// growing with the square of the input's size.
func checkSeeds(t testing.TB) []checkSeed {
	t.Helper()
	var seeds []checkSeed
	add := func(spec *btf.Spec, which int) {
		name := fuzzLayouts[which].C
		typ, err := spec.AnyTypeByName(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := btf.NewBuilder([]btf.Type{typ}, nil)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := b.Marshal(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, checkSeed{raw, uint16(which)})
	}
	test := testSpec(t)
	for i := range 5 {
		add(test, i)
	}
	real, err := btf.LoadSpec("../testdata/btf/6.12/ib_uverbs.btf")
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range fuzzLayouts {
		switch l.C {
		case "ib_uverbs_attr", "ib_uverbs_cmd_hdr", "ib_uverbs_gid_entry":
			add(real, i)
		}
	}
	return seeds
}

// FuzzCheck checks one Layout, picked by which, against arbitrary BTF,
// optionally under another struct name: Check must not panic, whatever the
// kernel side claims (cycles, huge offsets, odd kinds). One layout per input
// keeps each execution short; the fuzzer reaches every layout by mutating
// which.
func FuzzCheck(f *testing.F) {
	for _, s := range checkSeeds(f) {
		f.Add(s.raw, s.which, "")
	}
	f.Add(checkSeeds(f)[0].raw, uint16(1), "plain")
	f.Fuzz(func(t *testing.T, raw []byte, which uint16, rename string) {
		spec, err := btf.LoadSpecFromReader(bytes.NewReader(raw))
		if err != nil {
			return
		}
		l := fuzzLayouts[int(which)%len(fuzzLayouts)]
		l.C = cmp.Or(rename, l.C)
		// Any result will do; a panic or a hang is the failure.
		_, _ = Check(spec, l)
	})
}

func TestCheckSeeds(t *testing.T) {
	for _, s := range checkSeeds(t) {
		spec, err := btf.LoadSpecFromReader(bytes.NewReader(s.raw))
		if err != nil {
			t.Fatal(err)
		}
		l := fuzzLayouts[s.which]
		problems, err := Check(spec, l)
		if err != nil {
			t.Errorf("%s: %v", l.C, err)
		}
		for _, p := range problems {
			if !p.Compatible {
				t.Errorf("%s: %v", l.C, p)
			}
		}
		t.Logf("%s: %d bytes", l.C, len(s.raw))
	}
}
