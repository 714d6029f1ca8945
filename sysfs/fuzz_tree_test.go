package sysfs_test

import (
	"errors"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/sysfs"
	"github.com/goverbs/goverbs/sysfs/sysfstest"
)

// fileMarker matches the marker of a plain file entry in a tree.
var fileMarker = regexp.MustCompile(`(?m)^-- (\S+) --\n`)

// FuzzDeviceTree puts fuzz text in one attribute file of the recorded 6.12
// rxe tree (which one is fuzzed too) and reads the devices the way
// uverbs.Open and ibinfo do. Nothing may panic, and a failure must be a
// *ParseError or *fs.PathError naming the file, or say the device is
// missing or unusable (the sentinels of why a device is hidden, e.g. a dev
// attribute that names another character device than the node's).
func FuzzDeviceTree(f *testing.F) {
	data, err := os.ReadFile("testdata/rxe-6.12.txtar")
	if err != nil {
		f.Fatal(err)
	}
	text := string(data)
	marks := fileMarker.FindAllStringSubmatchIndex(text, -1)
	for i, m := range marks {
		// Seed with each file's own recorded contents.
		end := len(text)
		if i+1 < len(marks) {
			end = marks[i+1][0]
		}
		f.Add(uint16(i), text[m[1]:end])
	}
	f.Fuzz(func(t *testing.T, which uint16, contents string) {
		if strings.Contains(contents, "\n--") || strings.HasPrefix(contents, "--") {
			return // would change the tree's structure, not a file
		}
		m := marks[int(which)%len(marks)]
		end := len(text)
		if i := int(which)%len(marks) + 1; i < len(marks) {
			end = marks[i][0]
		}
		tree, err := sysfstest.Parse([]byte(text[:m[1]] + contents + "\n" + text[end:]))
		if err != nil {
			return
		}
		s := sysfs.NewFS(tree)
		check := func(what string, err error) {
			var pe *sysfs.ParseError
			var pathErr *fs.PathError
			if err == nil || errors.As(err, &pe) || errors.As(err, &pathErr) ||
				errors.Is(err, sysfs.ErrNoDevice) || errors.Is(err, sysfs.ErrNoUverbs) || errors.Is(err, sysfs.ErrGIDEmpty) || errors.Is(err, fs.ErrInvalid) ||
				errors.Is(err, sysfs.ErrNoCharDev) || errors.Is(err, sysfs.ErrNoAccess) || errors.Is(err, sysfs.ErrABIVersion) {
				return
			}
			t.Errorf("%s: %v (%T) is not a ParseError or PathError", what, err, err)
		}
		devs, err := s.AllDevices()
		check("AllDevices", err)
		for _, d := range devs {
			_ = d.Problem
		}
		// Devices is AllDevices filtered: reading the tree once more would
		// halve the executions and reach nothing new.
		_, err = s.Device("rxe0")
		check("Device", err)
		_, err = s.Uverbs("rxe0")
		check("Uverbs", err)
		for i := 0; i < 4; i++ {
			_, err = s.ReadGID("rxe0", 1, i)
			check("ReadGID", err)
		}
		_, err = s.ReadPKey("rxe0", 1, 0)
		check("ReadPKey", err)
	})
}
