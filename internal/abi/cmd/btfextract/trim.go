package main

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cilium/ebpf/btf"
)

// ErrUnexpectedType reports a type that cannot appear in a struct's layout
// once pointers are cut, such as a function or a variable.
var ErrUnexpectedType = errors.New("unexpected BTF type in a layout")

// rootPrefixes select the types kept in a trimmed blob: the uverbs, rxe and
// mlx5 UAPI structs and their enums. Kernel-internal types sharing these
// prefixes come along; they are cheap once pointers are cut.
var rootPrefixes = []string{
	"ib_uverbs_", "rxe_", "mminfo", "mlx5_ib_", "mlx5_wqe_", "mlx5_cqe", "mlx5_err_cqe", "rdma_",
}

// isRoot reports whether a named type is kept whole in the trimmed blob.
func isRoot(name string, extra map[string]bool) bool {
	if extra[name] {
		return true
	}
	for _, p := range rootPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// trimmer rewrites the types reachable from the roots into a small,
// standalone graph that keeps every size and offset a layout check reads.
//
// Pointers become void pointers: a pointer's size does not depend on what it
// points to, and following them drags in the whole kernel object graph.
// A named struct or union that is not a root and holds pointers is a
// kernel-internal object no Go mirror describes; it becomes an opaque struct
// or union of the same name and size. Plain-data types (integers, enums,
// arrays and structs of them, the shape of every UAPI struct) are kept
// whole. Qualifiers and type tags are dropped; they carry no layout.
type trimmer struct {
	extra   map[string]bool
	copies  map[btf.Type]btf.Type
	plain   map[btf.Type]bool
	voidPtr *btf.Pointer
}

func newTrimmer(extra map[string]bool) *trimmer {
	return &trimmer{
		extra:   extra,
		copies:  make(map[btf.Type]btf.Type),
		plain:   make(map[btf.Type]bool),
		voidPtr: &btf.Pointer{Target: &btf.Void{}},
	}
}

// isPlain reports whether t holds no pointers, looking through members,
// arrays and typedefs. Cycles only run through pointers, so a type seen again
// while it is still being decided is already known not to be plain.
func (tr *trimmer) isPlain(t btf.Type) bool {
	if p, ok := tr.plain[t]; ok {
		return p
	}
	tr.plain[t] = false
	var p bool
	switch v := t.(type) {
	case *btf.Int, *btf.Enum, *btf.Float, *btf.Void, *btf.Fwd:
		p = true
	case *btf.Typedef:
		p = tr.isPlain(v.Type)
	case *btf.Volatile:
		p = tr.isPlain(v.Type)
	case *btf.Const:
		p = tr.isPlain(v.Type)
	case *btf.Restrict:
		p = tr.isPlain(v.Type)
	case *btf.TypeTag:
		p = tr.isPlain(v.Type)
	case *btf.Array:
		p = tr.isPlain(v.Type)
	case *btf.Struct:
		p = tr.allPlain(v.Members)
	case *btf.Union:
		p = tr.allPlain(v.Members)
	}
	tr.plain[t] = p
	return p
}

func (tr *trimmer) allPlain(members []btf.Member) bool {
	for _, m := range members {
		if !tr.isPlain(m.Type) {
			return false
		}
	}
	return true
}

// trim returns the rewritten copy of t.
func (tr *trimmer) trim(t btf.Type) (btf.Type, error) {
	if c, ok := tr.copies[t]; ok {
		return c, nil
	}
	switch v := t.(type) {
	case *btf.Void:
		return v, nil
	case *btf.Pointer:
		return tr.voidPtr, nil
	case *btf.Volatile:
		return tr.trim(v.Type)
	case *btf.Const:
		return tr.trim(v.Type)
	case *btf.Restrict:
		return tr.trim(v.Type)
	case *btf.TypeTag:
		return tr.trim(v.Type)
	case *btf.Int:
		c := *v
		tr.copies[t] = &c
		return &c, nil
	case *btf.Float:
		c := *v
		tr.copies[t] = &c
		return &c, nil
	case *btf.Fwd:
		c := *v
		tr.copies[t] = &c
		return &c, nil
	case *btf.Enum:
		c := *v
		c.Values = slices.Clone(v.Values)
		tr.copies[t] = &c
		return &c, nil
	case *btf.Typedef:
		c := &btf.Typedef{Name: v.Name}
		tr.copies[t] = c
		target, err := tr.trim(v.Type)
		if err != nil {
			return nil, err
		}
		c.Type = target
		return c, nil
	case *btf.Array:
		c := &btf.Array{Nelems: v.Nelems}
		tr.copies[t] = c
		var err error
		if c.Index, err = tr.trim(v.Index); err != nil {
			return nil, err
		}
		if c.Type, err = tr.trim(v.Type); err != nil {
			return nil, err
		}
		return c, nil
	case *btf.Struct:
		if tr.opaque(v.Name, v) {
			c := &btf.Struct{Name: v.Name, Size: v.Size}
			tr.copies[t] = c
			return c, nil
		}
		c := &btf.Struct{Name: v.Name, Size: v.Size}
		tr.copies[t] = c
		members, err := tr.trimMembers(v.Members)
		c.Members = members
		return c, err
	case *btf.Union:
		if tr.opaque(v.Name, v) {
			c := &btf.Union{Name: v.Name, Size: v.Size}
			tr.copies[t] = c
			return c, nil
		}
		c := &btf.Union{Name: v.Name, Size: v.Size}
		tr.copies[t] = c
		members, err := tr.trimMembers(v.Members)
		c.Members = members
		return c, err
	default:
		return nil, fmt.Errorf("%w: %v", ErrUnexpectedType, t)
	}
}

// opaque reports whether a struct or union is reduced to its name and size.
// Anonymous ones are part of their parent's definition and stay whole.
func (tr *trimmer) opaque(name string, t btf.Type) bool {
	return name != "" && !isRoot(name, tr.extra) && !tr.isPlain(t)
}

// ErrUnencodable reports members BTF cannot encode: once a struct has a
// bitfield, each member's offset gets 24 bits and its width 8, and the
// encoder would silently truncate anything larger.
var ErrUnencodable = errors.New("member layout not encodable in BTF")

func (tr *trimmer) trimMembers(members []btf.Member) ([]btf.Member, error) {
	if slices.ContainsFunc(members, func(m btf.Member) bool { return m.BitfieldSize > 0 }) {
		for _, m := range members {
			if m.Offset >= 1<<24 || m.BitfieldSize >= 1<<8 {
				return nil, fmt.Errorf("%w: member %s at bit %d, width %d", ErrUnencodable, m.Name, m.Offset, m.BitfieldSize)
			}
		}
	}
	out := make([]btf.Member, len(members))
	for i, m := range members {
		typ, err := tr.trim(m.Type)
		if err != nil {
			return nil, fmt.Errorf("member %s: %w", m.Name, err)
		}
		out[i] = btf.Member{Name: m.Name, Type: typ, Offset: m.Offset, BitfieldSize: m.BitfieldSize}
	}
	return out, nil
}

// selectRoots lists the named structs, unions and enums of spec's own types
// (for split BTF, the module's, not vmlinux's) that a trimmed blob keeps,
// sorted so that the blob is the same on every run.
func selectRoots(spec *btf.Spec, extra map[string]bool) ([]btf.Type, error) {
	var roots []btf.Type
	for t, err := range spec.All() {
		if err != nil {
			return nil, err
		}
		switch t.(type) {
		case *btf.Struct, *btf.Union, *btf.Enum:
		default:
			continue
		}
		if name := t.TypeName(); name != "" && isRoot(name, extra) {
			roots = append(roots, t)
		}
	}
	slices.SortStableFunc(roots, func(a, b btf.Type) int {
		return cmp.Or(cmp.Compare(a.TypeName(), b.TypeName()), cmp.Compare(kindOrder(a), kindOrder(b)))
	})
	return roots, nil
}

func kindOrder(t btf.Type) int {
	switch t.(type) {
	case *btf.Struct:
		return 0
	case *btf.Union:
		return 1
	default:
		return 2
	}
}

// trimSpec builds a standalone little-endian BTF blob holding the roots of
// spec and what they need, and returns it with the number of roots.
func trimSpec(spec *btf.Spec, extra map[string]bool) ([]byte, int, error) {
	roots, err := selectRoots(spec, extra)
	if err != nil {
		return nil, 0, err
	}
	tr := newTrimmer(extra)
	trimmed := make([]btf.Type, 0, len(roots))
	for _, r := range roots {
		t, err := tr.trim(r)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", r.TypeName(), err)
		}
		trimmed = append(trimmed, t)
	}
	b, err := btf.NewBuilder(trimmed, nil)
	if err != nil {
		return nil, 0, err
	}
	blob, err := b.Marshal(nil, &btf.MarshalOptions{Order: binary.LittleEndian})
	if err != nil {
		return nil, 0, err
	}
	return blob, len(roots), nil
}
