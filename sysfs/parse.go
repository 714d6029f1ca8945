package sysfs

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrMalformed is matched (errors.Is) by every ParseError.
var ErrMalformed = errors.New("malformed sysfs attribute")

// ParseError reports a sysfs file whose contents are not in the format the
// kernel writes. File is empty when the text did not come from a file (the
// Parse functions); the FS methods fill it in.
type ParseError struct {
	File string // path of the file, under the FS root
	Text string // what the file held (cut to 80 bytes)
	Want string // what the kernel would have written, e.g. "a GUID like 0002:c903:0042:43a0"
}

func (e *ParseError) Error() string {
	if e.File == "" {
		return fmt.Sprintf("sysfs: %q is not %s", e.Text, e.Want)
	}
	return fmt.Sprintf("sysfs: %s: %q is not %s", e.File, e.Text, e.Want)
}

func (e *ParseError) Unwrap() error { return ErrMalformed }

func parseErr(text, want string) error {
	if len(text) > 80 {
		text = text[:80]
	}
	return &ParseError{Text: text, Want: want}
}

// inFile names the file in a ParseError returned by a Parse function.
func inFile(err error, file string) error {
	var pe *ParseError
	if errors.As(err, &pe) && pe.File == "" {
		pe.File = file
	}
	return err
}

// trimNL removes the one newline the kernel ends attribute files with, as
// rdma-core's ibv_read_sysfs_file does.
func trimNL(s string) string { return strings.TrimSuffix(s, "\n") }

func hexDigit(c byte) (uint16, bool) {
	switch {
	case '0' <= c && c <= '9':
		return uint16(c - '0'), true
	case 'a' <= c && c <= 'f':
		return uint16(c-'a') + 10, true
	case 'A' <= c && c <= 'F':
		return uint16(c-'A') + 10, true
	}
	return 0, false
}

// parseHexGroups reads n groups of exactly four hex digits separated by
// colons: the layout of both GUID files ("%04x:%04x:%04x:%04x") and GID files
// (%pI6, eight groups). rdma-core reads both with sscanf("%hx") per group at
// a stride of five characters; the kernel always writes four digits, so
// anything else is refused rather than guessed at.
func parseHexGroups(s string, groups []uint16) bool {
	if len(s) != 5*len(groups)-1 {
		return false
	}
	for i := range groups {
		var v uint16
		for j := 0; j < 4; j++ {
			d, ok := hexDigit(s[5*i+j])
			if !ok {
				return false
			}
			v = v<<4 | d
		}
		if i < len(groups)-1 && s[5*i+4] != ':' {
			return false
		}
		groups[i] = v
	}
	return true
}

// ParseGUID parses the contents of a node_guid or sys_image_guid file
// ("0250:56ff:fe8f:c5b3", newline optional).
func ParseGUID(text string) (GUID, error) {
	var g [4]uint16
	if !parseHexGroups(trimNL(text), g[:]) {
		return 0, parseErr(text, "a GUID like 0002:c903:0042:43a0")
	}
	return GUID(g[0])<<48 | GUID(g[1])<<32 | GUID(g[2])<<16 | GUID(g[3]), nil
}

// ParseGID parses the contents of a ports/N/gids/I file: the kernel's %pI6
// form, eight groups of four hex digits ("fe80:0000:0000:0000:...").
func ParseGID(text string) (GID, error) {
	var g [8]uint16
	var out GID
	if !parseHexGroups(trimNL(text), g[:]) {
		return out, parseErr(text, "a GID like fe80:0000:0000:0000:0250:56ff:fe8f:c5b3")
	}
	for i, v := range g {
		out[2*i] = byte(v >> 8)
		out[2*i+1] = byte(v)
	}
	return out, nil
}

// parseNumbered parses the kernel's "%d: %s" attributes (node_type, state,
// phys_state): a decimal number of at most bits bits, a colon, a space and a
// name. The number is what counts; the name is checked only for being
// there. A number too large for bits is refused, not truncated.
func parseNumbered(text string, bits int, want string) (uint64, string, error) {
	s := trimNL(text)
	num, name, ok := strings.Cut(s, ": ")
	if !ok || name == "" || strings.ContainsAny(name, "\n\x00") {
		return 0, "", parseErr(text, want)
	}
	n, err := parseDec(num, bits, want)
	if err != nil {
		return 0, "", parseErr(text, want)
	}
	return n, name, nil
}

// ParseNodeType parses a node_type file ("1: CA"). Numbers the kernel may add
// later are kept; their String is "unknown".
func ParseNodeType(text string) (NodeType, error) {
	n, _, err := parseNumbered(text, 31, `a node type like "1: CA"`)
	return NodeType(n), err
}

// ParsePortState parses a port's state file ("4: ACTIVE"). Numbers the
// kernel may add later are kept; one past 255 is malformed.
func ParsePortState(text string) (PortState, error) {
	n, _, err := parseNumbered(text, 8, `a port state like "4: ACTIVE"`)
	return PortState(n), err
}

// ParsePhysState parses a port's phys_state file ("5: LinkUp"). Numbers the
// kernel may add later are kept; one past 255 is malformed.
func ParsePhysState(text string) (PhysState, error) {
	n, _, err := parseNumbered(text, 8, `a physical port state like "5: LinkUp"`)
	return PhysState(n), err
}

// ParseLinkLayer parses a port's link_layer file. The kernel writes
// "InfiniBand", "Ethernet" or "Unknown"; "Unknown" is LinkLayerUnspecified.
func ParseLinkLayer(text string) (LinkLayer, error) {
	switch trimNL(text) {
	case "InfiniBand":
		return LinkLayerInfiniBand, nil
	case "Ethernet":
		return LinkLayerEthernet, nil
	case "Unknown":
		return LinkLayerUnspecified, nil
	}
	return 0, parseErr(text, `"InfiniBand", "Ethernet" or "Unknown"`)
}

// parseHex parses the kernel's "0x%x" attributes (lid, sm_lid, cap_mask,
// pkeys) into a value of at most bits bits. text has no newline: callers
// trim the file's one newline before splitting it.
func parseHex(text string, bits int, want string) (uint64, error) {
	s, ok := strings.CutPrefix(text, "0x")
	if !ok || s == "" || s[0] == '+' || s[0] == '-' || strings.Contains(s, "_") {
		return 0, parseErr(text, want)
	}
	v, err := strconv.ParseUint(s, 16, bits)
	if err != nil {
		return 0, parseErr(text, want)
	}
	return v, nil
}

// parseDec parses the kernel's "%d"/"%u" attributes (lid_mask_count,
// abi_version) into a value of at most bits bits. printf never writes
// leading zeros for %d, so they are refused. text has no newline, as for
// parseHex.
func parseDec(text string, bits int, want string) (uint64, error) {
	s := text
	if s == "" || s[0] == '+' || s[0] == '-' || strings.Contains(s, "_") || len(s) > 1 && s[0] == '0' {
		return 0, parseErr(text, want)
	}
	v, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		return 0, parseErr(text, want)
	}
	return v, nil
}

// ParsePKey parses a ports/N/pkeys/I file ("0xffff").
func ParsePKey(text string) (uint16, error) {
	v, err := parseHex(trimNL(text), 16, `a P_Key like "0xffff"`)
	if err != nil {
		return 0, parseErr(text, `a P_Key like "0xffff"`)
	}
	return uint16(v), nil
}

// ParseGIDAttrType parses a gid_attrs/types/I file: "IB/RoCE v1" or
// "RoCE v2" (the only names rdma-core's query_sysfs_gid_type accepts).
func ParseGIDAttrType(text string) (GIDAttrType, error) {
	switch trimNL(text) {
	case "IB/RoCE v1":
		return GIDAttrIBRoCEv1, nil
	case "RoCE v2":
		return GIDAttrRoCEv2, nil
	}
	return 0, parseErr(text, `"IB/RoCE v1" or "RoCE v2"`)
}

// ParseRate parses a port's rate file: "%d%s Gb/sec (%dX%s)" in the kernel,
// e.g. "2.5 Gb/sec (1X SDR)", "100 Gb/sec (4X EDR)", or "10 Gb/sec (4X)"
// from kernels that leave SDR unnamed. Speed names the kernel may add later
// are accepted if they are letters and digits.
func ParseRate(text string) (Rate, error) {
	const want = `a rate like "100 Gb/sec (4X EDR)"`
	s := trimNL(text)
	gbps, rest, ok := strings.Cut(s, " Gb/sec (")
	if !ok || !strings.HasSuffix(rest, ")") {
		return Rate{}, parseErr(text, want)
	}
	rest = strings.TrimSuffix(rest, ")")
	whole, half := strings.CutSuffix(gbps, ".5")
	w, err := parseDec(whole, 31, want)
	if err != nil || w > 1<<20 {
		return Rate{}, parseErr(text, want)
	}
	r := Rate{DeciGbps: int(w) * 10}
	if half {
		r.DeciGbps += 5
	}
	width, speed, hasSpeed := strings.Cut(rest, "X")
	if !hasSpeed {
		return Rate{}, parseErr(text, want)
	}
	n, err := parseDec(width, 8, want)
	if err != nil || n == 0 {
		return Rate{}, parseErr(text, want)
	}
	r.Width = int(n)
	if speed != "" {
		name, ok := strings.CutPrefix(speed, " ")
		if !ok || name == "" || strings.IndexFunc(name, func(c rune) bool {
			return !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9')
		}) >= 0 {
			return Rate{}, parseErr(text, want)
		}
		r.Speed = name
	}
	return r, nil
}

// ParseDevNum parses a dev file ("231:192").
func ParseDevNum(text string) (DevNum, error) {
	const want = `a device number like "231:192"`
	maj, min, ok := strings.Cut(trimNL(text), ":")
	if !ok {
		return DevNum{}, parseErr(text, want)
	}
	a, err1 := parseDec(maj, 32, want)
	b, err2 := parseDec(min, 32, want)
	if err1 != nil || err2 != nil {
		return DevNum{}, parseErr(text, want)
	}
	return DevNum{Major: uint32(a), Minor: uint32(b)}, nil
}
