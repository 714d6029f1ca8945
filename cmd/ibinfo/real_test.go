package main

import (
	"errors"
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/sysfs"
	"github.com/goverbs/goverbs/sysfs/sysfstest"
)

// TestRealSystemList checks which devices of a sysfs tree ibinfo lists, as
// rdma-core would: a node that cannot be opened is listed (the open fails
// later), a missing uverbs device or node is not, nor is a device goverbs
// has no provider for.
func TestRealSystemList(t *testing.T) {
	tree := sysfstest.MustLoad("../../sysfs/testdata/synthetic.txtar")
	sys := &realSystem{root: tree, fs: sysfs.NewFS(tree)}
	usable, skipped, err := sys.Devices()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, h := range usable {
		names = append(names, h.name)
	}
	if diff := cmp.Diff([]string{"rxe0", "mlx5_0"}, names); diff != "" {
		t.Errorf("listed devices (-want +got):\n%s", diff)
	}
	why := map[string]error{}
	for _, s := range skipped {
		why[s.name] = s.reason
	}
	for name, want := range map[string]error{
		"mlx5_1": sysfs.ErrNoUverbs,
		"siw0":   fs.ErrNotExist,
		"hfi1_0": nil, // no provider: the reason is goverbs', not sysfs's
	} {
		err, ok := why[name]
		switch {
		case !ok:
			t.Errorf("%s not among the skipped devices %v", name, why)
		case want != nil && !errors.Is(err, want):
			t.Errorf("%s skipped for %v, want %v", name, err, want)
		}
	}
}

func TestRealSystemNoRDMA(t *testing.T) {
	sys := &realSystem{root: fstest.MapFS{"sys/class/net/lo/mtu": {Data: []byte("65536\n")}}, fs: sysfs.NewFS(fstest.MapFS{})}
	_, _, err := sys.Devices()
	var le *listError
	if !errors.As(err, &le) || le.perror != "Function not implemented" || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Devices() error %v; want a listError with ENOSYS's text wrapping fs.ErrNotExist", err)
	}
}

func TestReadOnce(t *testing.T) {
	fsys := fstest.MapFS{"big": {Data: make([]byte, 300)}, "small": {Data: []byte("MT_1\n")}, "empty": {}}
	if got := readOnce(fsys, "big", 256); len(got) != 256 {
		t.Errorf("big: %d bytes, want 256", len(got))
	}
	if got := string(readOnce(fsys, "small", 256)); got != "MT_1\n" {
		t.Errorf("small: %q", got)
	}
	if got := readOnce(fsys, "empty", 256); got == nil || len(got) != 0 {
		t.Errorf("empty: %v, want empty and not nil", got)
	}
	if got := readOnce(fsys, "missing", 256); got != nil {
		t.Errorf("missing: %v, want nil", got)
	}
}
