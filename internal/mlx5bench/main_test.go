package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/leakcheck"
)

// TestMain fails the package if its tests leave file descriptors or
// /dev/infiniband mappings behind.
func TestMain(m *testing.M) { leakcheck.Main(m) }

func TestParse(t *testing.T) {
	goOut := []byte("goos: linux\nBenchmarkVsLibmlx5/write-2   \t 2000000\t        36.22 ns/op\t        34.36 cpu-ns/op\t       0 B/op\t       0 allocs/op\nPASS\n")
	if v, err := parseGo(goOut, "BenchmarkVsLibmlx5/write"); err != nil || v != (sample{36.22, 34.36}) {
		t.Errorf("parseGo = %v, %v; want {36.22 34.36}", v, err)
	}
	if _, err := parseGo([]byte("BenchmarkVsLibmlx5/write-2 1 36.22 ns/op\n"), "BenchmarkVsLibmlx5/write"); err == nil {
		t.Error("parseGo accepted a line without cpu-ns/op")
	}
	if _, err := parseGo(goOut, "BenchmarkVsLibmlx5/ud"); err == nil {
		t.Error("parseGo found a case that is not there")
	}
	cOut := []byte("write 1000000 40201431 40000000\nud 1000000 42814738 42000000\n")
	if v, err := parseC(cOut, "ud"); err != nil || v != (sample{42.814738, 42}) {
		t.Errorf("parseC = %v, %v; want {42.814738 42}", v, err)
	}
	for _, bad := range []string{"", "write x 1 1\n", "write 0 10 1\n"} {
		if _, err := parseC([]byte(bad), "write"); err == nil {
			t.Errorf("parseC(%q) succeeded", bad)
		}
	}
}

func TestSummary(t *testing.T) {
	if got := middle([]float64{3, 1, 2}); got != 2 {
		t.Errorf("middle odd = %v", got)
	}
	if got := middle([]float64{4, 1, 2, 3}); got != 2.5 {
		t.Errorf("middle even = %v", got)
	}
	got := []string{overlap([]float64{1, 2}, []float64{3, 4}), overlap([]float64{1, 3}, []float64{2, 4})}
	if diff := cmp.Diff([]string{"separate", "overlap"}, got); diff != "" {
		t.Error(diff)
	}
	for _, bad := range []struct {
		only  string
		scale float64
	}{{"nosuch", 1}, {"", 0}, {"", -1}} {
		if _, err := selectCases(bad.only, bad.scale); err == nil {
			t.Errorf("selectCases(%q, %v) succeeded", bad.only, bad.scale)
		}
	}
}
