package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cilium/ebpf/btf"
	"github.com/google/go-cmp/cmp"
)

// kernelLikeSpec holds a UAPI-shaped root, a root that embeds kernel
// objects, and the kernel objects themselves.
func kernelLikeSpec(t testing.TB) *btf.Spec {
	t.Helper()
	u32 := &btf.Int{Name: "unsigned int", Size: 4}
	u64 := &btf.Int{Name: "long long unsigned int", Size: 8}
	typedefU32 := &btf.Typedef{Name: "__u32", Type: u32}
	// struct list_head { struct list_head *next, *prev; } — a kernel object.
	listHead := &btf.Struct{Name: "list_head", Size: 16}
	listHead.Members = []btf.Member{
		{Name: "next", Type: &btf.Pointer{Target: listHead}},
		{Name: "prev", Type: &btf.Pointer{Target: listHead}, Offset: 64},
	}
	// struct ib_mr is big and pointer-laden; only its size may survive.
	ibMR := &btf.Struct{Name: "ib_mr", Size: 160, Members: []btf.Member{
		{Name: "list", Type: listHead},
		{Name: "lkey", Type: u32, Offset: 128},
	}}
	// Plain data not named like a root: kept whole.
	gid := &btf.Struct{Name: "plain_gid", Size: 16, Members: []btf.Member{
		{Name: "raw", Type: &btf.Array{Index: u32, Type: &btf.Int{Name: "u8", Size: 1}, Nelems: 16}},
	}}
	types := []btf.Type{
		// struct rxe_send_wr: UAPI, but one union arm holds a kernel pointer.
		&btf.Struct{Name: "rxe_send_wr", Size: 40, Members: []btf.Member{
			{Name: "wr_id", Type: u64},
			{Name: "opcode", Type: &btf.Const{Type: typedefU32}, Offset: 64},
			{Name: "wr", Offset: 128, Type: &btf.Union{Size: 24, Members: []btf.Member{
				{Name: "reg", Type: &btf.Struct{Size: 24, Members: []btf.Member{
					{Name: "mr", Type: &btf.Pointer{Target: ibMR}},
					{Name: "key", Type: u32, Offset: 64},
					{Name: "access", Type: u32, Offset: 96},
					{Name: "gid", Type: &btf.Array{Index: u32, Type: u64, Nelems: 1}, Offset: 128},
				}}},
			}}},
			{Name: "flags", Type: u32, Offset: 320, BitfieldSize: 3},
		}},
		// struct rxe_pd: a kernel object named like a root; it stays, its
		// embedded kernel objects become opaque.
		&btf.Struct{Name: "rxe_pd", Size: 192, Members: []btf.Member{
			{Name: "ibmr", Type: ibMR},
			{Name: "gid", Type: gid, Offset: 160 * 8},
			{Name: "node", Type: &btf.Volatile{Type: &btf.Pointer{Target: listHead}}, Offset: 176 * 8},
			{Name: "n", Type: u32, Offset: 184 * 8},
		}},
		&btf.Enum{Name: "ib_uverbs_access_flags", Size: 4, Values: []btf.EnumValue{{Name: "IB_UVERBS_ACCESS_LOCAL_WRITE", Value: 1}}},
		// Not selected: no root prefix.
		&btf.Struct{Name: "unrelated", Size: 4, Members: []btf.Member{{Name: "x", Type: u32}}},
		ibMR,
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

func TestTrimSpec(t *testing.T) {
	spec := kernelLikeSpec(t)
	blob, roots, err := trimSpec(spec, map[string]bool{"extra_root": true})
	if err != nil {
		t.Fatal(err)
	}
	if roots != 3 {
		t.Errorf("%d roots, want 3 (rxe_send_wr, rxe_pd, ib_uverbs_access_flags)", roots)
	}
	if err := verifyTrimmed(spec, blob, nil); err != nil {
		t.Fatal(err)
	}
	trimmed, err := btf.LoadSpecFromReader(bytes.NewReader(blob))
	if err != nil {
		t.Fatal(err)
	}

	var names []string
	for typ, err := range trimmed.All() {
		if err != nil {
			t.Fatal(err)
		}
		if typ.TypeName() != "" {
			names = append(names, typ.TypeName())
		}
	}
	slices.Sort(names)
	want := []string{"__u32", "ib_mr", "ib_uverbs_access_flags", "long long unsigned int", "plain_gid",
		"rxe_pd", "rxe_send_wr", "u8", "unsigned int"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("types in the blob (-want +got):\n%s", diff)
	}

	var mr *btf.Struct
	if err := trimmed.TypeByName("ib_mr", &mr); err != nil {
		t.Fatal(err)
	}
	if mr.Size != 160 || len(mr.Members) != 0 {
		t.Errorf("ib_mr: size %d with %d members, want opaque 160", mr.Size, len(mr.Members))
	}
	var gid *btf.Struct
	if err := trimmed.TypeByName("plain_gid", &gid); err != nil {
		t.Fatal(err)
	}
	if len(gid.Members) != 1 {
		t.Errorf("plain_gid: %d members, want kept whole", len(gid.Members))
	}
	var wr *btf.Struct
	if err := trimmed.TypeByName("rxe_send_wr", &wr); err != nil {
		t.Fatal(err)
	}
	reg := wr.Members[2].Type.(*btf.Union).Members[0].Type.(*btf.Struct)
	if ptr, ok := reg.Members[0].Type.(*btf.Pointer); !ok || !isVoid(ptr.Target) {
		t.Errorf("rxe_send_wr.wr.reg.mr: %v, want void *", reg.Members[0].Type)
	}
}

func isVoid(t btf.Type) bool {
	_, ok := t.(*btf.Void)
	return ok
}

func TestTrimSpecDeterministic(t *testing.T) {
	first, _, err := trimSpec(kernelLikeSpec(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := trimSpec(kernelLikeSpec(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Error("two runs gave different blobs")
	}
}

// TestTrimCheckedIn re-trims the checked-in blobs, real kernel BTF, and
// checks that every root keeps its layout.
func TestTrimCheckedIn(t *testing.T) {
	paths, err := filepath.Glob("../../testdata/btf/*/*.btf")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Skip("no checked-in BTF")
	}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		spec, err := btf.LoadSpecFromReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		again, _, err := trimSpec(spec, nil)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if err := verifyTrimmed(spec, again, nil); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// FuzzTrim feeds arbitrary BTF to the trimmer: it must not panic, and what
// it writes must keep the layout of every root.
func FuzzTrim(f *testing.F) {
	spec := kernelLikeSpec(f)
	var all []btf.Type
	for typ, err := range spec.All() {
		if err != nil {
			f.Fatal(err)
		}
		all = append(all, typ)
	}
	b, err := btf.NewBuilder(all, nil)
	if err != nil {
		f.Fatal(err)
	}
	seed, err := b.Marshal(nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	// The checked-in blobs are real but tens of KB: too slow a seed for
	// the fuzzer to mutate and minimise. TestTrimCheckedIn covers them.
	f.Add(seed)
	f.Fuzz(func(t *testing.T, raw []byte) {
		spec, err := btf.LoadSpecFromReader(bytes.NewReader(raw))
		if err != nil {
			return
		}
		blob, _, err := trimSpec(spec, nil)
		if err != nil {
			return
		}
		if err := verifyTrimmed(spec, blob, nil); err != nil {
			t.Fatalf("trimmed blob lost a layout: %v", err)
		}
	})
}

// TestTrimUnencodable: BTF packs a member's offset into 24 bits once its
// struct has a bitfield, and cilium's encoder truncates silently; the
// trimmer must refuse such a layout (found by FuzzTrim).
func TestTrimUnencodable(t *testing.T) {
	u32 := &btf.Int{Name: "u32", Size: 4}
	for _, tc := range []struct {
		name    string
		members []btf.Member
	}{
		{"offset past 24 bits", []btf.Member{
			{Name: "bits", Type: u32, BitfieldSize: 3},
			{Name: "far", Type: u32, Offset: 1 << 24},
		}},
		{"bitfield wider than 8 bits of width", []btf.Member{
			{Name: "wide", Type: u32, BitfieldSize: 256},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			huge := &btf.Struct{Name: "rxe_huge", Size: 1 << 22, Members: tc.members}
			if _, err := newTrimmer(nil).trim(huge); !errors.Is(err, ErrUnencodable) {
				t.Errorf("got %v, want ErrUnencodable", err)
			}
		})
	}
}
