package sysfs

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/sysfs/sysfstest"
)

// TestNetlinkOrder checks that when netlink answers (the running system),
// its order and driver IDs win over sysfs's.
func TestNetlinkOrder(t *testing.T) {
	tree := sysfstest.MustLoad("testdata/synthetic.txtar")
	for _, tc := range []struct {
		name    string
		nl      []nlDevice
		nlErr   error
		order   []string
		drivers []string
	}{
		{"no netlink", nil, errors.New("EPROTONOSUPPORT"),
			[]string{"rxe0", "mlx5_0", "siw0", "hfi1_0", "mlx5_1"}, []string{"", "mlx5_core", "", "hfi1", "mlx5_core"}},
		// Kernel index order differs from uverbs numbers once devices have
		// been removed and added again.
		{"kernel order", []nlDevice{{"siw0", 18}, {"mlx5_1", 0}, {"rxe0", 14}, {"hfi1_0", 15}, {"mlx5_0", 1}}, nil,
			[]string{"siw0", "mlx5_1", "rxe0", "hfi1_0", "mlx5_0"}, []string{"siw", "mlx5_core", "rxe", "hfi1", "mlx5_core"}},
		// Devices netlink does not show (another namespace) come last.
		{"partial", []nlDevice{{"hfi1_0", 15}, {"rxe0", 14}}, nil,
			[]string{"hfi1_0", "rxe0", "mlx5_0", "siw0", "mlx5_1"}, []string{"hfi1", "rxe", "mlx5_core", "", "mlx5_core"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFS(tree)
			f.netlink = func() ([]nlDevice, error) { return tc.nl, tc.nlErr }
			devs, err := f.AllDevices()
			if err != nil {
				t.Fatal(err)
			}
			var order, drivers []string
			for _, d := range devs {
				order = append(order, d.Name)
				drivers = append(drivers, d.Driver)
			}
			if diff := cmp.Diff(tc.order, order); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.drivers, drivers); diff != "" {
				t.Errorf("drivers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompareNumbered(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"uverbs2", "uverbs10", -1}, {"uverbs10", "uverbs2", 1}, {"uverbs1", "uverbs1", 0},
		{"abi_version", "uverbs0", -1}, {"uverbs", "uverbs0", -1}, {"mlx5_10", "mlx5_9", 1},
	} {
		if got := compareNumbered(tc.a, tc.b); got != tc.want {
			t.Errorf("compareNumbered(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
