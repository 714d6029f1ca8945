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

// ErrUnsized reports a member whose type has no size, such as a struct that
// is only forward-declared, held by value. C rejects such a member;
// BTF can still describe it, but no layout containing it can be computed.
var ErrUnsized = errors.New("type without a size held by value")

// ErrCycle reports a type that contains itself by value, not through a
// pointer: a struct holding itself, a typedef or qualifier naming itself.
// C rejects all of them; none has a finite layout.
var ErrCycle = errors.New("type contains itself by value")

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
// or union of the same name and size, unless some struct embeds it as an
// anonymous member: a layout check flattens anonymous members into their
// parent, so their members must survive. Plain-data types (integers, enums,
// arrays and structs of them, the shape of every UAPI struct) are kept
// whole. Qualifiers and type tags are dropped; they carry no layout.
//
// What it cannot lay out it refuses rather than writes: a member of a type
// without a size (ErrUnsized), a type holding itself by value (ErrCycle),
// a member or integer BTF cannot encode (ErrUnencodable).
type trimmer struct {
	extra     map[string]bool
	copies    map[btf.Type]btf.Type
	plain     map[btf.Type]bool
	anonymous map[btf.Type]bool // structs and unions embedded as anonymous members
	expanding map[btf.Type]bool // types whose copy is being made (see trim)
	voidPtr   *btf.Pointer
}

func newTrimmer(extra map[string]bool) *trimmer {
	return &trimmer{
		extra:     extra,
		copies:    make(map[btf.Type]btf.Type),
		plain:     make(map[btf.Type]bool),
		anonymous: make(map[btf.Type]bool),
		expanding: make(map[btf.Type]bool),
		voidPtr:   &btf.Pointer{Target: &btf.Void{}},
	}
}

// markAnonymous records the structs and unions that some struct or union of
// spec embeds as an anonymous member, looking through typedefs and
// qualifiers as a layout check does.
func (tr *trimmer) markAnonymous(spec *btf.Spec) error {
	for t, err := range spec.All() {
		if err != nil {
			return err
		}
		var members []btf.Member
		switch v := t.(type) {
		case *btf.Struct:
			members = v.Members
		case *btf.Union:
			members = v.Members
		}
		for _, m := range members {
			if m.Name != "" {
				continue
			}
			switch inner := btf.UnderlyingType(m.Type).(type) {
			case *btf.Struct, *btf.Union:
				tr.anonymous[inner] = true
			}
		}
	}
	return nil
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
	if tr.expanding[t] {
		// Reached again while its own copy is being made; pointers are
		// cut, so this path runs by value.
		return nil, fmt.Errorf("%w: %v", ErrCycle, t)
	}
	if c, ok := tr.copies[t]; ok {
		return c, nil
	}
	tr.expanding[t] = true
	defer delete(tr.expanding, t)
	return tr.copy(t)
}

// copy makes the rewritten copy of t, which has none yet.
func (tr *trimmer) copy(t btf.Type) (btf.Type, error) {
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
		if v.Size > maxIntSize {
			// BTF stores an integer's width in bits in one byte, and
			// cilium's encoder truncates it silently.
			return nil, fmt.Errorf("%w: integer %q of %d bytes, more than %d", ErrUnencodable, v.Name, v.Size, maxIntSize)
		}
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
// Anonymous ones are part of their parent's definition and stay whole, and
// so does a named one that is embedded as an anonymous member.
func (tr *trimmer) opaque(name string, t btf.Type) bool {
	return name != "" && !isRoot(name, tr.extra) && !tr.anonymous[t] && !tr.isPlain(t)
}

// ErrUnencodable reports layouts BTF cannot encode: once a struct has a
// bitfield, each member's offset gets 24 bits and its width 8, and an
// integer's width in bits gets 8 (the kernel allows at most 128); the
// encoder would silently truncate anything larger.
var ErrUnencodable = errors.New("layout not encodable in BTF")

// maxIntSize is the widest BTF integer, in bytes (__int128).
const maxIntSize = 16

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
			return nil, fmt.Errorf("member %s: %w", memberName(m), err)
		}
		// Every kept member must have a size, or no layout check can place
		// the ones after it; a forward-declared struct by value has none.
		if _, err := btf.Sizeof(typ); err != nil {
			return nil, fmt.Errorf("member %s: %w: %v (%v)", memberName(m), ErrUnsized, m.Type, err)
		}
		out[i] = btf.Member{Name: m.Name, Type: typ, Offset: m.Offset, BitfieldSize: m.BitfieldSize}
	}
	return out, nil
}

func memberName(m btf.Member) string {
	if m.Name == "" {
		return "(anonymous)"
	}
	return m.Name
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
	if err := tr.markAnonymous(spec); err != nil {
		return nil, 0, err
	}
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
