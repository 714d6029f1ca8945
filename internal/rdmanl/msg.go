package rdmanl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// Netlink is host-endian; the project only targets little-endian hosts with
// uverbs, but the code says what it means.
var ne = binary.NativeEndian

// ErrMalformed is matched (errors.Is) by every error about bytes that are not
// a well-formed netlink message or attribute.
var ErrMalformed = errors.New("malformed netlink data")

// FormatError says what is wrong with a netlink message or attribute and at
// which byte offset of the buffer it was found.
type FormatError struct {
	What   string // e.g. "attribute length 2 is shorter than its header"
	Offset int
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("rdmanl: %s (at byte %d)", e.What, e.Offset)
}

func (e *FormatError) Unwrap() error { return ErrMalformed }

func formatErr(off int, format string, args ...any) error {
	return &FormatError{What: fmt.Sprintf(format, args...), Offset: off}
}

// Message is one netlink message: its header fields and the payload after the
// 16-byte header. For RDMA nldev messages the payload is a list of attributes
// (there is no family header).
type Message struct {
	Type    uint16
	Flags   uint16
	Seq     uint32
	PID     uint32
	Payload []byte // aliases the parsed buffer
}

// ParseMessages splits a buffer received from a netlink socket into messages.
// Every length is checked against the buffer; nothing is read out of bounds.
func ParseMessages(b []byte) ([]Message, error) {
	var msgs []Message
	off := 0
	for off < len(b) {
		rest := b[off:]
		if len(rest) < nlmsgHdrLen {
			return msgs, formatErr(off, "%d trailing bytes are too short for a message header", len(rest))
		}
		n := int(ne.Uint32(rest[0:4]))
		if n < nlmsgHdrLen {
			return msgs, formatErr(off, "message length %d is shorter than its header", n)
		}
		if n > len(rest) {
			return msgs, formatErr(off, "message length %d runs past the %d bytes left", n, len(rest))
		}
		msgs = append(msgs, Message{
			Type:    ne.Uint16(rest[4:6]),
			Flags:   ne.Uint16(rest[6:8]),
			Seq:     ne.Uint32(rest[8:12]),
			PID:     ne.Uint32(rest[12:16]),
			Payload: rest[nlmsgHdrLen:n:n],
		})
		// The last message of a datagram need not be padded.
		off += min(align(n), len(rest))
	}
	return msgs, nil
}

func align(n int) int { return (n + nlaAlignTo - 1) &^ (nlaAlignTo - 1) }

// Attr is one netlink attribute. Type has the NLA_F_NESTED and
// NLA_F_NET_BYTEORDER bits removed.
type Attr struct {
	Type uint16
	Data []byte // aliases the parsed buffer
}

// ParseAttrs parses a list of attributes, checking every length against the
// buffer.
func ParseAttrs(b []byte) ([]Attr, error) {
	var attrs []Attr
	off := 0
	for off < len(b) {
		rest := b[off:]
		if len(rest) < nlaHdrLen {
			return attrs, formatErr(off, "%d trailing bytes are too short for an attribute header", len(rest))
		}
		n := int(ne.Uint16(rest[0:2]))
		if n < nlaHdrLen {
			return attrs, formatErr(off, "attribute length %d is shorter than its header", n)
		}
		if n > len(rest) {
			return attrs, formatErr(off, "attribute length %d runs past the %d bytes left", n, len(rest))
		}
		attrs = append(attrs, Attr{Type: ne.Uint16(rest[2:4]) & nlaTypeMask, Data: rest[nlaHdrLen:n:n]})
		off += min(align(n), len(rest))
	}
	return attrs, nil
}

// Attrs gives typed, length-checked access to a message's attributes by
// type. If the kernel repeats an attribute the last one wins, as with
// libnl's nla_parse; tables of repeated entries are read with ParseAttrs.
type Attrs map[uint16][]byte

// NewAttrs parses payload (a message's payload or a nested attribute's
// data) into Attrs.
func NewAttrs(payload []byte) (Attrs, error) {
	attrs, err := ParseAttrs(payload)
	if err != nil {
		return nil, err
	}
	s := make(Attrs, len(attrs))
	for _, a := range attrs {
		s[a.Type] = a.Data
	}
	return s, nil
}

func newAttrSet(payload []byte) (Attrs, error) { return NewAttrs(payload) }

// Has reports whether the attribute is present.
func (s Attrs) Has(t uint16) bool { _, ok := s[t]; return ok }

// Nested parses the list of attributes inside attribute t (a table of
// entries); a missing attribute gives an empty list.
func (s Attrs) Nested(t uint16) ([]Attr, error) {
	d, ok := s[t]
	if !ok {
		return nil, nil
	}
	return ParseAttrs(d)
}

// OptU8 returns attribute t as a u8, or 0 if it is absent.
func (s Attrs) OptU8(t uint16) (uint8, error) {
	if !s.Has(t) {
		return 0, nil
	}
	return s.U8(t)
}

// OptU32 returns attribute t as a u32, or 0 if it is absent.
func (s Attrs) OptU32(t uint16) (uint32, error) {
	if !s.Has(t) {
		return 0, nil
	}
	return s.U32(t)
}

// OptU64 returns attribute t as a u64, or 0 if it is absent.
func (s Attrs) OptU64(t uint16) (uint64, error) {
	if !s.Has(t) {
		return 0, nil
	}
	return s.U64(t)
}

// OptStr returns attribute t as a string, or "" if it is absent.
func (s Attrs) OptStr(t uint16) string {
	v, _ := s.Str(t)
	return v
}

// U8 returns attribute t as a u8; missing or short is an error matching ErrMalformed.
func (s Attrs) U8(t uint16) (uint8, error) {
	d, err := s.fixed(t, 1)
	if err != nil {
		return 0, err
	}
	return d[0], nil
}

// U32 returns attribute t as a u32; missing or short is an error matching ErrMalformed.
func (s Attrs) U32(t uint16) (uint32, error) {
	d, err := s.fixed(t, 4)
	if err != nil {
		return 0, err
	}
	return ne.Uint32(d), nil
}

// U64 returns attribute t as a u64; missing or short is an error matching ErrMalformed.
func (s Attrs) U64(t uint16) (uint64, error) {
	d, err := s.fixed(t, 8)
	if err != nil {
		return 0, err
	}
	return ne.Uint64(d), nil
}

// fixed returns the attribute's payload if it is at least n bytes long, as
// libnl's NLA_U8/U32/U64 policies require.
func (s Attrs) fixed(t uint16, n int) ([]byte, error) {
	d, ok := s[t]
	if !ok {
		return nil, &MissingAttrError{Type: t}
	}
	if len(d) < n {
		return nil, &FormatError{What: fmt.Sprintf("attribute %d has %d bytes, want %d", t, len(d), n)}
	}
	return d[:n], nil
}

// Str returns a string attribute without its NUL terminator. The kernel
// always terminates them (nla_put_string); a missing NUL is accepted, and
// anything after the first NUL is ignored.
func (s Attrs) Str(t uint16) (string, error) {
	d, ok := s[t]
	if !ok {
		return "", &MissingAttrError{Type: t}
	}
	if i := strings.IndexByte(string(d), 0); i >= 0 {
		d = d[:i]
	}
	return string(d), nil
}

// MissingAttrError reports a reply that lacks an attribute the request needs.
type MissingAttrError struct{ Type uint16 }

func (e *MissingAttrError) Error() string {
	return fmt.Sprintf("rdmanl: reply has no attribute %d", e.Type)
}

func (e *MissingAttrError) Unwrap() error { return ErrMalformed }

// AppendRequest appends a request message with the given attributes to b.
// Attributes are added with AppendAttr and friends.
func AppendRequest(b []byte, typ, flags uint16, seq uint32, attrs []byte) []byte {
	n := nlmsgHdrLen + len(attrs)
	b = ne.AppendUint32(b, uint32(n))
	b = ne.AppendUint16(b, typ)
	b = ne.AppendUint16(b, flags)
	b = ne.AppendUint32(b, seq)
	b = ne.AppendUint32(b, 0) // the kernel fills in our port id
	return append(b, attrs...)
}

// AppendAttr appends one attribute, padded to 4 bytes.
func AppendAttr(b []byte, typ uint16, data []byte) []byte {
	b = ne.AppendUint16(b, uint16(nlaHdrLen+len(data)))
	b = ne.AppendUint16(b, typ)
	b = append(b, data...)
	for len(b)%nlaAlignTo != 0 {
		b = append(b, 0)
	}
	return b
}

// AppendU32Attr appends a u32 attribute.
func AppendU32Attr(b []byte, typ uint16, v uint32) []byte {
	return AppendAttr(b, typ, ne.AppendUint32(nil, v))
}

// AppendStringAttr appends a NUL-terminated string attribute, as
// nla_put_string does.
func AppendStringAttr(b []byte, typ uint16, s string) []byte {
	return AppendAttr(b, typ, append([]byte(s), 0))
}

// Error is an error the kernel returned for a request (an NLMSG_ERROR with a
// negative code, or a dump that ended in error). errors.Is(err, unix.ENODEV)
// and the like work through Unwrap.
type Error struct {
	Op    string // e.g. "get chardev"
	Errno unix.Errno
	Msg   string // the kernel's extended-ack message, if it sent one
}

func (e *Error) Error() string {
	if e.Msg != "" {
		return fmt.Sprintf("rdmanl: %s: %s: %s", e.Op, e.Errno.Error(), e.Msg)
	}
	return fmt.Sprintf("rdmanl: %s: %s", e.Op, e.Errno.Error())
}

func (e *Error) Unwrap() error { return e.Errno }

// parseErrorMsg decodes the payload of NLMSG_ERROR: a negative errno (0 for
// an acknowledgement), the request's header (and body unless capped), then
// extended-ack attributes if the flags say so.
func parseErrorMsg(m Message) (errno unix.Errno, extMsg string, err error) {
	if len(m.Payload) < 4 {
		return 0, "", formatErr(nlmsgHdrLen, "error message has %d bytes, want at least 4", len(m.Payload))
	}
	code := int32(ne.Uint32(m.Payload[0:4]))
	if code > 0 {
		return 0, "", formatErr(nlmsgHdrLen, "error message carries positive code %d", code)
	}
	errno = unix.Errno(-code)
	if m.Flags&NLM_F_ACK_TLVS == 0 || len(m.Payload) < 4+nlmsgHdrLen {
		return errno, "", nil
	}
	// Skip the echoed request: its header, and its body unless capped.
	skip := 4 + nlmsgHdrLen
	if m.Flags&NLM_F_CAPPED == 0 {
		echoed := int(ne.Uint32(m.Payload[4:8]))
		if echoed < nlmsgHdrLen || 4+echoed > len(m.Payload) {
			return errno, "", nil
		}
		skip = 4 + align(echoed)
	}
	if skip > len(m.Payload) {
		return errno, "", nil
	}
	attrs, perr := newAttrSet(m.Payload[skip:])
	if perr != nil {
		return errno, "", nil // the errno is what matters; the message is a bonus
	}
	extMsg, _ = attrs.Str(NLMSGERR_ATTR_MSG)
	return errno, extMsg, nil
}

// AppendU8Attr appends a u8 attribute.
func AppendU8Attr(b []byte, typ uint16, v uint8) []byte {
	return AppendAttr(b, typ, []byte{v})
}

// AppendU64Attr appends a u64 attribute.
func AppendU64Attr(b []byte, typ uint16, v uint64) []byte {
	return AppendAttr(b, typ, ne.AppendUint64(nil, v))
}
