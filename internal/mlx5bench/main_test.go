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
	goOut := []byte("goos: linux\nBenchmarkVsLibmlx5/write-2   \t 2000000\t        51.80 ns/op\t        34.36 cpu-ns/op\t        36.22 wall-ns/op\t       0 B/op\t       0 allocs/op\nPASS\n")
	if v, err := parseGo(goOut, "BenchmarkVsLibmlx5/write"); err != nil || v != (sample{36.22, 34.36}) {
		t.Errorf("parseGo = %v, %v; want {36.22 34.36}", v, err)
	}
	if _, err := parseGo([]byte("BenchmarkVsLibmlx5/write-2 1 36.22 ns/op 34.36 cpu-ns/op\n"), "BenchmarkVsLibmlx5/write"); err == nil {
		t.Error("parseGo accepted a line without wall-ns/op")
	}
	if _, err := parseGo([]byte("BenchmarkVsLibmlx5/write-2 1 36.22 ns/op 36.22 wall-ns/op\n"), "BenchmarkVsLibmlx5/write"); err == nil {
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

func TestSelectCases(t *testing.T) {
	for _, bad := range []struct {
		only  string
		scale float64
	}{{"nosuch", 1}, {"", 0}, {"", -1}} {
		if _, err := selectCases(bad.only, bad.scale); err == nil {
			t.Errorf("selectCases(%q, %v) succeeded", bad.only, bad.scale)
		}
	}
	cs, err := selectCases("write,poll16", 0.5)
	got := []any{err, len(cs), cs[0].Iters}
	if diff := cmp.Diff([]any{nil, 2, 1_000_000}, got); diff != "" {
		t.Error(diff)
	}
}
