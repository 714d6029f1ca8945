package main

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
)

// ErrNoBTF reports an ELF file without a .BTF section: a kernel built
// without CONFIG_DEBUG_INFO_BTF(_MODULES).
var ErrNoBTF = errors.New("no .BTF section")

// ErrBadELF reports data that is not a readable ELF file.
var ErrBadELF = errors.New("not a readable ELF file")

// maxBTF bounds a .BTF section; vmlinux's is a few MiB.
const maxBTF = 256 << 20

// btfSection returns the raw .BTF section of an ELF file (vmlinux or a
// kernel module).
func btfSection(data []byte) (raw []byte, err error) {
	// debug/elf reads untrusted headers; should it ever panic on a corrupt
	// file, report bad input instead of crashing the tool.
	defer func() {
		if r := recover(); r != nil {
			raw, err = nil, fmt.Errorf("%w: %v", ErrBadELF, r)
		}
	}()
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadELF, err)
	}
	defer f.Close()
	section := f.Section(".BTF")
	if section == nil {
		return nil, ErrNoBTF
	}
	if section.Type == elf.SHT_NOBITS {
		return nil, fmt.Errorf("%w: .BTF has no data", ErrNoBTF)
	}
	if section.Size > maxBTF {
		return nil, fmt.Errorf("%w: .BTF is %d bytes", ErrBadELF, section.Size)
	}
	raw, err = section.Data()
	if err != nil {
		return nil, fmt.Errorf("%w: read .BTF: %w", ErrBadELF, err)
	}
	return raw, nil
}

// bytesReaderAt adapts a byte slice to io.ReaderAt for the btf loaders.
func bytesReaderAt(b []byte) *bytes.Reader { return bytes.NewReader(b) }
