package testvm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
)

// The initramfs is an SVR4 "newc" cpio archive, the format the kernel
// unpacks. Each entry is a 110-byte ASCII header (magic 070701 and thirteen
// 8-digit hex fields), the NUL-terminated name padded to 4 bytes, and the
// data padded to 4 bytes. The kernel accepts several archives one after the
// other, which lets the harness cache the large per-kernel part.

const (
	cpioMagic     = "070701"
	cpioHeaderLen = 110
	cpioTrailer   = "TRAILER!!!"
	cpioMaxSize   = 1<<32 - 1
)

// Mode bits of the cpio header (the st_mode values of <sys/stat.h>).
const (
	cpioModeDir     = 0o040000
	cpioModeFile    = 0o100000
	cpioModeSymlink = 0o120000
	cpioModeCharDev = 0o020000
	cpioModeType    = 0o170000
)

// ErrCPIO reports bad input to the cpio writer or a malformed archive.
var ErrCPIO = errors.New("cpio")

// CPIOWriter writes a newc archive. Names are slash-separated paths
// relative to the archive root; a leading "/" is dropped. It does not create
// parent directories: write them first (the kernel does not either).
type CPIOWriter struct {
	w   *bufio.Writer
	ino uint32
	off int64
	err error
}

// NewCPIOWriter returns a writer of a newc archive to w. Close writes the
// trailer; it does not close w.
func NewCPIOWriter(w io.Writer) *CPIOWriter {
	return &CPIOWriter{w: bufio.NewWriterSize(w, 256<<10), ino: 1}
}

// Dir adds a directory.
func (c *CPIOWriter) Dir(name string, perm fs.FileMode) error {
	return c.entry(name, cpioModeDir|unixPerm(perm), 2, 0, 0, 0, nil, 0)
}

// File adds a regular file of size bytes read from r.
func (c *CPIOWriter) File(name string, perm fs.FileMode, mtime int64, size int64, r io.Reader) error {
	return c.entry(name, cpioModeFile|unixPerm(perm), 1, mtime, 0, 0, r, size)
}

// Bytes adds a regular file holding data.
func (c *CPIOWriter) Bytes(name string, perm fs.FileMode, data []byte) error {
	return c.File(name, perm, 0, int64(len(data)), strings.NewReader(string(data)))
}

// Symlink adds a symbolic link to target.
func (c *CPIOWriter) Symlink(name, target string) error {
	if target == "" {
		return c.fail(fmt.Errorf("%w: symlink %q has an empty target", ErrCPIO, name))
	}
	return c.entry(name, cpioModeSymlink|0o777, 1, 0, 0, 0, strings.NewReader(target), int64(len(target)))
}

// CharDev adds a character device node.
func (c *CPIOWriter) CharDev(name string, perm fs.FileMode, major, minor uint32) error {
	return c.entry(name, cpioModeCharDev|unixPerm(perm), 1, 0, major, minor, nil, 0)
}

// Close writes the trailer and flushes. The archive is unusable after an
// error from any method.
func (c *CPIOWriter) Close() error {
	if c.err != nil {
		return c.err
	}
	if err := c.header(cpioTrailer, 0, 1, 0, 0, 0, 0); err != nil {
		return err
	}
	if err := c.w.Flush(); err != nil {
		return c.fail(fmt.Errorf("%w: flush: %w", ErrCPIO, err))
	}
	return nil
}

// unixPerm turns Go's permission and special bits into st_mode's.
func unixPerm(m fs.FileMode) uint32 {
	p := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		p |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		p |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		p |= 0o1000
	}
	return p
}

func (c *CPIOWriter) fail(err error) error {
	if c.err == nil {
		c.err = err
	}
	return err
}

func cleanName(name string) (string, error) {
	n := strings.TrimLeft(name, "/")
	if n == "" || n == cpioTrailer || strings.ContainsRune(n, 0) {
		return "", fmt.Errorf("%w: bad entry name %q", ErrCPIO, name)
	}
	for _, part := range strings.Split(n, "/") {
		if part == "" || part == "." || part == ".." {
			return "", fmt.Errorf("%w: entry name %q is not a clean path", ErrCPIO, name)
		}
	}
	return n, nil
}

func (c *CPIOWriter) entry(name string, mode, nlink uint32, mtime int64, rmajor, rminor uint32, r io.Reader, size int64) error {
	if c.err != nil {
		return c.err
	}
	n, err := cleanName(name)
	if err != nil {
		return c.fail(err)
	}
	if size < 0 || size > cpioMaxSize {
		return c.fail(fmt.Errorf("%w: %s: size %d does not fit the newc format", ErrCPIO, n, size))
	}
	if mtime < 0 || mtime > cpioMaxSize {
		mtime = 0
	}
	if err := c.header(n, mode, nlink, mtime, size, rmajor, rminor); err != nil {
		return err
	}
	if size > 0 {
		copied, err := io.CopyN(c.w, r, size)
		c.off += copied
		if err != nil {
			return c.fail(fmt.Errorf("%w: %s: data: %w", ErrCPIO, n, err))
		}
	}
	return c.pad()
}

func (c *CPIOWriter) header(name string, mode, nlink uint32, mtime, size int64, rmajor, rminor uint32) error {
	ino := c.ino
	c.ino++
	if name == cpioTrailer {
		ino = 0
	}
	fields := []uint32{ino, mode, 0, 0, nlink, uint32(mtime), uint32(size), 0, 0, rmajor, rminor, uint32(len(name) + 1), 0}
	var hdr [cpioHeaderLen]byte
	copy(hdr[:], cpioMagic)
	for i, v := range fields {
		const hexDigits = "0123456789abcdef"
		for j := 0; j < 8; j++ {
			hdr[6+8*i+j] = hexDigits[v>>(28-4*j)&0xf]
		}
	}
	if _, err := c.w.Write(hdr[:]); err != nil {
		return c.fail(fmt.Errorf("%w: header of %s: %w", ErrCPIO, name, err))
	}
	if _, err := c.w.WriteString(name + "\x00"); err != nil {
		return c.fail(fmt.Errorf("%w: name %s: %w", ErrCPIO, name, err))
	}
	c.off += int64(cpioHeaderLen + len(name) + 1)
	return c.pad()
}

func (c *CPIOWriter) pad() error {
	n := (4 - c.off%4) % 4
	if n == 0 {
		return nil
	}
	if _, err := c.w.Write(make([]byte, n)); err != nil {
		return c.fail(fmt.Errorf("%w: padding: %w", ErrCPIO, err))
	}
	c.off += n
	return nil
}

// CPIOEntry is one entry read back by ReadCPIO.
type CPIOEntry struct {
	Name         string
	Mode         uint32 // type and permission bits as in st_mode
	MTime        int64
	RMajor       uint32
	RMinor       uint32
	Data         []byte // file contents, or the target of a symlink
	NLink        uint32
	ArchiveIndex int // which of several concatenated archives holds it
}

// IsDir, IsRegular and IsSymlink classify an entry.
func (e CPIOEntry) IsDir() bool     { return e.Mode&cpioModeType == cpioModeDir }
func (e CPIOEntry) IsRegular() bool { return e.Mode&cpioModeType == cpioModeFile }
func (e CPIOEntry) IsSymlink() bool { return e.Mode&cpioModeType == cpioModeSymlink }

// ReadCPIO reads every entry of one or more concatenated newc archives, as
// the kernel would, skipping zero padding between archives. It exists for
// tests and debugging and reads file data into memory.
func ReadCPIO(r io.Reader) ([]CPIOEntry, error) {
	br := bufio.NewReader(r)
	var (
		entries []CPIOEntry
		off     int64
		archive int
	)
	skip := func(n int64) error {
		_, err := io.CopyN(io.Discard, br, n)
		off += n
		return err
	}
	for {
		// Between archives there may be zero bytes up to a 4-byte boundary
		// (or more, as some tools pad to 512).
		b, err := br.Peek(1)
		if errors.Is(err, io.EOF) {
			return entries, nil
		}
		if err != nil {
			return entries, fmt.Errorf("%w: read at %d: %w", ErrCPIO, off, err)
		}
		if b[0] == 0 {
			if err := skip(1); err != nil {
				return entries, fmt.Errorf("%w: read at %d: %w", ErrCPIO, off, err)
			}
			continue
		}
		var hdr [cpioHeaderLen]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return entries, fmt.Errorf("%w: header at %d: %w", ErrCPIO, off, err)
		}
		if string(hdr[:6]) != cpioMagic {
			return entries, fmt.Errorf("%w: bad magic %q at %d", ErrCPIO, hdr[:6], off)
		}
		var f [13]uint32
		for i := range f {
			v, err := strconv.ParseUint(string(hdr[6+8*i:14+8*i]), 16, 32)
			if err != nil {
				return entries, fmt.Errorf("%w: header field %d at %d: %w", ErrCPIO, i, off, err)
			}
			f[i] = uint32(v)
		}
		off += cpioHeaderLen
		nameSize := int64(f[11])
		if nameSize == 0 {
			return entries, fmt.Errorf("%w: empty name at %d", ErrCPIO, off)
		}
		name := make([]byte, nameSize)
		if _, err := io.ReadFull(br, name); err != nil {
			return entries, fmt.Errorf("%w: name at %d: %w", ErrCPIO, off, err)
		}
		off += nameSize
		if err := skip((4 - off%4) % 4); err != nil {
			return entries, fmt.Errorf("%w: name padding: %w", ErrCPIO, err)
		}
		e := CPIOEntry{
			Name:         strings.TrimRight(string(name), "\x00"),
			Mode:         f[1],
			NLink:        f[4],
			MTime:        int64(f[5]),
			RMajor:       f[9],
			RMinor:       f[10],
			ArchiveIndex: archive,
		}
		size := int64(f[6])
		e.Data = make([]byte, size)
		if _, err := io.ReadFull(br, e.Data); err != nil {
			return entries, fmt.Errorf("%w: data of %s: %w", ErrCPIO, e.Name, err)
		}
		off += size
		if err := skip((4 - off%4) % 4); err != nil {
			return entries, fmt.Errorf("%w: data padding of %s: %w", ErrCPIO, e.Name, err)
		}
		if e.Name == cpioTrailer {
			archive++
			continue
		}
		entries = append(entries, e)
	}
}
