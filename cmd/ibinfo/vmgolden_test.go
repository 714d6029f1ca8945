package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRecordedVMOutputs replays what TestDifferentialVM recorded in the
// test VM (IBINFO_RECORD; testdata/vm/<kernel>): the attributes ibinfo read
// from the kernel's rxe devices, and rdma-core 44's ibv_devinfo output on
// the same boot. Re-record with
//
//	go test -c -o /tmp/ibinfo.test ./cmd/ibinfo
//	bin/vmexec -kernel 6.1 -env IBINFO_RECORD=/tmp/ibrec -get /tmp/ibrec -- /tmp/ibinfo.test -test.run VM
//	cp -r /tmp/ibrec/6.1 cmd/ibinfo/testdata/vm/
func TestRecordedVMOutputs(t *testing.T) {
	kernels, err := filepath.Glob("testdata/vm/*")
	if err != nil || len(kernels) < 2 {
		t.Fatalf("recordings: %v %v", kernels, err)
	}
	for _, dir := range kernels {
		sys, err := loadFixture(filepath.Join(dir, "devices.fix"))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []struct {
			file string
			args []string
		}{{"devinfo.txt", nil}, {"devinfo-v.txt", []string{"-v"}}} {
			want, err := os.ReadFile(filepath.Join(dir, r.file))
			if err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			if exit := run(append([]string{"ibv_devinfo"}, r.args...), &stdout, &stderr, environment{sys: sys}); exit != 0 {
				t.Errorf("%s %v: exit %d: %s", dir, r.args, exit, stderr.String())
			}
			if diff := cmp.Diff(string(want), stdout.String()); diff != "" {
				t.Errorf("%s %v (-ibv_devinfo +ibinfo):\n%s", dir, r.args, diff)
			}
		}
	}
}
