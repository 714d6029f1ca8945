package sysfstest

import (
	"errors"
	"io/fs"
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

const sample = `comment line
-- a/file --
hello
-- a/noeol (noeol) --
no newline
-- a/empty/ --
-- a/link -> file --
-- a/dirlink -> ../b --
-- a/abs -> /b/c --
-- a/loop -> loop --
-- a/dangling -> nowhere --
-- b/c --
deep
-- dev/x (char 231:192) --
-- dev/y (char 231:193 eacces) --
-- a/bad (error EINVAL) --
`

func TestParseAndRead(t *testing.T) {
	tree, err := Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	if tree.Comment() != "comment line\n" {
		t.Errorf("Comment() = %q", tree.Comment())
	}
	for name, want := range map[string]string{
		"a/file": "hello\n", "a/noeol": "no newline", "a/link": "hello\n", "a/dirlink/c": "deep\n", "a/abs": "deep\n",
	} {
		got, err := fs.ReadFile(tree, name)
		if err != nil || string(got) != want {
			t.Errorf("ReadFile(%s) = %q, %v; want %q", name, got, err, want)
		}
	}
	for name, want := range map[string]error{
		"a/loop": syscall.ELOOP, "a/dangling": fs.ErrNotExist, "a/missing": fs.ErrNotExist, "a/file/x": syscall.ENOTDIR,
		"a/bad": syscall.EINVAL, "../a": fs.ErrInvalid,
	} {
		if _, err := fs.ReadFile(tree, name); !errors.Is(err, want) {
			t.Errorf("ReadFile(%s): err = %v, want %v", name, err, want)
		}
	}
	if target, err := tree.ReadLink("a/dirlink"); err != nil || target != "../b" {
		t.Errorf("ReadLink = %q, %v", target, err)
	}
	if fi, err := tree.Lstat("a/link"); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("Lstat(a/link) = %v, %v", fi, err)
	}
	fi, err := tree.Stat("dev/x")
	if err != nil || fi.Mode()&fs.ModeCharDevice == 0 {
		t.Fatalf("Stat(dev/x) = %v, %v", fi, err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Rdev == 0 {
		t.Errorf("dev/x Sys() = %#v", fi.Sys())
	}
	if err := tree.AccessReadWrite("dev/x"); err != nil {
		t.Errorf("AccessReadWrite(dev/x) = %v", err)
	}
	if err := tree.AccessReadWrite("dev/y"); !errors.Is(err, syscall.EACCES) {
		t.Errorf("AccessReadWrite(dev/y) = %v, want EACCES", err)
	}
	entries, err := fs.ReadDir(tree, "a")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{"abs", "bad", "dangling", "dirlink", "empty", "file", "link", "loop", "noeol"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("ReadDir(a) (-want +got):\n%s", diff)
	}
	// A tree of plain files, directories and links is a well-behaved fs.FS.
	good, err := Parse([]byte("-- a/f --\nx\n-- a/l -> f --\n-- a/d/ --\n-- b/c --\ny\n-- b/up -> ../a --\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := fstest.TestFS(good, "a/f", "a/l", "b/c"); err != nil {
		t.Error(err)
	}
}

func TestFormatRoundTrip(t *testing.T) {
	entries := []Entry{
		{Name: "x/f", Kind: File, Data: "1: CA\n"},
		{Name: "x/g", Kind: File, Data: "no eol"},
		{Name: "x/e", Kind: File},
		{Name: "x/d", Kind: Dir},
		{Name: "x/l", Kind: Symlink, Target: "../y"},
		{Name: "x/c", Kind: CharDev, Major: 231, Minor: 192, NoAccess: true},
		{Name: "x/r", Kind: ReadError, Errno: syscall.EINVAL},
	}
	tree, err := Parse(Format("hi", entries))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		n, ok := tree.nodes[e.Name]
		if !ok {
			t.Errorf("%s lost", e.Name)
			continue
		}
		if diff := cmp.Diff(e, n.Entry); diff != "" {
			t.Errorf("%s (-want +got):\n%s", e.Name, diff)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, bad := range []string{
		"-- a --\nx\n-- a --\ny\n",          // twice
		"-- a --\nx\n-- a/b --\ny\n",        // under a file
		"-- a (char 1) --\n",                // bad number
		"-- a (error ENOSUCH) --\n",         // unknown errno
		"-- a (weird) --\n",                 // unknown attribute
		"-- ../a --\n",                      // bad name
		"-- /a --\n",                        // absolute
		"-- a -> b --\ncontents\n",          // contents for a link
		"-- a (char 1:2 eacces other) --\n", // unknown flag
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}
