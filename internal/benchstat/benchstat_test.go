package benchstat

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/leakcheck"
)

// TestMain fails the package if its tests leave file descriptors or
// /dev/infiniband mappings behind.
func TestMain(m *testing.M) { leakcheck.Main(m) }

func TestStats(t *testing.T) {
	got := []any{
		Median(nil), Median([]float64{3, 1, 2}), Median([]float64{4, 1, 2, 3}),
		Relation([]float64{1, 2}, []float64{3, 4}), Relation([]float64{1, 3}, []float64{2, 4}),
		Column([]string{"a", "bb"}, func(s string) float64 { return float64(len(s)) }),
	}
	want := []any{0.0, 2.0, 2.5, "separate", "overlap", []float64{1, 2}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
}
