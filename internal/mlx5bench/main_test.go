package main

import (
	"strings"
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

func TestParseCallgrindTree(t *testing.T) {
	out := `--------------------------------------------------------------------------------
Ir
--------------------------------------------------------------------------------
58,969,005 (98.49%)  *  ???:run [/tmp/cb/bench]

31,957,779 (53.38%)  < ???:run (104,097x) [/tmp/cb/bench]
31,957,779 (53.38%)  *  ???:0x00000000000552e0 [/usr/lib/x86_64-linux-gnu/libmlx5.so.1.24.44.0]

19,135,999 (31.99%)  < ???:run (103,999x) [/tmp/cb/bench]
       97 ( 0.00%)  < ???:probe (97x) [/tmp/cb/bench]
19,153,664 (31.99%)  *  ???:0x000000000001e880 [/usr/lib/x86_64-linux-gnu/libmlx5.so.1.24.44.0]

 12,977,039 ( 3.41%)  < provider/mlx5/bench_vs_libmlx5_test.go:github.com/goverbs/goverbs/provider/mlx5.benchPostPoll.func2 (58,193x) [/tmp/mb.test]
        556 ( 0.00%)  < provider/mlx5/bench_vs_libmlx5_test.go:github.com/goverbs/goverbs/provider/mlx5.benchPostPoll (2x) [/tmp/mb.test]
 12,977,485 ( 3.41%)  *  /work/main/provider/mlx5/poll.go:github.com/goverbs/goverbs/provider/mlx5.(*CQ).Poll

 10,591,600 ( 2.79%)  *  provider/mlx5/poll.go:github.com/goverbs/goverbs/provider/mlx5.(*CQ).Poll [/tmp/mb.test]
`
	fns, err := parseTree(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	post, poll, err := perCall(fns, ":0x00000000000552e0", ":0x000000000001e880", false)
	if err != nil || post != 307 || poll != 184 {
		t.Errorf("perCall = %v, %v, %v; want 307, 184", post, poll, err)
	}
	if _, poll, err := perCall(fns, "nothing", ":0x000000000001e880", true); err != nil || poll != 184 {
		t.Errorf("perCall, poll only = %v, %v; want 184", poll, err)
	}
	if _, _, err := perCall(fns, ":0x0+[0-9a-f]+", ":0x000000000001e880", false); err == nil {
		t.Error("perCall took a name two functions match")
	}
	if _, poll, err := perCall(fns, "nothing", `\.\(\*CQ\)\.Poll`, true); err != nil || poll != 223 {
		t.Errorf("perCall of a Go function callgrind names twice = %v, %v; want 223", poll, err)
	}
	if p, q, err := parseOps([]byte("write 1000 85930 82855\nops /lib/x86_64-linux-gnu/libmlx5.so.1 0x552e0 0x1e880\n")); err != nil || p != 0x552e0 || q != 0x1e880 {
		t.Errorf("parseOps = %#x, %#x, %v", p, q, err)
	}
	if _, _, err := parseOps([]byte("write 1000 85930 82855\n")); err == nil {
		t.Error("parseOps found no ops line and said nothing")
	}
}
