package main

import (
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os/exec"
)

// ErrNotBzImage reports a file that is not an x86 bzImage with a usable boot
// protocol header.
var ErrNotBzImage = errors.New("not a bzImage")

// ErrUnknownCompression reports a payload or module whose compression this
// tool does not recognise or cannot undo.
var ErrUnknownCompression = errors.New("unknown compression")

// ErrTooLarge reports decompressed data beyond maxDecompressed.
var ErrTooLarge = errors.New("decompressed data too large")

// maxDecompressed bounds any decompression; a Debian vmlinux is under
// 100 MiB, so this only stops a corrupt or hostile input from filling memory.
const maxDecompressed = 1 << 30

// Offsets in the x86 boot protocol header (Documentation/arch/x86/boot.rst).
const (
	offSetupSects    = 0x1f1
	offBootFlag      = 0x1fe
	offHeaderMagic   = 0x202
	offVersion       = 0x206
	offPayloadOffset = 0x248
	offPayloadLength = 0x24c
	headerEnd        = 0x250

	bootFlag    = 0xaa55
	headerMagic = 0x53726448 // "HdrS"
	// Boot protocol 2.08 added payload_offset and payload_length.
	minVersionWithPayload = 0x0208
	sectorSize            = 512
	defaultSetupSects     = 4 // a setup_sects of 0 means 4
)

// bzImagePayload returns the compressed kernel inside a bzImage, as located
// by the boot protocol header: payload_offset counts from the start of the
// protected-mode code, which follows the setup sectors.
func bzImagePayload(image []byte) ([]byte, error) {
	if len(image) < headerEnd {
		return nil, fmt.Errorf("%w: %d bytes is shorter than the boot header", ErrNotBzImage, len(image))
	}
	le := binary.LittleEndian
	if flag := le.Uint16(image[offBootFlag:]); flag != bootFlag {
		return nil, fmt.Errorf("%w: boot flag %#04x", ErrNotBzImage, flag)
	}
	if magic := le.Uint32(image[offHeaderMagic:]); magic != headerMagic {
		return nil, fmt.Errorf("%w: header magic %#08x", ErrNotBzImage, magic)
	}
	if version := le.Uint16(image[offVersion:]); version < minVersionWithPayload {
		return nil, fmt.Errorf("%w: boot protocol %d.%02d has no payload fields",
			ErrNotBzImage, version>>8, version&0xff)
	}
	setupSects := uint64(image[offSetupSects])
	if setupSects == 0 {
		setupSects = defaultSetupSects
	}
	start := (setupSects+1)*sectorSize + uint64(le.Uint32(image[offPayloadOffset:]))
	length := uint64(le.Uint32(image[offPayloadLength:]))
	if length == 0 || start+length > uint64(len(image)) {
		return nil, fmt.Errorf("%w: payload %d+%d outside the %d-byte file",
			ErrNotBzImage, start, length, len(image))
	}
	return image[start : start+length], nil
}

// compression names a compressed format by its leading magic bytes.
type compression struct {
	name  string
	magic []byte
}

var compressions = []compression{
	{"gzip", []byte{0x1f, 0x8b}},
	{"xz", []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}},
	{"zstd", []byte{0x28, 0xb5, 0x2f, 0xfd}},
	{"bzip2", []byte{'B', 'Z', 'h'}},
	{"lzma", []byte{0x5d, 0x00, 0x00}},
}

// detectCompression names the format data starts with, or "" if none.
func detectCompression(data []byte) string {
	for _, c := range compressions {
		if bytes.HasPrefix(data, c.magic) {
			return c.name
		}
	}
	return ""
}

// decompress undoes the compression data starts with. Only the first stream
// is read: a kernel payload is followed by the 4-byte decompressed size, and
// that trailer must not be taken for a second stream. gzip and bzip2 are
// handled in-process; xz, lzma and zstd need the xz and zstd tools.
func decompress(data []byte) ([]byte, error) {
	switch name := detectCompression(data); name {
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		zr.Multistream(false)
		return readBounded(zr, "gzip")
	case "bzip2":
		return readBounded(bzip2.NewReader(bytes.NewReader(data)), "bzip2")
	case "xz":
		return runTool(data, "xz", "--decompress", "--stdout", "--single-stream")
	case "lzma":
		return runTool(data, "xz", "--format=lzma", "--decompress", "--stdout", "--single-stream")
	case "zstd":
		return runTool(data, "zstd", "--decompress", "--stdout")
	default:
		return nil, ErrUnknownCompression
	}
}

func readBounded(r io.Reader, format string) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, maxDecompressed+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", format, err)
	}
	if len(out) > maxDecompressed {
		return nil, fmt.Errorf("%s: %w", format, ErrTooLarge)
	}
	return out, nil
}

// runTool pipes data through an external decompressor.
func runTool(data []byte, tool string, args ...string) ([]byte, error) {
	path, err := exec.LookPath(tool)
	if err != nil {
		return nil, fmt.Errorf("%s is needed to decompress this file: %w", tool, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdin = bytes.NewReader(data)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &limitedBuffer{buf: &stdout, limit: maxDecompressed}
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if stdout.Len() >= maxDecompressed {
			return nil, fmt.Errorf("%s: %w", tool, ErrTooLarge)
		}
		return nil, fmt.Errorf("%s: %w: %s", tool, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

// limitedBuffer fails writes beyond limit, which stops the tool.
type limitedBuffer struct {
	buf   *bytes.Buffer
	limit int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if l.buf.Len()+len(p) > l.limit {
		return 0, ErrTooLarge
	}
	return l.buf.Write(p)
}

// ErrSizeMismatch reports a payload whose decompressed length differs from
// the length its trailer records.
var ErrSizeMismatch = errors.New("decompressed size differs from the payload trailer")

// vmlinuxFromBzImage extracts the uncompressed vmlinux ELF from a bzImage.
func vmlinuxFromBzImage(image []byte) ([]byte, error) {
	payload, err := bzImagePayload(image)
	if err != nil {
		return nil, err
	}
	vmlinux, err := decompressPayload(payload)
	if err != nil {
		return nil, fmt.Errorf("decompress bzImage payload: %w", err)
	}
	return vmlinux, nil
}

// decompressPayload decompresses a bzImage payload. The kernel build appends
// the decompressed length as 4 little-endian bytes to every format but gzip
// (scripts/Makefile.lib, the *_with_size commands); zstd would take that
// trailer for a broken second frame, so it is cut off, and it doubles as a
// check of the result.
func decompressPayload(payload []byte) ([]byte, error) {
	if detectCompression(payload) == "gzip" || len(payload) < 4 {
		return decompress(payload)
	}
	body, trailer := payload[:len(payload)-4], payload[len(payload)-4:]
	out, err := decompress(body)
	if err != nil {
		return nil, err
	}
	if want := binary.LittleEndian.Uint32(trailer); uint64(len(out)) != uint64(want) {
		return nil, fmt.Errorf("%w: got %d bytes, trailer says %d", ErrSizeMismatch, len(out), want)
	}
	return out, nil
}
