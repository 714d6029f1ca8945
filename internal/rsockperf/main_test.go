package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/leakcheck"
)

// TestMain fails the package if its tests leave file descriptors or
// /dev/infiniband mappings behind.
func TestMain(m *testing.M) { leakcheck.Main(m) }

func TestValue(t *testing.T) {
	out := "name      bytes   xfers   iters   total       time     Gb/sec    usec/xfer\n" +
		"custom    64k     200     1       25m         1.23s      0.17    3075.10\n"
	for _, tc := range []struct {
		metric string
		want   float64
	}{{"bw", 65536 / 3075.10}, {"lat", 3075.10}} {
		got, err := value(tc.metric, 65536, out)
		if err != nil || got != tc.want {
			t.Errorf("value(%s) = %v, %v, want %v", tc.metric, got, err, tc.want)
		}
	}
	if _, err := value("bw", 1, "data verification failed byte 3\n"+out); err == nil {
		t.Error("a verification failure gave a value")
	}
	if _, err := value("bw", 1, "name\n"); err == nil {
		t.Error("no row gave a value")
	}
}

func TestReplaceBetween(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.md")
	if err := os.WriteFile(path, []byte("a\n"+beginMarker+"\nold\n"+endMarker+"\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := replaceBetween(path, "new table\n"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if diff := cmp.Diff("a\n"+beginMarker+"\nnew table\n"+endMarker+"\nb\n", string(got)); diff != "" {
		t.Errorf("file (-want +got):\n%s", diff)
	}
	os.WriteFile(path, []byte("no markers"), 0o644)
	if _, err := replaceBetween(path, ""); err == nil {
		t.Error("a file without markers was accepted")
	}
}

func TestSummarize(t *testing.T) {
	ms := []measurement{
		{Case: "bw 64 B", Tool: "go-c", OK: true, Value: 1},
		{Case: "bw 64 B", Tool: "c-go", OK: false, Detail: "boom"},
		{Case: "bw 64 B", Tool: "go", Rep: 1, OK: true, Value: 1},
		{Case: "bw 64 B", Tool: "go", Rep: 2, OK: true, Value: 3},
		{Case: "bw 64 B", Tool: "c", Rep: 1, OK: true, Value: 2},
		{Case: "bw 64 B", Tool: "tcp", Rep: 1, OK: true, Value: 5},
	}
	var b strings.Builder
	printTable(&b, summarize(ms))
	want := "| bw 64 B | `-S 64 -C 100000 -I 1` | MB/s | 2.00 (1.00–3.00) | 2.00 (2.00–2.00) | 1.000 | overlap | 5.00 (5.00–5.00) | 2/1/1 | FAIL c-go |"
	if !strings.Contains(b.String(), want) || !strings.Contains(b.String(), "failure: bw 64 B: c-go rep 0: boom") {
		t.Errorf("table:\n%s\nwant the row\n%s", b.String(), want)
	}
	// A case one tool has no figure for has no relation of ranges.
	b.Reset()
	printTable(&b, summarize(ms[:3]))
	if want := "| 1.000 | – |"; strings.Contains(b.String(), want) || !strings.Contains(b.String(), "| – | – |") {
		t.Errorf("table without C's figures:\n%s", b.String())
	}
}
