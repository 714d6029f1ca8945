package main

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// bzImage builds a minimal bzImage: boot header, setup sectors, then the
// payload at payloadOffset into the protected-mode code.
func bzImage(setupSects uint8, version uint16, payloadOffset uint32, payload []byte) []byte {
	sects := int(setupSects)
	if sects == 0 {
		sects = defaultSetupSects
	}
	start := (sects+1)*sectorSize + int(payloadOffset)
	image := make([]byte, start+len(payload))
	le := binary.LittleEndian
	image[offSetupSects] = setupSects
	le.PutUint16(image[offBootFlag:], bootFlag)
	le.PutUint32(image[offHeaderMagic:], headerMagic)
	le.PutUint16(image[offVersion:], version)
	le.PutUint32(image[offPayloadOffset:], payloadOffset)
	le.PutUint32(image[offPayloadLength:], uint32(len(payload)))
	copy(image[start:], payload)
	return image
}

func TestBzImagePayload(t *testing.T) {
	payload := []byte("\xfd7zXZ\x00 compressed kernel")
	got, err := bzImagePayload(bzImage(0, 0x020f, 0x3a0, payload))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(payload, got); diff != "" {
		t.Errorf("payload (-want +got):\n%s", diff)
	}
	got, err = bzImagePayload(bzImage(27, 0x0208, 0, payload))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(payload, got); diff != "" {
		t.Errorf("payload with 27 setup sectors (-want +got):\n%s", diff)
	}
}

func TestBzImagePayloadBad(t *testing.T) {
	good := bzImage(1, 0x020f, 16, []byte("payload"))
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for _, tc := range []struct {
		name  string
		image []byte
	}{
		{"empty", nil},
		{"short", good[:headerEnd-1]},
		{"no boot flag", mutate(func(b []byte) []byte { b[offBootFlag] = 0; return b })},
		{"no HdrS", mutate(func(b []byte) []byte { b[offHeaderMagic] = 'X'; return b })},
		{"protocol 2.07", mutate(func(b []byte) []byte {
			binary.LittleEndian.PutUint16(b[offVersion:], 0x0207)
			return b
		})},
		{"payload past the end", mutate(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[offPayloadLength:], 1<<20)
			return b
		})},
		{"offset past the end", mutate(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[offPayloadOffset:], 0xffffffff)
			return b
		})},
		{"empty payload", mutate(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[offPayloadLength:], 0)
			return b
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := bzImagePayload(tc.image); !errors.Is(err, ErrNotBzImage) {
				t.Errorf("got %v, want ErrNotBzImage", err)
			}
		})
	}
}

func gzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// withSize appends the kernel's 4-byte decompressed-size trailer.
func withSize(compressed []byte, size int) []byte {
	return binary.LittleEndian.AppendUint32(bytes.Clone(compressed), uint32(size))
}

func TestDecompressPayload(t *testing.T) {
	kernel := bytes.Repeat([]byte("vmlinux "), 1000)

	// gzip payloads carry no trailer; bytes after the member are ignored.
	got, err := decompressPayload(append(gzipped(t, kernel), "junk"...))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, kernel) {
		t.Errorf("gzip: got %d bytes, want %d", len(got), len(kernel))
	}

	for _, tool := range []struct{ name, format string }{{"xz", "xz"}, {"zstd", "zstd"}} {
		t.Run(tool.name, func(t *testing.T) {
			if vmenv.InVM() {
				t.Skip("the guest's busybox tools cannot compress; the host run covers the decompression")
			}
			path, err := exec.LookPath(tool.name)
			if err != nil {
				t.Skipf("%s not installed", tool.name)
			}
			cmd := exec.Command(path, "--compress", "--stdout")
			cmd.Stdin = bytes.NewReader(kernel)
			compressed, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			got, err := decompressPayload(withSize(compressed, len(kernel)))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, kernel) {
				t.Errorf("got %d bytes, want %d", len(got), len(kernel))
			}
			if _, err := decompressPayload(withSize(compressed, len(kernel)+1)); !errors.Is(err, ErrSizeMismatch) {
				t.Errorf("wrong trailer: got %v, want ErrSizeMismatch", err)
			}
		})
	}
}

func TestDecompressBad(t *testing.T) {
	for _, tc := range []struct {
		name    string
		data    []byte
		wantErr error
	}{
		{"empty", nil, ErrUnknownCompression},
		{"ELF, not compressed", []byte("\x7fELF\x02\x01\x01"), ErrUnknownCompression},
		{"lz4", []byte{0x02, 0x21, 0x4c, 0x18, 0, 0, 0, 0}, ErrUnknownCompression},
		{"truncated gzip", []byte{0x1f, 0x8b, 0x08}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decompress(tc.data)
			if err == nil {
				t.Fatal("no error")
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("got %v, want %v", err, tc.wantErr)
			}
		})
	}
}

// elfFile builds a little ELF64 relocatable file with the given sections,
// enough for debug/elf and btfSection.
func elfFile(t testing.TB, sections map[string][]byte, names ...string) []byte {
	t.Helper()
	shstrtab := []byte{0}
	nameOff := map[string]uint32{}
	for _, n := range append([]string{".shstrtab"}, names...) {
		nameOff[n] = uint32(len(shstrtab))
		shstrtab = append(append(shstrtab, n...), 0)
	}
	var body bytes.Buffer
	const headerSize = 64
	type placed struct{ off, size uint64 }
	place := func(data []byte) placed {
		p := placed{uint64(headerSize + body.Len()), uint64(len(data))}
		body.Write(data)
		return p
	}
	strtab := place(shstrtab)
	headers := []elf.Section64{{}, {
		Name: nameOff[".shstrtab"], Type: uint32(elf.SHT_STRTAB), Off: strtab.off, Size: strtab.size, Addralign: 1,
	}}
	for _, n := range names {
		p := place(sections[n])
		headers = append(headers, elf.Section64{
			Name: nameOff[n], Type: uint32(elf.SHT_PROGBITS), Off: p.off, Size: p.size, Addralign: 4,
		})
	}
	for body.Len()%8 != 0 {
		body.WriteByte(0)
	}
	var out bytes.Buffer
	header := elf.Header64{
		Type: uint16(elf.ET_REL), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Shoff: uint64(headerSize + body.Len()), Ehsize: headerSize, Shentsize: 64,
		Shnum: uint16(len(headers)), Shstrndx: 1,
	}
	copy(header.Ident[:], elf.ELFMAG)
	header.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	header.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	header.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	for _, v := range []any{header, body.Bytes(), headers} {
		if err := binary.Write(&out, binary.LittleEndian, v); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

func TestBTFSection(t *testing.T) {
	raw := []byte("\x9f\xeb\x01\x00 BTF bytes")
	got, err := btfSection(elfFile(t, map[string][]byte{".text": {0xc3}, ".BTF": raw}, ".text", ".BTF"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(raw, got); diff != "" {
		t.Errorf(".BTF (-want +got):\n%s", diff)
	}
}

func TestBTFSectionBad(t *testing.T) {
	noBTF := elfFile(t, map[string][]byte{".text": {0xc3}}, ".text")
	for _, tc := range []struct {
		name    string
		data    []byte
		wantErr error
	}{
		{"empty", nil, ErrBadELF},
		{"not ELF", []byte("MZ this is not an ELF file at all, not even close........"), ErrBadELF},
		{"truncated", noBTF[:100], ErrBadELF},
		{"no .BTF", noBTF, ErrNoBTF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := btfSection(tc.data); !errors.Is(err, tc.wantErr) {
				t.Errorf("got %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestFindModule(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"kernel/drivers/infiniband/core/ib_uverbs.ko.xz", "kernel/net/ib_uverbs_extra.ko", "a/dup.ko", "b/dup.ko.xz"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := findModule(dir, "ib_uverbs")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "kernel/drivers/infiniband/core/ib_uverbs.ko.xz"); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if _, err := findModule(dir, "mlx5_ib"); !errors.Is(err, ErrModuleNotFound) {
		t.Errorf("missing module: got %v, want ErrModuleNotFound", err)
	}
	if _, err := findModule(dir, "dup"); err == nil {
		t.Error("two files for one module: no error")
	}
}

// FuzzBzImagePayload locates the payload of arbitrary bzImage-shaped
// input. bzImagePayload reads nothing before the boot header at
// offSetupSects, so the fuzzer mutates only what it reads: the header
// window hdr, placed at its offset after zeros, and the image's length
// (extra bytes after the window). A whole image, even a minimal one of one
// setup sector, is over 1 KB, and the fuzzer minimises every input that
// finds new coverage in time growing with the square of its size: a raw
// image spent the run minimising (about 20 executions in 5 s) where this
// shape runs thousands a second. TestBzImagePayload and
// TestBzImagePayloadBad cover whole images.
func FuzzBzImagePayload(f *testing.F) {
	seed := func(image []byte) {
		end := min(len(image), headerEnd)
		f.Add(bytes.Clone(image[min(len(image), offSetupSects):end]), uint32(len(image)-end))
	}
	seed(bzImage(0, 0x020f, 0x3a0, []byte("\xfd7zXZ\x00 payload")))
	seed(bzImage(1, 0x0208, 8, []byte{0x1f, 0x8b}))
	seed(bzImage(1, 0x0207, 0, []byte("old")))
	seed(bzImage(1, 0x020f, 0, []byte("x"))[:headerEnd])
	f.Add([]byte{}, uint32(0))
	f.Fuzz(func(t *testing.T, hdr []byte, extra uint32) {
		// Up to 64 KB of length: enough for any bound check to go either
		// way with small header values, cheap to allocate every time.
		image := make([]byte, offSetupSects+len(hdr)+int(extra%(64<<10)))
		copy(image[offSetupSects:], hdr)
		payload, err := bzImagePayload(image)
		if err != nil {
			if !errors.Is(err, ErrNotBzImage) {
				t.Fatalf("error %v does not wrap ErrNotBzImage", err)
			}
			return
		}
		// The payload is a non-empty part of the image, after the boot
		// sector and at least one setup sector.
		start := len(image) - cap(payload)
		if len(payload) == 0 || start < 2*sectorSize || &image[start] != &payload[0] {
			t.Fatalf("payload of %d bytes (capacity %d) is not inside the %d-byte image", len(payload), cap(payload), len(image))
		}
	})
}

func FuzzBTFSection(f *testing.F) {
	f.Add(elfFile(f, map[string][]byte{".BTF": []byte("\x9f\xeb\x01\x00")}, ".BTF"))
	f.Add(elfFile(f, map[string][]byte{".text": {0xc3}}, ".text"))
	f.Add([]byte("\x7fELF"))
	f.Fuzz(func(t *testing.T, data []byte) {
		raw, err := btfSection(data)
		if err != nil {
			if !errors.Is(err, ErrBadELF) && !errors.Is(err, ErrNoBTF) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if len(raw) > len(data) {
			t.Fatalf(".BTF of %d bytes from a %d-byte file", len(raw), len(data))
		}
	})
}
