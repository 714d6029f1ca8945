package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/leakcheck"
	"github.com/goverbs/goverbs/internal/testvm/livetest"
	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		status int
		stderr string
	}{
		{[]string{"-h"}, 0, "usage: rdmastat"},
		{[]string{"-x"}, 2, "flag provided but not defined"},
		{[]string{"nosuchtopic"}, 2, `unknown topic "nosuchtopic"`},
	} {
		var out, errb bytes.Buffer
		if got := run(tc.args, &out, &errb); got != tc.status || !strings.Contains(errb.String(), tc.stderr) {
			t.Errorf("rdmastat %v: status %d, stderr %q; want %d and %q", tc.args, got, errb.String(), tc.status, tc.stderr)
		}
	}
}

func decode(t *testing.T, what string, b []byte) []map[string]any {
	t.Helper()
	var objs []map[string]any
	if err := json.Unmarshal(b, &objs); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, b)
	}
	sort.Slice(objs, func(i, j int) bool {
		a, _ := json.Marshal(objs[i])
		b, _ := json.Marshal(objs[j])
		return string(a) < string(b)
	})
	return objs
}

// TestVMMatchesRdma runs rdmastat -j for every topic, with live objects of
// this process, ibv_rc_pingpong and rping, and compares each line with
// rdma -j.
func TestVMMatchesRdma(t *testing.T) {
	if !vmenv.InVM() {
		t.Skip("needs the test VM")
	}
	livetest.Start(t)
	for _, tc := range []struct {
		args []string
		rdma []string
	}{
		{[]string{"stat"}, []string{"statistic"}},
		{[]string{"qpstat"}, []string{"statistic", "qp", "show"}},
		{[]string{"res"}, []string{"res"}},
		{[]string{"qp"}, []string{"res", "show", "qp"}},
		{[]string{"cq"}, []string{"res", "show", "cq"}},
		{[]string{"mr"}, []string{"res", "show", "mr"}},
		{[]string{"pd"}, []string{"res", "show", "pd"}},
		{[]string{"cm_id"}, []string{"res", "show", "cm_id"}},
		{[]string{"ctx"}, []string{"res", "show", "ctx"}},
		{[]string{"link"}, []string{"link"}},
		{[]string{"dev"}, []string{"dev"}},
		{[]string{"-d", vmenv.RXE1, "qp"}, []string{"res", "show", "qp", "link", vmenv.RXE1}},
		{[]string{"-d", vmenv.RXE1, "stat"}, []string{"statistic", "show", "link", vmenv.RXE1 + "/1"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			if st := run(append([]string{"-j"}, tc.args...), &out, &errb); st != 0 {
				t.Fatalf("status %d: %s", st, errb.String())
			}
			theirs, err := exec.Command("rdma", append([]string{"-j"}, tc.rdma...)...).Output()
			if err != nil {
				t.Fatalf("rdma -j %v: %v", tc.rdma, err)
			}
			if diff := cmp.Diff(decode(t, "rdma", theirs), decode(t, "rdmastat", out.Bytes())); diff != "" {
				t.Errorf("rdma -j %s (-) vs rdmastat -j %s (+):\n%s", strings.Join(tc.rdma, " "), strings.Join(tc.args, " "), diff)
			}
		})
	}
	// The default text output names every port's counters and every
	// device's resource counts.
	var out, errb bytes.Buffer
	if st := run(nil, &out, &errb); st != 0 {
		t.Fatalf("status %d: %s", st, errb.String())
	}
	for _, want := range []string{"stat ifname rxe0 port 1 ", "sent_pkts ", "res ifindex 0 ifname rxe0 ", " qp "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("rdmastat prints no %q:\n%s", want, out.String())
		}
	}
	if st := run([]string{"-d", "nosuch9"}, &out, &errb); st != 1 || !strings.Contains(errb.String(), "nosuch9") {
		t.Errorf("rdmastat -d nosuch9: status %d, %q", st, errb.String())
	}
}
