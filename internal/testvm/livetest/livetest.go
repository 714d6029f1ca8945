// Package livetest makes live RDMA objects in the test VM for tests that
// list them (rdma res show): some of the test process's own, made with
// uverbs, and those of rdma-core's tools running beside it.
package livetest

import (
	"bytes"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/internal/testvm/vmproc"
	"github.com/goverbs/goverbs/uverbs"
)

// Start creates a PD, a CQ, a registered buffer and an RC QP on rxe0 in
// this process, and starts ibv_rc_pingpong (a server on rxe1 waiting for
// its client: a context, PD, CQ, MR and QP) and rping (a CM id listening
// on rxe1's address). It returns once both tools' objects exist;
// everything goes away at the test's end.
func Start(t *testing.T) {
	t.Helper()
	vmenv.RequireDevice(t, vmenv.RXE0)
	vmenv.RequireDevice(t, vmenv.RXE1)
	vc, err := uverbs.Open(vmenv.RXE0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vc.Close() })
	pd, err := vc.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pd.Close() })
	cq, err := vc.CreateCQ(64, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cq.Close() })
	buf, err := uverbs.AllocBuffer(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { buf.Close() })
	mr, err := pd.RegisterBuffer(buf, 0, buf.Len(), uverbs.AccessLocalWrite|uverbs.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mr.Close() })
	qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: uverbs.QPCap{MaxSendWr: 4, MaxRecvWr: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qp.Close() })

	port := vmproc.FreePort(t)
	start := func(name string, args ...string) {
		cmd := exec.Command(name, args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
	}
	start("ibv_rc_pingpong", "-d", vmenv.RXE1, "-g", strconv.Itoa(vmenv.GIDIndex), "-p", strconv.Itoa(port))
	start("rping", "-s", "-a", vmenv.AddrB, "-p", strconv.Itoa(vmproc.FreePort(t)), "-C", "1")
	deadline := time.Now().Add(30 * time.Second)
	for !vmproc.Listening(port) || !rpingListening() {
		if time.Now().After(deadline) {
			t.Fatal("ibv_rc_pingpong or rping did not get ready in 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rpingListening reports whether iproute2 lists rping's listening CM id.
func rpingListening() bool {
	out, err := exec.Command("rdma", "-j", "res", "show", "cm_id").Output()
	return err == nil && strings.Contains(string(out), `"comm":"rping"`) && strings.Contains(string(out), `"LISTEN"`)
}
