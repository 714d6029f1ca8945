package testvm

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sampleArchive writes a small archive covering every entry kind and odd
// sizes that exercise the 4-byte padding.
func sampleArchive(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	cw := NewCPIOWriter(&buf)
	steps := []error{
		cw.Dir("etc", 0o755),
		cw.Dir("tmp", 0o777|fs.ModeSticky),
		cw.Bytes("etc/a", 0o644, []byte("x")),
		cw.Bytes("etc/bb", 0o600, []byte("yy")),
		cw.Bytes("etc/ccc", 0o755, []byte("zzz")),
		cw.Bytes("/etc/empty", 0o644, nil),
		cw.Symlink("etc/link", "a"),
		cw.CharDev("console", 0o600, 5, 1),
		cw.File("etc/mtime", 0o644, 1700000000, 4, strings.NewReader("abcd")),
		cw.Close(),
	}
	for i, err := range steps {
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	return buf.Bytes()
}

type entrySummary struct {
	Name   string
	Mode   uint32
	Data   string
	MTime  int64
	RMajor uint32
	RMinor uint32
	Arch   int
}

func summarize(entries []CPIOEntry) []entrySummary {
	var s []entrySummary
	for _, e := range entries {
		s = append(s, entrySummary{e.Name, e.Mode, string(e.Data), e.MTime, e.RMajor, e.RMinor, e.ArchiveIndex})
	}
	return s
}

func TestCPIORoundTrip(t *testing.T) {
	data := sampleArchive(t)
	if len(data)%4 != 0 {
		t.Errorf("archive length %d is not a multiple of 4", len(data))
	}
	// Two archives back to back, as the harness hands them to the kernel.
	entries, err := ReadCPIO(bytes.NewReader(append(append([]byte(nil), data...), data...)))
	if err != nil {
		t.Fatal(err)
	}
	one := []entrySummary{
		{Name: "etc", Mode: 0o040755},
		{Name: "tmp", Mode: 0o041777},
		{Name: "etc/a", Mode: 0o100644, Data: "x"},
		{Name: "etc/bb", Mode: 0o100600, Data: "yy"},
		{Name: "etc/ccc", Mode: 0o100755, Data: "zzz"},
		{Name: "etc/empty", Mode: 0o100644},
		{Name: "etc/link", Mode: 0o120777, Data: "a"},
		{Name: "console", Mode: 0o020600, RMajor: 5, RMinor: 1},
		{Name: "etc/mtime", Mode: 0o100644, Data: "abcd", MTime: 1700000000},
	}
	var want []entrySummary
	for arch := 0; arch < 2; arch++ {
		for _, e := range one {
			e.Arch = arch
			want = append(want, e)
		}
	}
	if diff := cmp.Diff(want, summarize(entries)); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	for _, e := range entries {
		if e.IsDir() != (e.Mode&cpioModeType == cpioModeDir) || e.IsSymlink() != (e.Name == "etc/link") {
			t.Errorf("%s: kind predicates disagree with mode %o", e.Name, e.Mode)
		}
	}
}

// TestCPIOWithCpioTool checks the archive against GNU cpio's reading of it.
func TestCPIOWithCpioTool(t *testing.T) {
	// busybox's cpio (the one in the test VM) lacks the options used here.
	if v, err := exec.Command("cpio", "--version").Output(); err != nil || !bytes.Contains(v, []byte("GNU cpio")) {
		t.Skip("no GNU cpio:", err)
	}
	cmd := exec.Command("cpio", "-t", "--quiet")
	cmd.Stdin = bytes.NewReader(sampleArchive(t))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cpio -t: %v", err)
	}
	want := "etc\ntmp\netc/a\netc/bb\netc/ccc\netc/empty\netc/link\nconsole\netc/mtime\n"
	if diff := cmp.Diff(want, string(out)); diff != "" {
		t.Errorf("cpio -t (-want +got):\n%s", diff)
	}

	dir := t.TempDir()
	cmd = exec.Command("cpio", "-i", "--quiet", "-d", "--no-absolute-filenames")
	cmd.Dir = dir
	var buf bytes.Buffer
	cw := NewCPIOWriter(&buf)
	for _, err := range []error{cw.Dir("d", 0o755), cw.Bytes("d/f", 0o644, []byte("hello\n")), cw.Symlink("d/l", "f"), cw.Close()} {
		if err != nil {
			t.Fatal(err)
		}
	}
	cmd.Stdin = &buf
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio -i: %v: %s", err, out)
	}
	got, err := os.ReadFile(dir + "/d/l")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("hello\n", string(got)); diff != "" {
		t.Errorf("extracted d/l (-want +got):\n%s", diff)
	}
}

func TestCPIOBadInput(t *testing.T) {
	tests := []struct {
		name string
		add  func(*CPIOWriter) error
	}{
		{"empty name", func(c *CPIOWriter) error { return c.Bytes("", 0o644, nil) }},
		{"root only", func(c *CPIOWriter) error { return c.Dir("/", 0o755) }},
		{"dot dot", func(c *CPIOWriter) error { return c.Bytes("a/../b", 0o644, nil) }},
		{"double slash", func(c *CPIOWriter) error { return c.Bytes("a//b", 0o644, nil) }},
		{"trailing slash", func(c *CPIOWriter) error { return c.Dir("a/", 0o755) }},
		{"NUL in name", func(c *CPIOWriter) error { return c.Bytes("a\x00b", 0o644, nil) }},
		{"trailer name", func(c *CPIOWriter) error { return c.Bytes("TRAILER!!!", 0o644, nil) }},
		{"empty symlink", func(c *CPIOWriter) error { return c.Symlink("l", "") }},
		{"negative size", func(c *CPIOWriter) error { return c.File("f", 0o644, 0, -1, strings.NewReader("")) }},
		{"too large", func(c *CPIOWriter) error { return c.File("f", 0o644, 0, 1<<32, strings.NewReader("")) }},
		{"short data", func(c *CPIOWriter) error { return c.File("f", 0o644, 0, 10, strings.NewReader("abc")) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cw := NewCPIOWriter(&bytes.Buffer{})
			err := tt.add(cw)
			if !errors.Is(err, ErrCPIO) {
				t.Fatalf("got %v, want an ErrCPIO", err)
			}
			// The writer stays failed.
			if err := cw.Close(); !errors.Is(err, ErrCPIO) {
				t.Errorf("Close after failure: %v, want an ErrCPIO", err)
			}
		})
	}
}

func TestReadCPIOBadInput(t *testing.T) {
	good := sampleArchive(t)
	tests := []struct {
		name string
		data []byte
	}{
		{"bad magic", append([]byte("070707"), good[6:]...)},
		{"truncated header", good[:50]},
		{"truncated data", good[:len(good)-200]},
		{"bad hex", append(append([]byte(nil), good[:6]...), append([]byte("zzzzzzzz"), good[14:]...)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ReadCPIO(bytes.NewReader(tt.data)); !errors.Is(err, ErrCPIO) {
				t.Fatalf("got %v, want an ErrCPIO", err)
			}
		})
	}
}
