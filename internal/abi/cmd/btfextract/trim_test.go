package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	return specOf(t, types...)
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

// blobOf marshals types and what they reference into raw BTF.
func blobOf(t testing.TB, types ...btf.Type) []byte {
	t.Helper()
	b, err := btf.NewBuilder(types, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := b.Marshal(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// trimSeeds are small BTF blobs, a hundred bytes or two each, that between
// them reach every branch of the trimmer: a plain root, a root embedding a
// kernel object behind a pointer and by value, an anonymous union with a
// bitfield, an enum, and a named kernel struct embedded anonymously.
// Small matters: the fuzzer minimises every input that finds new coverage
// by trying to drop each byte and each run of bytes, so the time that takes
// grows with the square of the input's size.
func trimSeeds(t testing.TB) [][]byte {
	u8 := &btf.Int{Name: "c", Size: 1}
	u32 := &btf.Int{Name: "u", Size: 4}
	obj := &btf.Struct{Name: "k", Size: 16, Members: []btf.Member{
		{Name: "p", Type: &btf.Pointer{Target: &btf.Fwd{Name: "f"}}}, {Name: "n", Type: u32, Offset: 64},
	}}
	return [][]byte{
		blobOf(t, &btf.Struct{Name: "rxe_a", Size: 4, Members: []btf.Member{{Name: "n", Type: u32}}}),
		blobOf(t, &btf.Struct{Name: "rxe_b", Size: 32, Members: []btf.Member{
			{Name: "o", Type: obj},
			{Name: "q", Type: &btf.Const{Type: &btf.Pointer{Target: obj}}, Offset: 128},
			{Name: "", Offset: 192, Type: &btf.Union{Size: 8, Members: []btf.Member{
				{Name: "x", Type: &btf.Typedef{Name: "t", Type: u32}, BitfieldSize: 3},
				{Name: "y", Type: &btf.Array{Index: u32, Type: u8, Nelems: 8}},
			}}},
		}}, &btf.Enum{Name: "rdma_e", Size: 4, Values: []btf.EnumValue{{Name: "E", Value: 1}}}),
		blobOf(t, &btf.Struct{Name: "rxe_c", Size: 20, Members: []btf.Member{
			{Name: "", Type: obj}, {Name: "n", Type: u32, Offset: 128},
		}}),
	}
}

// FuzzTrim feeds arbitrary BTF to the trimmer: it must not panic, and what
// it writes must keep the layout of every root. The checked-in blobs are
// real but tens of KB, far too slow to mutate and minimise; TestTrimCheckedIn
// covers them, and testdata/fuzz/FuzzTrim holds the inputs that found bugs.
func FuzzTrim(f *testing.F) {
	for _, seed := range trimSeeds(f) {
		f.Add(seed)
	}
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

// TestTrimRefuses lists the layouts the trimmer must refuse rather than
// write a blob whose layouts no longer compute: BTF packs a member's offset
// into 24 bits once its struct has a bitfield, and cilium's encoder
// truncates silently; a member without a size (a forward-declared struct by
// value, found by FuzzTrim) leaves every later layout check unable to place
// it; a type holding itself by value (a struct, or a qualifier or typedef
// chain, which once overflowed the stack) has no finite layout.
func TestTrimRefuses(t *testing.T) {
	u32 := &btf.Int{Name: "u32", Size: 4}
	fwd := &btf.Fwd{Name: "ib_device", Kind: btf.FwdStruct}
	self := &btf.Struct{Name: "rxe_self", Size: 8}
	self.Members = []btf.Member{{Name: "n", Type: u32}, {Name: "again", Type: &btf.Typedef{Name: "self_t", Type: self}, Offset: 32}}
	constCycle := &btf.Const{}
	constCycle.Type = &btf.Volatile{Type: constCycle}
	typedefCycle := &btf.Typedef{Name: "loop_t"}
	typedefCycle.Type = typedefCycle
	for _, tc := range []struct {
		name    string
		root    btf.Type
		wantErr error
		wantMsg string
	}{
		{"offset past 24 bits", &btf.Struct{Name: "rxe_huge", Size: 1 << 22, Members: []btf.Member{
			{Name: "bits", Type: u32, BitfieldSize: 3},
			{Name: "far", Type: u32, Offset: 1 << 24},
		}}, ErrUnencodable, "member far at bit 16777216"},
		{"bitfield wider than 8 bits of width", &btf.Struct{Name: "rxe_huge", Size: 1 << 22, Members: []btf.Member{
			{Name: "wide", Type: u32, BitfieldSize: 256},
		}}, ErrUnencodable, "member wide"},
		{"integer wider than 128 bits (found by FuzzTrim)", &btf.Struct{Name: "rxe_wide", Size: 32, Members: []btf.Member{
			{Name: "n", Type: &btf.Int{Name: "u256", Size: 32}},
		}}, ErrUnencodable, `member n: layout not encodable in BTF: integer "u256" of 32 bytes`},
		{"forward-declared struct by value", &btf.Struct{Name: "rxe_fwd", Size: 8, Members: []btf.Member{
			{Name: "n", Type: u32}, {Name: "dev", Type: fwd, Offset: 32},
		}}, ErrUnsized, `member dev: type without a size held by value: Fwd:"ib_device"`},
		{"typedef of a forward declaration", &btf.Struct{Name: "rxe_fwd", Size: 8, Members: []btf.Member{
			{Name: "dev", Type: &btf.Const{Type: &btf.Typedef{Name: "dev_t", Type: fwd}}},
		}}, ErrUnsized, "member dev: "},
		{"array of a forward declaration", &btf.Struct{Name: "rxe_fwd", Size: 8, Members: []btf.Member{
			{Name: "devs", Type: &btf.Array{Index: u32, Type: fwd, Nelems: 2}},
		}}, ErrUnsized, "member devs: "},
		{"in an anonymous union", &btf.Struct{Name: "rxe_fwd", Size: 8, Members: []btf.Member{
			{Name: "", Type: &btf.Union{Size: 8, Members: []btf.Member{{Name: "dev", Type: fwd}}}},
		}}, ErrUnsized, "member (anonymous): member dev: "},
		{"holds itself", self, ErrCycle, "member again: "},
		{"qualifier naming itself (found by FuzzTrim)", &btf.Struct{Name: "rxe_q", Size: 4, Members: []btf.Member{
			{Name: "q", Type: constCycle},
		}}, ErrCycle, "member q: "},
		{"typedef naming itself", &btf.Struct{Name: "rxe_t", Size: 4, Members: []btf.Member{
			{Name: "t", Type: typedefCycle},
		}}, ErrCycle, "member t: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newTrimmer(nil).trim(tc.root)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("got %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tc.wantMsg)
			}
			if testing.Verbose() {
				t.Log(err)
			}
		})
	}
}

// specOf builds a spec of types and what they reference.
func specOf(t testing.TB, types ...btf.Type) *btf.Spec {
	t.Helper()
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

// TestTrimSpecRefusesFwd: the refusal reaches trimSpec's caller with the
// root's name, and a forward declaration behind a pointer is still fine.
func TestTrimSpecRefusesFwd(t *testing.T) {
	u32 := &btf.Int{Name: "u32", Size: 4}
	fwd := &btf.Fwd{Name: "ib_device", Kind: btf.FwdStruct}
	ok := &btf.Struct{Name: "rxe_ok", Size: 16, Members: []btf.Member{
		{Name: "dev", Type: &btf.Pointer{Target: fwd}}, {Name: "n", Type: u32, Offset: 64},
	}}
	bad := &btf.Struct{Name: "rxe_bad", Size: 8, Members: []btf.Member{{Name: "dev", Type: fwd}}}
	_, _, err := trimSpec(specOf(t, ok, bad), nil)
	if !errors.Is(err, ErrUnsized) || !strings.HasPrefix(err.Error(), "rxe_bad: member dev: ") {
		t.Errorf("got %v, want ErrUnsized naming rxe_bad.dev", err)
	}
	spec := specOf(t, ok)
	blob, _, err := trimSpec(spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyTrimmed(spec, blob, nil); err != nil {
		t.Error(err)
	}
}

// TestTrimKeepsAnonymousNamed: a named kernel struct embedded as an
// anonymous member (-fms-extensions style) is flattened into its parent by
// the layout checks, so it must keep its members even though it holds
// pointers; the same struct as a named member stays whole too (one copy).
// Found by FuzzTrim.
func TestTrimKeepsAnonymousNamed(t *testing.T) {
	u32 := &btf.Int{Name: "u32", Size: 4}
	kobj := &btf.Struct{Name: "kobj", Size: 16, Members: []btf.Member{
		{Name: "p", Type: &btf.Pointer{Target: u32}}, {Name: "refs", Type: u32, Offset: 64},
	}}
	root := &btf.Struct{Name: "rxe_anon", Size: 20, Members: []btf.Member{
		{Name: "", Type: &btf.Typedef{Name: "kobj_t", Type: kobj}},
		{Name: "n", Type: u32, Offset: 128},
	}}
	spec := specOf(t, root)
	blob, _, err := trimSpec(spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyTrimmed(spec, blob, nil); err != nil {
		t.Fatal(err)
	}
	trimmed, err := btf.LoadSpecFromReader(bytes.NewReader(blob))
	if err != nil {
		t.Fatal(err)
	}
	var got *btf.Struct
	if err := trimmed.TypeByName("kobj", &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Members) != 2 {
		t.Errorf("kobj kept %d members, want 2", len(got.Members))
	}
}

// TestTrimSeeds: every FuzzTrim seed trims cleanly, so the fuzzer starts
// from inputs that reach the writer and the check, not an early error.
func TestTrimSeeds(t *testing.T) {
	for i, seed := range trimSeeds(t) {
		spec, err := btf.LoadSpecFromReader(bytes.NewReader(seed))
		if err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
		blob, roots, err := trimSpec(spec, nil)
		if err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
		if roots == 0 {
			t.Errorf("seed %d: no roots", i)
		}
		if err := verifyTrimmed(spec, blob, nil); err != nil {
			t.Errorf("seed %d: %v", i, err)
		}
	}
}
