// Package btfcheck compares the Go mirrors of kernel structs in package abi
// with the kernel's own description of those structs in BTF.
//
// A hand-written mirror can drift from the kernel silently: a field of the
// wrong width or a forgotten reserved word shifts every later offset, and the
// kernel then reads garbage or rejects the command. BTF is the compiler's
// record of the real layout, so checking against it catches that before a
// test ever reaches a device.
//
// Matching rules: a Go field matches the C member whose name is equal once
// both are lowercased and stripped of underscores (HCAVA ~ hca_va). A C
// union, or a named member of anonymous struct type, is mirrored by one Go
// field of the same size; an anonymous union or struct may be mirrored either
// by its members or by one Go field named after one of its members that spans
// the whole of it. Flexible array members have no Go field. Bitfields are
// mirrored by one Go field spanning their storage. Go blank (_) fields are
// padding.
//
// The uverbs ABI only grows, into reserved bytes and at the end of a struct,
// so one mirror checked against kernels of different ages meets reserved
// bytes (members named reserved*, rsvd*, resv*, pad*) on one side that the
// other side has put to use. Those differences are reported as compatible
// ([Problem.Compatible]) rather than as errors.
package btfcheck

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/cilium/ebpf/btf"

	"github.com/goverbs/goverbs/internal/abi"
)

// ErrNotInBTF reports that the struct a Layout names is absent from the BTF
// searched. Module BTF only holds the types the module's code uses, so some
// UAPI structs are missing from it; that is not a layout mismatch.
var ErrNotInBTF = errors.New("struct not in BTF")

// ErrBadLayout reports a Layout that cannot be checked at all, such as one
// whose Go value is not a struct.
var ErrBadLayout = errors.New("bad layout entry")

// Problem is one difference between a Go mirror and the kernel struct.
type Problem struct {
	// Path names the struct or member, in C terms:
	// "ib_uverbs_query_port_resp" or "ib_uverbs_query_port_resp.lid".
	Path string
	// Detail says what differs, e.g. "Go offset 20, kernel 22".
	Detail string
	// Compatible marks a difference the additive-only ABI allows: bytes
	// one side reserves that the other side's newer definition uses. Such
	// a mirror works with this kernel; it is worth knowing, not fixing.
	Compatible bool
}

func (p Problem) String() string {
	if p.Compatible {
		return p.Path + ": " + p.Detail + " (compatible)"
	}
	return p.Path + ": " + p.Detail
}

// Check compares l.Go with the struct or union named l.C in spec: the total
// size, each Go field's offset and size against the C member of the same
// name, and that each C member is covered by a Go field. Nested Go structs
// matched to C structs are checked the same way, their problems named after
// the nested C type.
//
// It returns an error wrapping [ErrNotInBTF] when spec has no struct or union
// of that name, and one wrapping [ErrBadLayout] when l.Go is not a struct.
func Check(spec *btf.Spec, l abi.Layout) ([]Problem, error) {
	goType := reflect.TypeOf(l.Go)
	if goType != nil && goType.Kind() == reflect.Pointer {
		goType = goType.Elem()
	}
	if goType == nil || goType.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%s: Go value %T is not a struct: %w", l.C, l.Go, ErrBadLayout)
	}

	candidates, err := lookup(spec, l.C)
	if errors.Is(err, ErrNotInBTF) {
		where := "BTF"
		if l.Module != "" {
			where = "BTF of module " + l.Module
		}
		return nil, fmt.Errorf("struct %s not in %s: %w", l.C, where, err)
	}
	if err != nil {
		return nil, fmt.Errorf("look up struct %s: %w", l.C, err)
	}

	// A module can carry two definitions of one name (rare, when dedup keeps
	// both); the Go mirror is right if it matches either, so report against
	// the closest one.
	var best []Problem
	for i, c := range candidates {
		problems := compare(l.C, c, goType)
		if i == 0 || incompatible(problems) < incompatible(best) {
			best = problems
		}
	}
	return best, nil
}

func incompatible(problems []Problem) int {
	n := 0
	for _, p := range problems {
		if !p.Compatible {
			n++
		}
	}
	return n
}

// lookup finds the structs and unions called name. Only these kinds count:
// a Fwd or typedef of the same name says nothing about the layout.
func lookup(spec *btf.Spec, name string) ([]composite, error) {
	if spec == nil {
		return nil, fmt.Errorf("no BTF: %w", ErrNotInBTF)
	}
	types, err := spec.AnyTypesByName(name)
	if err != nil && !errors.Is(err, btf.ErrNotFound) {
		return nil, err
	}
	var found []composite
	for _, t := range types {
		switch t.(type) {
		case *btf.Struct, *btf.Union:
			c, _ := asComposite(t)
			found = append(found, c)
		}
	}
	if len(found) == 0 {
		return nil, ErrNotInBTF
	}
	return found, nil
}

// composite is a struct or union, seen through the fields both have.
type composite struct {
	name    string
	size    uint32
	union   bool
	members []btf.Member
}

func asComposite(t btf.Type) (composite, bool) {
	switch v := btf.UnderlyingType(t).(type) {
	case *btf.Struct:
		return composite{v.Name, v.Size, false, v.Members}, true
	case *btf.Union:
		return composite{v.Name, v.Size, true, v.Members}, true
	}
	return composite{}, false
}

// cMember is one member of a C struct, with anonymous structs and unions
// flattened into their parent: offsets and sizes are in bits from the start
// of the outermost struct.
type cMember struct {
	name     string
	offset   uint64
	size     uint64
	bitfield bool
	flex     bool
	typ      btf.Type
	// enclosing lists the anonymous members this one sits in, outermost
	// first, so that one Go field may stand for a whole anonymous union.
	enclosing []span
	matched   bool
}

// span is a byte range.
type span struct{ offset, size uint64 }

func (s span) end() uint64 { return s.offset + s.size }

// maxAnonymousDepth bounds how deep anonymous structs and unions nest; real
// code nests a few levels, and a deeper chain is a cycle in corrupt BTF.
const maxAnonymousDepth = 32

// flatten lists the members of c, descending into anonymous members.
func flatten(c composite, base uint64, enclosing []span, out []cMember) ([]cMember, error) {
	if len(enclosing) > maxAnonymousDepth {
		return nil, errors.New("anonymous members nested too deep")
	}
	for _, m := range c.members {
		offset := base + uint64(m.Offset)
		if m.Name == "" {
			inner, ok := asComposite(m.Type)
			if !ok {
				// An unnamed member that is not a struct or union is padding
				// the compiler never emits; skip it rather than guess.
				continue
			}
			anon := span{offset / 8, uint64(inner.size)}
			var err error
			out, err = flatten(inner, offset, append(enclosing[:len(enclosing):len(enclosing)], anon), out)
			if err != nil {
				return nil, err
			}
			continue
		}
		member := cMember{name: m.Name, offset: offset, typ: m.Type, enclosing: enclosing}
		if m.BitfieldSize > 0 {
			member.size = uint64(m.BitfieldSize)
			member.bitfield = true
		} else {
			size, err := btf.Sizeof(m.Type)
			if err != nil {
				return nil, fmt.Errorf("member %s: %w", m.Name, err)
			}
			member.size = uint64(size) * 8
			if arr, ok := btf.UnderlyingType(m.Type).(*btf.Array); ok && arr.Nelems == 0 {
				member.flex = true
			}
		}
		out = append(out, member)
	}
	return out, nil
}

// normalize maps both Go and C names onto one spelling.
func normalize(name string) string {
	return strings.ToLower(strings.ReplaceAll(name, "_", ""))
}

func compare(path string, c composite, goType reflect.Type) []Problem {
	var problems []Problem
	report := func(p, format string, args ...any) {
		problems = append(problems, Problem{Path: p, Detail: fmt.Sprintf(format, args...)})
	}
	compatible := func(p, format string, args ...any) {
		problems = append(problems, Problem{Path: p, Detail: fmt.Sprintf(format, args...), Compatible: true})
	}

	if uint64(goType.Size()) != uint64(c.size) {
		report(path, "Go size %d, kernel %d", goType.Size(), c.size)
	}

	members, err := flatten(c, 0, nil, nil)
	if err != nil {
		report(path, "cannot read kernel layout: %v", err)
		return problems
	}
	byName := make(map[string]int, len(members))
	for i, m := range members {
		if _, dup := byName[normalize(m.name)]; !dup {
			byName[normalize(m.name)] = i
		}
	}

	// covered collects the byte ranges of Go fields that stand for kernel
	// members, so that union alternatives and bitfields under them count as
	// mirrored. reserved marks Go padding and reserved fields: a kernel
	// member under one of those is mirrored only in the additive sense.
	var covered, coveredReserved []span
	cover := func(s span, reserved bool) {
		if reserved {
			coveredReserved = append(coveredReserved, s)
		} else {
			covered = append(covered, s)
		}
	}
	for i := range goType.NumField() {
		field := goType.Field(i)
		goSpan := span{uint64(field.Offset), uint64(field.Type.Size())}
		if why := platformDependent(field.Type); why != "" {
			report(path, "Go field %s has type %s, whose %s", field.Name, field.Type, why)
		}
		if field.Name == "_" {
			cover(goSpan, true)
			continue
		}

		idx, ok := byName[normalize(field.Name)]
		if !ok {
			if bitfieldStorage(members, goSpan) {
				cover(goSpan, false)
				continue
			}
			if r := reservedHolding(members, goSpan); r != nil {
				compatible(path, "Go field %s (offset %d, size %d) lies in kernel member %s (offset %d, size %d); the kernel predates it",
					field.Name, goSpan.offset, goSpan.size, r.name, r.offset/8, r.size/8)
				cover(goSpan, false)
				continue
			}
			report(path, "Go field %s (offset %d, size %d) matches no kernel member", field.Name, goSpan.offset, goSpan.size)
			continue
		}
		m := &members[idx]
		m.matched = true
		memberPath := path + "." + m.name

		if m.bitfield {
			if goSpan.offset*8 > m.offset || goSpan.end()*8 < m.offset+m.size {
				report(memberPath, "Go field %s (bytes %d..%d) does not hold the bitfield (bits %d..%d)",
					field.Name, goSpan.offset, goSpan.end(), m.offset, m.offset+m.size)
				continue
			}
			cover(goSpan, false)
			continue
		}

		cSpan := span{m.offset / 8, m.size / 8}
		switch {
		case goSpan == cSpan:
			cover(goSpan, isReserved(m.name))
			problems = append(problems, nested(memberPath, m, field.Type)...)
		case spansAnonymous(m, goSpan):
			cover(goSpan, false)
		case isReserved(m.name) && (contains(cSpan, goSpan) || contains(goSpan, cSpan)):
			// Reserved bytes one side has and the other has put to use.
			compatible(memberPath, "Go bytes %d..%d, kernel %d..%d; reserved bytes, the rest used by newer fields",
				goSpan.offset, goSpan.end(), cSpan.offset, cSpan.end())
			cover(goSpan, true)
		default:
			if goSpan.offset != cSpan.offset {
				report(memberPath, "Go offset %d, kernel %d", goSpan.offset, cSpan.offset)
			}
			if goSpan.size != cSpan.size {
				report(memberPath, "Go size %d, kernel %d", goSpan.size, cSpan.size)
			}
		}
	}

	all := append(slices.Clip(covered), coveredReserved...)
	for _, m := range members {
		if m.matched || m.flex {
			continue
		}
		first, last := m.offset/8, (m.offset+m.size+7)/8
		switch {
		case within(covered, first, last):
		case within(all, first, last):
			if !isReserved(m.name) {
				compatible(path+"."+m.name, "kernel member (offset %d, size %d) lies in Go reserved bytes; the mirror predates it",
					first, last-first)
			}
		default:
			report(path+"."+m.name, "kernel member (offset %d, size %d) has no Go field", first, last-first)
		}
	}
	return problems
}

// isReserved reports whether a member or field name marks bytes kept for
// later use. The uverbs ABI grows only into such bytes and the struct's
// tail, so these are where kernels and mirrors of different ages differ.
func isReserved(name string) bool {
	n := normalize(name)
	for _, prefix := range []string{"reserved", "rsvd", "resv", "pad"} {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

// contains reports whether inner lies wholly in outer.
func contains(outer, inner span) bool {
	return outer.offset <= inner.offset && inner.end() <= outer.end()
}

// reservedHolding returns the reserved kernel member goSpan lies in, if any.
func reservedHolding(members []cMember, goSpan span) *cMember {
	for i := range members {
		m := &members[i]
		if m.bitfield || !isReserved(m.name) {
			continue
		}
		if contains(span{m.offset / 8, m.size / 8}, goSpan) {
			return m
		}
	}
	return nil
}

// spansAnonymous reports whether goSpan is exactly one of the anonymous
// members m sits in: a Go field named after one alternative of an anonymous
// union, sized like the whole union.
func spansAnonymous(m *cMember, goSpan span) bool {
	for _, s := range m.enclosing {
		if s == goSpan {
			return true
		}
	}
	return false
}

// bitfieldStorage reports whether goSpan holds only whole bitfields: a Go
// field standing for a run of C bitfields may be named after none of them.
func bitfieldStorage(members []cMember, goSpan span) bool {
	found := false
	for _, m := range members {
		first, last := m.offset, m.offset+m.size
		if last <= goSpan.offset*8 || first >= goSpan.end()*8 {
			continue
		}
		if !m.bitfield || first < goSpan.offset*8 || last > goSpan.end()*8 {
			return false
		}
		found = true
	}
	return found
}

// within reports whether the byte range [first, last) is covered by spans.
func within(spans []span, first, last uint64) bool {
	for pos := first; pos < last; {
		advanced := false
		for _, s := range spans {
			if s.offset <= pos && pos < s.end() {
				pos = s.end()
				advanced = true
			}
		}
		if !advanced {
			return false
		}
	}
	return true
}

// nested checks a Go struct field against the C struct or union it mirrors.
// A named C type is reported under its own name, so a problem in a struct
// used in several places reads the same everywhere.
func nested(path string, m *cMember, goType reflect.Type) []Problem {
	if goType.Kind() != reflect.Struct {
		return nil
	}
	c, ok := asComposite(m.typ)
	if !ok {
		return nil
	}
	if c.name != "" {
		path = c.name
	}
	return compare(path, c, goType)
}

// platformDependent says why t has no fixed size across architectures, or ""
// if it has one. The kernel ABI uses fixed-width types only.
func platformDependent(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Uint, reflect.Uintptr:
		return "size depends on GOARCH"
	case reflect.Pointer, reflect.UnsafePointer, reflect.Slice, reflect.String, reflect.Map,
		reflect.Chan, reflect.Func, reflect.Interface:
		return "values hold Go pointers or headers, not kernel data"
	case reflect.Array:
		return platformDependent(t.Elem())
	}
	return ""
}
