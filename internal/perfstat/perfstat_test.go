package perfstat

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestMinMax(t *testing.T) {
	if lo, hi := MinMax([]float64{3, 1, 2}); lo != 1 || hi != 3 {
		t.Errorf("MinMax = %v, %v", lo, hi)
	}
}

func TestParseLines(t *testing.T) {
	type m struct{ A int }
	got, err := ParseLines[m]([]byte("noise\nX {\"A\":1}\nX {\"A\":2}\n"), "X ")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]m{{1}, {2}}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := ParseLines[m]([]byte("noise\n"), "X "); err == nil {
		t.Error("no lines: no error")
	}
	if _, err := ParseLines[m]([]byte("X {"), "X "); err == nil || !strings.Contains(err.Error(), "guest line") {
		t.Errorf("bad JSON: %v", err)
	}
}
