package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/leakcheck"
)

// TestMain fails the package if its tests leave file descriptors or
// /dev/infiniband mappings behind.
func TestMain(m *testing.M) { leakcheck.Main(m) }

func TestParseC(t *testing.T) {
	got, err := parseC("qps 100 create_ns 10 connect_ns 20 destroy_ns 30\n")
	want := result{Tool: "c", Work: "qps", N: 100, CreateNs: 10, ConnectNs: 20, DestroyNs: 30}
	if err != nil || !cmp.Equal(got, want) {
		t.Errorf("parseC qps = %+v, %v; want %+v", got, err, want)
	}
	got, err = parseC("mr 1048576 reg_ns 5 dereg_ns 6\n")
	want = result{Tool: "c", Work: "mr", N: 1 << 20, RegNs: 5, DeregNs: 6}
	if err != nil || !cmp.Equal(got, want) {
		t.Errorf("parseC mr = %+v, %v; want %+v", got, err, want)
	}
	got, err = parseC("mr 1048576 reg_ns 5 dereg_ns 6 reg_cpu 3 dereg_cpu 4\n")
	want = result{Tool: "c", Work: "mr", N: 1 << 20, RegNs: 5, DeregNs: 6, RegCPU: 3, DeregCPU: 4}
	if err != nil || !cmp.Equal(got, want) {
		t.Errorf("parseC mr cpu = %+v, %v; want %+v", got, err, want)
	}
	got, err = parseC("qps 2 create_ns 10 connect_ns 20 destroy_ns 30 create_cpu 9 connect_cpu 8 destroy_cpu 7 create_sys 6 connect_sys 5\n")
	want = result{Tool: "c", Work: "qps", N: 2, CreateNs: 10, ConnectNs: 20, DestroyNs: 30, CreateCPU: 9, ConnectCPU: 8,
		DestroyCPU: 7, CreateSys: 6, ConnectSys: 5}
	if err != nil || !cmp.Equal(got, want) {
		t.Errorf("parseC qps sys = %+v, %v; want %+v", got, err, want)
	}
	for _, bad := range []string{"", "qps 1 create_ns x connect_ns 2 destroy_ns 3", "mr 1 reg_ns", "mr 1 nosuch 2", "bw 1 2 3 4 5"} {
		if _, err := parseC(bad); err == nil {
			t.Errorf("parseC(%q) succeeded", bad)
		}
	}
}

func TestParseBW(t *testing.T) {
	out := ` #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 65536      80000            52.31              48.07                0.000769
---------------------------------------------------------------------------------------
`
	if v, err := parseBW(out); err != nil || v != 48.07 {
		t.Errorf("parseBW = %v, %v; want 48.07", v, err)
	}
	if _, err := parseBW("Couldn't read remote address\n"); err == nil {
		t.Error("parseBW found a row in a failure")
	}
}

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("1, 100,1K,64M,1G")
	if diff := cmp.Diff([]int64{1, 100, 1 << 10, 64 << 20, 1 << 30}, got); err != nil || diff != "" {
		t.Errorf("parseSizes: %v %s", err, diff)
	}
	for _, bad := range []string{"0", "-1", "x", "1T"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) succeeded", bad)
		}
	}
}

func TestTables(t *testing.T) {
	rs, err := parseResults([]byte("noise\n" + linePrefix + `{"tool":"go","work":"qps","n":100,"rep":1,"create_ns":2000000,"connect_ns":4000000,"destroy_ns":1000000,"create_cpu":1000000,"alloc_bytes":20000,"live_bytes":4000,"objects":400}` + "\n" +
		linePrefix + `{"tool":"c","work":"qps","n":100,"rep":1,"create_ns":4000000,"connect_ns":4000000,"destroy_ns":1000000,"create_cpu":2000000}` + "\n"))
	if err != nil || len(rs) != 2 {
		t.Fatalf("parseResults: %v, %d results", err, len(rs))
	}
	var b bytes.Buffer
	printTables(&b, rs)
	for _, want := range []string{
		"| 100 RC QPs per device (×2) | create | 1.00 (1.00–1.00) | 2.00 (2.00–2.00) | 0.500 | 0.500 | separate | 2.00 | 4.00 | 0.500 |",
		"| QP (of 100 per device, created + connected) | 100 (100–100) | 2.0 (2.0–2.0) | 20 (20–20) |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("tables lack %q:\n%s", want, b.String())
		}
	}
	// With system time on both sides, two rows split create + connect.
	rs[0].CreateSys, rs[0].ConnectSys = 500000, 250000
	rs[1].CreateSys, rs[1].ConnectSys = 1000000, 0
	b.Reset()
	printTables(&b, rs)
	for _, want := range []string{
		"| 100 RC QPs per device (×2) | create + connect, user CPU | 0.25 (0.25–0.25) | 1.00 (1.00–1.00) | 0.250 | 0.250 | separate | – | – | – |",
		"| 100 RC QPs per device (×2) | create + connect, system CPU | 0.75 (0.75–0.75) | 1.00 (1.00–1.00) | 0.750 | 0.750 | separate | – | – | – |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("tables lack %q:\n%s", want, b.String())
		}
	}
}
