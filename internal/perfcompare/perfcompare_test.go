package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the rendering")

func TestValue(t *testing.T) {
	lat := " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n" +
		" 2       1000          30.50          200.25       33.50    \t       35.00       \t4.20   \t\t60.00   \t\t190.00 \n"
	bw := " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n" +
		" 65536      5000             70.12              65.50  \t\t   0.001048\n"
	for _, tc := range []struct {
		metric, out string
		want        float64
	}{{"lat", lat, 33.5}, {"bw", bw, 65.5}, {"rate", bw, 0.001048}} {
		got, err := value(tc.metric, tc.out)
		if err != nil || got != tc.want {
			t.Errorf("value(%s) = %v, %v; want %v", tc.metric, got, err, tc.want)
		}
	}
	nan := strings.Replace(lat, "4.20   ", "-nan   ", 1)
	if got, err := value("lat", nan); err != nil || got != 33.5 {
		t.Errorf("row with a -nan deviation: %v, %v", got, err)
	}
	if _, err := value("lat", bw); err == nil {
		t.Error("a bandwidth row read as latency")
	}
}

// TestValuesAll reads the rows of a -a run.
func TestValuesAll(t *testing.T) {
	out := " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n" +
		" 2          100              0.10               0.08  \t\t   0.040000\n" +
		" 4          100              0.20               0.15  \t\t   0.037500\n" +
		" 8388608    100              50.00              45.10  \t\t   0.000005\n" +
		"---------------------------------------------------------------------------------------\n"
	got, err := values("bw", out)
	if err != nil {
		t.Fatal(err)
	}
	want := []point{{2, 0.08}, {4, 0.15}, {8388608, 45.1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	precise := []point{{2, 0.040000 * 2e6 / (1 << 20)}, {4, 0.037500 * 4e6 / (1 << 20)}, {8388608, 45.1}}
	if diff := cmp.Diff(precise, preciseBW(got, out)); diff != "" {
		t.Errorf("bandwidth from the message rate under 1 MB/s (-want +got):\n%s", diff)
	}
	// A row without a finite figure is left out; only such rows: an error.
	inf := strings.Replace(out, "0.15  ", "inf   ", 1)
	if got, err := values("bw", inf); err != nil || len(got) != 2 {
		t.Errorf("rows with an inf: %v, %v", got, err)
	}
	if _, err := value("rate", " 8          100              inf               inf  \t\t   -nan\n"); err == nil {
		t.Error("a -nan message rate read as a figure")
	}
}

func TestParseGuest(t *testing.T) {
	out := "boot noise\n" + linePrefix + `{"case":"write_lat 2B","tool":"c","rep":1,"value":11,"ok":true}` + "\n" +
		linePrefix + "\n" + // a line that does not parse is left out
		sweepPrefix + `{"test":"write_bw","tool":"go","rep":1,"points":[{"size":2,"value":0.08}],"ok":true}` + "\n"
	kr, err := parseGuest([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := kernelRun{
		Measurements: []measurement{{Case: "write_lat 2B", Tool: "c", Rep: 1, Value: 11, OK: true}},
		Sweeps:       []sweep{{Test: "write_bw", Tool: "go", Rep: 1, Points: []point{{2, 0.08}}, OK: true}},
	}
	if diff := cmp.Diff(want, kr); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := parseGuest([]byte("nothing\n")); err == nil {
		t.Error("a guest output without measurements accepted")
	}
}

func TestSummarize(t *testing.T) {
	ms := []measurement{
		{Case: "write_lat 2B", Tool: "go-c", OK: true},
		{Case: "write_lat 2B", Tool: "c-go", OK: false, Detail: "boom"},
		{Case: "write_lat 2B", Tool: "go", Rep: 1, Value: 10, OK: true},
		{Case: "write_lat 2B", Tool: "go", Rep: 2, Value: 30, OK: true},
		{Case: "write_lat 2B", Tool: "go", Rep: 3, Value: 20, OK: true},
		{Case: "write_lat 2B", Tool: "c", Rep: 1, Value: 40, OK: true},
		{Case: "write_lat 2B", Tool: "c", Rep: 2, Value: 40, OK: true},
		{Case: "write_lat 2B", Tool: "godef", Rep: 1, Value: 8, OK: true},
		{Case: "send_bw 4KiB", Tool: "c", Rep: 1, Value: 1, OK: true}, // ordered after write_lat 2B by cases()
		{Case: "no such case", Tool: "c", Rep: 1, Value: 1, OK: true},
	}
	rows := summarize(ms)
	var names []string
	for _, r := range rows {
		names = append(names, r.Name)
	}
	if diff := cmp.Diff([]string{"write_lat 2B", "send_bw 4KiB", "no such case"}, names); diff != "" {
		t.Fatalf("rows (-want +got):\n%s", diff)
	}
	r := rows[0]
	got := []any{r.Go.Med, r.C.Med, ratio(r.Go, r.C), len(r.Go.All), len(r.C.All), r.Interop, len(r.Failures), r.Go.Min, r.Go.Max, r.GoDef.Med, r.Metric}
	want := []any{20.0, 40.0, 0.5, 3, 2, "FAIL c-go", 1, 10.0, 30.0, 8.0, "lat"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestVerdict(t *testing.T) {
	s := func(v ...float64) stat { return newStat(v) }
	for _, tc := range []struct {
		metric string
		g, c   stat
		want   string
	}{
		{"lat", s(10, 12), s(11, 13), verdictOverlap},
		{"lat", s(10, 12), s(12, 13), verdictOverlap}, // touching ranges overlap
		{"lat", s(10, 11), s(12, 13), verdictBetter},
		{"lat", s(14, 15), s(12, 13), verdictWorse},
		{"bw", s(14, 15), s(12, 13), verdictBetter},
		{"rate", s(10, 11), s(12, 13), verdictWorse},
		{"bw", s(), s(12, 13), verdictNone},
	} {
		if got := verdict(tc.metric, tc.g, tc.c); got != tc.want {
			t.Errorf("verdict(%s, %v, %v) = %q, want %q", tc.metric, tc.g.All, tc.c.All, got, tc.want)
		}
	}
}

// TestCases checks the grid and perftest's effective settings on rxe.
func TestCases(t *testing.T) {
	cs := cases()
	if len(cs) != 26 {
		t.Errorf("%d cases, want 26 (6 tests × 4 sizes, 2 atomics)", len(cs))
	}
	byName := map[string]benchCase{}
	for _, c := range cs {
		byName[c.Name] = c
	}
	type brief struct {
		Settings   string
		Metric     string
		Iters      int
		GoDefaults bool
	}
	for name, want := range map[string]brief{
		"write_lat 2B":    {"-I 0 -t 1", "lat", 2000, true},
		"send_lat 4KiB":   {"-I 0 -t 1", "lat", 2000, false},
		"read_lat 64B":    {"-t 1", "lat", 2000, false},
		"write_bw 64B":    {"-I 0 -t 128 -l 1 -Q 100", "rate", 6400, true},
		"send_bw 4KiB":    {"-I 0 -t 128 -l 1 -Q 100", "rate", 6400, true},
		"send_bw 64KiB":   {"-I 0 -t 128 -l 1 -Q 1", "bw", 2000, false},
		"read_bw 2B":      {"-t 128 -l 1 -Q 100", "rate", 6400, true},
		"atomic_lat 8B":   {"-t 1", "lat", 2000, false},
		"atomic_bw 8B":    {"-t 128 -l 1 -Q 100", "rate", 6400, true},
		"write_lat 64KiB": {"-I 0 -t 1", "lat", 2000, false},
	} {
		c, ok := byName[name]
		if !ok {
			t.Errorf("no case %q", name)
			continue
		}
		got := brief{strings.Join(c.Settings, " "), c.Metric, c.Iters, c.GoDefaults}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	var sel []string
	for _, c := range selectCases("write_lat 64B, send_bw 4KiB") {
		sel = append(sel, c.Name)
	}
	if diff := cmp.Diff([]string{"write_lat 64B", "send_bw 4KiB"}, sel); diff != "" {
		t.Errorf("-only (-want +got):\n%s", diff)
	}
}

const (
	docsFixture   = "# Performance\n\nintro\n\n" + docsBegin + "\nold tables\n" + docsEnd + "\n\n## Later section\n"
	readmeFixture = "# goverbs\n\n- other figures\n" + readmeBegin + "\n- old summary\n" + readmeEnd + "\n- more figures\n"
)

// TestReplay renders testdata/raw.json into a scratch tree and compares
// the text with testdata/*.golden (go test -update rewrites them).
func TestReplay(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"docs/performance.md": docsFixture, "README.md": readmeFixture} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var tables bytes.Buffer
	if err := hostMain(context.Background(), options{replay: "testdata/raw.json", root: root, stdout: &tables}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct{ got, golden string }{
		{"docs/performance.md", "performance.golden.md"},
		{"README.md", "README.golden.md"},
	} {
		got, err := os.ReadFile(filepath.Join(root, f.got))
		if err != nil {
			t.Fatal(err)
		}
		golden := filepath.Join("testdata", f.golden)
		if *update {
			if err := os.WriteFile(golden, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("%s (-%s +got):\n%s", f.got, golden, diff)
		}
	}
	if !strings.Contains(tables.String(), "| write_lat 2B |") {
		t.Errorf("the tables printed lack write_lat 2B:\n%s", tables.String())
	}
	for _, test := range sweepTests {
		b, err := os.ReadFile(filepath.Join(root, "docs", "perf-"+test+".svg"))
		if err != nil {
			t.Fatal(err)
		}
		d := xml.NewDecoder(bytes.NewReader(b))
		lines := 0
		for {
			tok, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", test, err)
			}
			if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
				lines++
			}
		}
		if lines != 4 { // two tools × two kernels
			t.Errorf("%s: %d lines, want 4", test, lines)
		}
	}
}

// TestReadmeCoversEveryRow checks that each test's range in the summary
// holds every row's ratio, and names the rows without a figure.
func TestReadmeCoversEveryRow(t *testing.T) {
	run := &rawRun{Reps: 2, Kernels: []kernelRun{
		{Kernel: "6.1", Measurements: []measurement{
			{Case: "write_lat 2B", Tool: "c", Value: 10, OK: true}, {Case: "write_lat 2B", Tool: "go", Value: 9, OK: true},
			{Case: "write_lat 64B", Tool: "c", Value: 10, OK: true}, {Case: "write_lat 64B", Tool: "go", Value: 13, OK: true},
		}},
		{Kernel: "6.12", Measurements: []measurement{
			{Case: "write_lat 2B", Tool: "c", Value: 10, OK: true}, {Case: "write_lat 2B", Tool: "go", Value: 11, OK: true},
			{Case: "write_lat 64B", Tool: "c", Value: 10, OK: true}, {Case: "write_lat 64B", Tool: "go", OK: false},
		}},
	}}
	got := renderReadme(run)
	want := "  - write_lat: 0.90–1.30 over 4 rows, ranges separate in 3 (2B on 6.1 ibperf better, 64B on 6.1 ibperf worse, 2B on 6.12 ibperf worse), 1 without a figure (64B on 6.12)\n"
	if !strings.Contains(got, want) {
		t.Errorf("summary lacks\n%s\ngot:\n%s", want, got)
	}
}

func TestReplaceBetween(t *testing.T) {
	got, err := replaceBetween("a\n<b>\nold\n<e>\nz\n", "<b>", "<e>", "new\n\n")
	if err != nil || got != "a\n<b>\nnew\n<e>\nz\n" {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := replaceBetween("a\n<e>\n<b>\n", "<b>", "<e>", "x"); err == nil {
		t.Error("markers in the wrong order accepted")
	}
	if _, err := replaceBetween("a\n", "<b>", "<e>", "x"); err == nil {
		t.Error("missing markers accepted")
	}
}
