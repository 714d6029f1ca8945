//go:build linux

package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/goverbs/goverbs/sysfs"
	"github.com/goverbs/goverbs/sysfs/sysfstest"
)

// TestRoundTrip records a synthetic tree written to disk and checks that
// the sysfs package reads the recording as it reads the original.
func TestRoundTrip(t *testing.T) {
	orig := sysfstest.MustLoad("../../testdata/synthetic.txtar")
	root := t.TempDir()
	if err := orig.Materialize(root); err != nil {
		t.Fatal(err)
	}
	data, err := recordSysfs(root, 1)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := sysfstest.Parse(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	want, err := sysfs.NewFS(orig).AllDevices()
	if err != nil {
		t.Fatal(err)
	}
	got, err := sysfs.NewFS(rec).AllDevices()
	if err != nil {
		t.Fatal(err)
	}
	// Character devices become plain files on disk, so the recording has
	// none; and read errors become empty files, which spoils the GID
	// types of mlx5_0 (rxe0's failing entries are empty GIDs, not read).
	opts := cmp.Options{
		cmpopts.IgnoreFields(sysfs.Device{}, "Problem"),
		cmpopts.IgnoreFields(sysfs.Port{}, "GIDs"),
	}
	if diff := cmp.Diff(want, got, opts); diff != "" {
		t.Errorf("recorded tree reads differently (-original +recorded):\n%s", diff)
	}
	if diff := cmp.Diff(want[0].Ports[0].GIDs, got[0].Ports[0].GIDs); want[0].Name != "rxe0" || diff != "" {
		t.Errorf("%s GIDs differ (-original +recorded):\n%s", want[0].Name, diff)
	}
}
