// Package sysfstest holds recorded or hand-written sysfs trees for tests, as
// an fs.FS that sysfs.NewFS reads like a real system.
//
// A tree is a text archive in the style of txtar: free text (a comment),
// then one entry per marker line
//
//	-- NAME --                       a file; its contents are the lines that follow
//	-- NAME (noeol) --               a file whose contents end without a newline
//	-- NAME/ --                      an (empty) directory
//	-- NAME -> TARGET --             a symbolic link
//	-- NAME (char MAJ:MIN) --        a character device node
//	-- NAME (char MAJ:MIN eacces) -- one the caller may not open read-write
//	-- NAME (error EINVAL) --        a file whose read fails with that errno
//
// NAME is a slash-separated path from the root of the system
// ("sys/class/infiniband/rxe0/node_type"); directories are implied by the
// names under them. Symbolic links are followed as the kernel does: relative
// targets from the link's directory, absolute ones from the tree's root.
// Real sysfs is full of links (class entries, "device", "driver"), so trees
// keep them.
package sysfstest

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Kind is the kind of an Entry.
type Kind int

// Entry kinds.
const (
	File Kind = iota
	Dir
	Symlink
	CharDev
	ReadError // a file whose read fails with Errno
)

// Entry is one entry of a tree.
type Entry struct {
	Name     string // slash-separated, from the root, without a leading slash
	Kind     Kind
	Data     string        // File: the contents
	Target   string        // Symlink: the target
	Major    uint32        // CharDev
	Minor    uint32        // CharDev
	NoAccess bool          // CharDev: read-write access is denied (EACCES)
	Errno    syscall.Errno // ReadError
}

// Format writes a tree in the archive format: the comment, then the entries
// in the order given.
func Format(comment string, entries []Entry) []byte {
	var b bytes.Buffer
	b.WriteString(comment)
	if comment != "" && !strings.HasSuffix(comment, "\n") {
		b.WriteByte('\n')
	}
	for _, e := range entries {
		switch e.Kind {
		case File:
			if e.Data != "" && !strings.HasSuffix(e.Data, "\n") {
				fmt.Fprintf(&b, "-- %s (noeol) --\n%s\n", e.Name, e.Data)
			} else {
				fmt.Fprintf(&b, "-- %s --\n%s", e.Name, e.Data)
			}
		case Dir:
			fmt.Fprintf(&b, "-- %s/ --\n", e.Name)
		case Symlink:
			fmt.Fprintf(&b, "-- %s -> %s --\n", e.Name, e.Target)
		case CharDev:
			extra := ""
			if e.NoAccess {
				extra = " eacces"
			}
			fmt.Fprintf(&b, "-- %s (char %d:%d%s) --\n", e.Name, e.Major, e.Minor, extra)
		case ReadError:
			fmt.Fprintf(&b, "-- %s (error %s) --\n", e.Name, unix.ErrnoName(e.Errno))
		}
	}
	return b.Bytes()
}

// FS is a tree held in memory. It implements fs.FS, fs.StatFS, fs.ReadDirFS,
// fs.ReadLinkFS and sysfs.AccessFS.
type FS struct {
	comment string
	nodes   map[string]*node // by clean path; "." is the root
}

type node struct {
	Entry
	children map[string]bool
}

// Comment returns the text before the first entry.
func (t *FS) Comment() string { return t.comment }

// Load reads a tree from a file.
func Load(file string) (*FS, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return t, nil
}

// MustLoad is Load for tests: it panics on error.
func MustLoad(file string) *FS {
	t, err := Load(file)
	if err != nil {
		panic(err)
	}
	return t
}

// Parse reads a tree from its archive text.
func Parse(data []byte) (*FS, error) {
	t := &FS{nodes: map[string]*node{".": {Entry: Entry{Name: ".", Kind: Dir}, children: map[string]bool{}}}}
	lines := strings.SplitAfter(string(data), "\n")
	var cur *node
	var content strings.Builder
	noeol := false
	flush := func() {
		if cur == nil {
			return
		}
		if cur.Kind == File {
			s := content.String()
			if noeol {
				s = strings.TrimSuffix(s, "\n")
			}
			cur.Data = s
		}
		content.Reset()
	}
	var comment strings.Builder
	for i, line := range lines {
		marker, ok := parseMarker(line)
		if !ok {
			if cur == nil {
				comment.WriteString(line)
			} else {
				if cur.Kind != File && strings.TrimSpace(line) != "" {
					return nil, fmt.Errorf("line %d: %q has contents but is not a file", i+1, cur.Name)
				}
				content.WriteString(line)
			}
			continue
		}
		flush()
		e, nl, err := parseEntry(marker)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		noeol = nl
		if cur, err = t.add(e); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
	}
	flush()
	t.comment = comment.String()
	return t, nil
}

func parseMarker(line string) (string, bool) {
	s := strings.TrimSuffix(line, "\n")
	if !strings.HasPrefix(s, "-- ") || !strings.HasSuffix(s, " --") || len(s) < 7 {
		return "", false
	}
	return s[3 : len(s)-3], true
}

func parseEntry(m string) (e Entry, noeol bool, err error) {
	if name, target, ok := strings.Cut(m, " -> "); ok {
		return Entry{Name: name, Kind: Symlink, Target: target}, false, checkName(name)
	}
	if strings.HasSuffix(m, "/") {
		name := strings.TrimSuffix(m, "/")
		return Entry{Name: name, Kind: Dir}, false, checkName(name)
	}
	name, attrs, ok := strings.Cut(m, " (")
	if !ok {
		return Entry{Name: m, Kind: File}, false, checkName(m)
	}
	if err := checkName(name); err != nil {
		return Entry{}, false, err
	}
	attrs, ok = strings.CutSuffix(attrs, ")")
	if !ok {
		return Entry{}, false, fmt.Errorf("entry %q: unclosed attributes", m)
	}
	f := strings.Fields(attrs)
	switch {
	case len(f) == 1 && f[0] == "noeol":
		return Entry{Name: name, Kind: File}, true, nil
	case len(f) >= 2 && f[0] == "char":
		maj, min, ok := strings.Cut(f[1], ":")
		a, err1 := strconv.ParseUint(maj, 10, 32)
		b, err2 := strconv.ParseUint(min, 10, 32)
		if !ok || err1 != nil || err2 != nil {
			return Entry{}, false, fmt.Errorf("entry %q: bad device number %q", name, f[1])
		}
		e := Entry{Name: name, Kind: CharDev, Major: uint32(a), Minor: uint32(b)}
		for _, x := range f[2:] {
			if x != "eacces" {
				return Entry{}, false, fmt.Errorf("entry %q: unknown attribute %q", name, x)
			}
			e.NoAccess = true
		}
		return e, false, nil
	case len(f) == 2 && f[0] == "error":
		errno := errnoValue(f[1])
		if errno == 0 {
			return Entry{}, false, fmt.Errorf("entry %q: unknown errno %q", name, f[1])
		}
		return Entry{Name: name, Kind: ReadError, Errno: errno}, false, nil
	}
	return Entry{}, false, fmt.Errorf("entry %q: unknown attributes %q", name, attrs)
}

func checkName(name string) error {
	if !fs.ValidPath(name) || name == "." {
		return fmt.Errorf("bad entry name %q", name)
	}
	return nil
}

// add inserts an entry and the directories above it.
func (t *FS) add(e Entry) (*node, error) {
	if old, ok := t.nodes[e.Name]; ok {
		if old.Kind == Dir && e.Kind == Dir {
			return old, nil
		}
		return nil, fmt.Errorf("entry %q given twice", e.Name)
	}
	dir := path.Dir(e.Name)
	parent, ok := t.nodes[dir]
	if !ok {
		var err error
		if parent, err = t.add(Entry{Name: dir, Kind: Dir}); err != nil {
			return nil, err
		}
	}
	if parent.Kind != Dir {
		return nil, fmt.Errorf("entry %q is under %q, which is not a directory", e.Name, dir)
	}
	n := &node{Entry: e}
	if e.Kind == Dir {
		n.children = map[string]bool{}
	}
	t.nodes[e.Name] = n
	parent.children[path.Base(e.Name)] = true
	return n, nil
}

// maxLinks is Linux's limit on symbolic links followed in one lookup.
const maxLinks = 40

// resolve finds the node for name, following symbolic links in every
// component and, if follow is set, in the last one.
func (t *FS) resolve(op, name string, follow bool) (string, *node, error) {
	if !fs.ValidPath(name) {
		return "", nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	links := 0
	cur := "."
	rest := strings.Split(name, "/")
	if name == "." {
		rest = nil
	}
	for len(rest) > 0 {
		elem := rest[0]
		rest = rest[1:]
		switch elem {
		case ".", "":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		// elem is one element, neither "." nor "..": joining it needs
		// no cleaning.
		next := elem
		if cur != "." {
			next = cur + "/" + elem
		}
		n, ok := t.nodes[next]
		if !ok {
			return "", nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
		}
		if n.Kind == Symlink && (len(rest) > 0 || follow) {
			if links++; links > maxLinks {
				return "", nil, &fs.PathError{Op: op, Path: name, Err: syscall.ELOOP}
			}
			target := n.Target
			if strings.HasPrefix(target, "/") {
				cur = "."
				target = strings.TrimLeft(target, "/")
			}
			if target != "" {
				rest = append(strings.Split(target, "/"), rest...)
			}
			continue
		}
		if len(rest) > 0 && n.Kind != Dir {
			return "", nil, &fs.PathError{Op: op, Path: name, Err: syscall.ENOTDIR}
		}
		cur = next
	}
	return cur, t.nodes[cur], nil
}

// Open opens a file, following symbolic links.
func (t *FS) Open(name string) (fs.File, error) {
	_, n, err := t.resolve("open", name, true)
	if err != nil {
		return nil, err
	}
	f := &file{info: n.info(path.Base(name)), n: n, t: t, name: name}
	if n.Kind == File {
		f.r = strings.NewReader(n.Data)
	}
	return f, nil
}

// Stat describes a file, following symbolic links.
func (t *FS) Stat(name string) (fs.FileInfo, error) {
	_, n, err := t.resolve("stat", name, true)
	if err != nil {
		return nil, err
	}
	return n.info(path.Base(name)), nil
}

// Lstat describes a file without following a final symbolic link.
func (t *FS) Lstat(name string) (fs.FileInfo, error) {
	_, n, err := t.resolve("lstat", name, false)
	if err != nil {
		return nil, err
	}
	return n.info(path.Base(name)), nil
}

// ReadLink returns a symbolic link's target.
func (t *FS) ReadLink(name string) (string, error) {
	_, n, err := t.resolve("readlink", name, false)
	if err != nil {
		return "", err
	}
	if n.Kind != Symlink {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrInvalid}
	}
	return n.Target, nil
}

// ReadDir lists a directory, sorted by name, following symbolic links.
func (t *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	p, n, err := t.resolve("readdir", name, true)
	if err != nil {
		return nil, err
	}
	if n.Kind != Dir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: syscall.ENOTDIR}
	}
	return n.entries(t, p), nil
}

// AccessReadWrite fails with EACCES for character devices marked eacces.
func (t *FS) AccessReadWrite(name string) error {
	_, n, err := t.resolve("access", name, true)
	if err != nil {
		return err
	}
	if n.NoAccess {
		return &fs.PathError{Op: "access", Path: name, Err: syscall.EACCES}
	}
	return nil
}

func (n *node) entries(t *FS, p string) []fs.DirEntry {
	names := make([]string, 0, len(n.children))
	for c := range n.children {
		names = append(names, c)
	}
	slices.Sort(names)
	out := make([]fs.DirEntry, len(names))
	for i, c := range names {
		out[i] = fs.FileInfoToDirEntry(t.nodes[path.Join(p, c)].info(c))
	}
	return out
}

type fileInfo struct {
	name string
	n    *node
}

func (n *node) info(name string) fileInfo { return fileInfo{name: name, n: n} }

func (fi fileInfo) Name() string { return fi.name }
func (fi fileInfo) Size() int64 {
	if fi.n.Kind == File {
		return int64(len(fi.n.Data))
	}
	return 0
}
func (fi fileInfo) Mode() fs.FileMode {
	switch fi.n.Kind {
	case Dir:
		return fs.ModeDir | 0o755
	case Symlink:
		return fs.ModeSymlink | 0o777
	case CharDev:
		return fs.ModeDevice | fs.ModeCharDevice | 0o666
	}
	return 0o444
}
func (fi fileInfo) ModTime() time.Time { return time.Time{} }
func (fi fileInfo) IsDir() bool        { return fi.n.Kind == Dir }
func (fi fileInfo) Sys() any {
	if fi.n.Kind == CharDev {
		return charDevStat(fi.n.Major, fi.n.Minor)
	}
	return nil
}

type file struct {
	info fileInfo
	n    *node
	t    *FS
	name string
	r    *strings.Reader
	dir  []fs.DirEntry
	read bool // dir listed
}

func (f *file) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *file) Close() error               { return nil }

func (f *file) Read(b []byte) (int, error) {
	switch f.n.Kind {
	case File:
		return f.r.Read(b)
	case ReadError:
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: f.n.Errno}
	case Dir:
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: syscall.EISDIR}
	}
	return 0, &fs.PathError{Op: "read", Path: f.name, Err: syscall.EINVAL}
}

// ReadDir makes directories fs.ReadDirFile.
func (f *file) ReadDir(n int) ([]fs.DirEntry, error) {
	if f.n.Kind != Dir {
		return nil, &fs.PathError{Op: "readdir", Path: f.name, Err: syscall.ENOTDIR}
	}
	if !f.read {
		p, _, err := f.t.resolve("readdir", f.name, true)
		if err != nil {
			return nil, err
		}
		f.dir, f.read = f.n.entries(f.t, p), true
	}
	if n <= 0 {
		out := f.dir
		f.dir = nil
		return out, nil
	}
	if len(f.dir) == 0 {
		return nil, io.EOF
	}
	k := min(n, len(f.dir))
	out := f.dir[:k]
	f.dir = f.dir[k:]
	return out, nil
}

// errnoValue is the inverse of unix.ErrnoName; 0 for an unknown name.
func errnoValue(name string) syscall.Errno {
	for e := syscall.Errno(1); e < 4096; e++ {
		if unix.ErrnoName(e) == name {
			return e
		}
	}
	return 0
}

// Materialize writes the tree under dir as real directories, files and
// symbolic links, for code that wants a root directory (sysfs.New).
// What a plain file system cannot hold without privileges is approximated:
// character devices become empty regular files and files whose read fails
// become empty files.
func (t *FS) Materialize(dir string) error {
	names := make([]string, 0, len(t.nodes))
	for name := range t.nodes {
		names = append(names, name)
	}
	slices.Sort(names) // parents before children
	for _, name := range names {
		n := t.nodes[name]
		dst := path.Join(dir, name)
		var err error
		switch n.Kind {
		case Dir:
			err = os.MkdirAll(dst, 0o755)
		case Symlink:
			err = os.Symlink(n.Target, dst)
		case File:
			err = os.WriteFile(dst, []byte(n.Data), 0o644)
		default:
			err = os.WriteFile(dst, nil, 0o644)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
