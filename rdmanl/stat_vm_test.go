package rdmanl

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/uverbs"
)

// TestVMStatistic turns automatic QP counters on for rxe0's port, makes a
// QP that the kernel binds to a counter, and compares the per-QP counters
// and the mode with rdma -j statistic; then compares the sysfs counters
// with netlink's.
func TestVMStatistic(t *testing.T) {
	c := dialVM(t)
	ctx := testCtx(t)
	dev, err := c.Device(ctx, vmenv.RXE0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetQPCounterAuto(ctx, dev.Index, 1, CounterByQPType); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.SetQPCounterAuto(context.Background(), dev.Index, 1, 0); err != nil {
			t.Errorf("turn auto mode off: %v", err)
		}
	})
	mode, mask, err := c.QPCounterMode(ctx, dev.Index, 1)
	if err != nil || mode != CounterModeAuto || mask != CounterByQPType {
		t.Fatalf("QPCounterMode = %v, %v, %v; want auto by type", mode, mask, err)
	}
	var modes []jsonObj
	for _, p := range []struct {
		idx  uint32
		name string
	}{{dev.Index, vmenv.RXE0}} {
		m, k, err := c.QPCounterMode(ctx, p.idx, 1)
		if err != nil {
			t.Fatal(err)
		}
		modes = append(modes, jsonObj{"ifindex": num(p.idx), "ifname": p.name, "port": num(1), "mode": CounterModeString(m, k)})
	}
	compare(t, modes, "statistic", "qp", "mode", "link", vmenv.RXE0+"/1")

	// A QP moved to INIT on the port is bound to an automatic counter.
	vc, err := uverbs.Open(vmenv.RXE0)
	if err != nil {
		t.Fatal(err)
	}
	defer vc.Close()
	pd, err := vc.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	cq, err := vc.CreateCQ(16, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: uverbs.QPCap{MaxSendWr: 1, MaxRecvWr: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer qp.Close()
	if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateInit, Port: 1},
		uverbs.QPAttrState|uverbs.QPAttrPkeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags); err != nil {
		t.Fatal(err)
	}
	// rxe has no per-QP counters: the kernel binds a QP to a counter only
	// through the driver's counter_bind_qp, which mlx5 has and rxe lacks
	// (6.1, 6.12). Auto mode is accepted and binds nothing; rdma agrees.
	counters, err := c.QPCounters(ctx, int64(dev.Index))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range counters {
		if slices.Contains(q.LQPNs, qp.QPN()) && (!q.HaveQPType || q.QPType != uverbs.QPTypeRC || len(q.Counters) == 0) {
			t.Errorf("counter of our QP: %+v; want an RC counter with counters", q)
		}
	}
	if len(counters) != 0 {
		t.Errorf("rxe bound QPs to counters: %+v; the driver has no counter_bind_qp", counters)
	}
	compareMaybeEmpty(t, asJSON(t, counters), "statistic", "qp", "show", "link", vmenv.RXE0+"/1")
	all, err := c.QPCounters(ctx, AllDevices)
	if err != nil {
		t.Fatal(err)
	}
	compareMaybeEmpty(t, asJSON(t, all), "statistic", "qp", "show")

	// sysfs's hw_counters are netlink's port counters (rxe has no
	// ports/N/counters).
	pc, err := c.PortCounters(ctx, dev.Index, 1)
	if err != nil {
		t.Fatal(err)
	}
	hw, err := HWCounters(vmenv.RXE0, 1)
	if err != nil {
		t.Fatal(err)
	}
	fromNL := map[string]uint64{}
	for _, ctr := range pc.Counters {
		fromNL[ctr.Name] = ctr.Value
	}
	if diff := cmp.Diff(fromNL, hw.HW); diff != "" {
		t.Errorf("sysfs hw_counters (+) vs netlink (-):\n%s", diff)
	}
	if hw.IB != nil {
		t.Errorf("rxe has IB counters in sysfs: %v", hw.IB)
	}
	if _, err := os.Stat(fmt.Sprintf("/sys/class/infiniband/%s/ports/1/hw_counters/lifespan", vmenv.RXE0)); err != nil {
		t.Errorf("rxe's lifespan file: %v", err)
	}
}
