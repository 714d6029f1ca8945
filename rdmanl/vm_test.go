package rdmanl

import (
	"context"
	"encoding/json"
	"fmt"
	"math/bits"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/testvm/livetest"
	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// dialVM opens a Conn in the test VM whose traffic, when RDMANL_SEED_DIR
// is set, is kept as fuzz seeds (see FuzzReplies).
func dialVM(t *testing.T) *Conn {
	t.Helper()
	vmenv.RequireDevice(t, vmenv.RXE0)
	vmenv.RequireDevice(t, vmenv.RXE1)
	c, err := Dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	recordSeeds(t, c)
	return c
}

// recordSeeds writes every datagram c receives to
// $RDMANL_SEED_DIR/FuzzReplies/k<kernel>-<test>-<n> in the fuzz corpus
// format.
func recordSeeds(t *testing.T, c *Conn) {
	dir := os.Getenv("RDMANL_SEED_DIR")
	if dir == "" {
		return
	}
	dir = filepath.Join(dir, "FuzzReplies")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n := 0
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	c.c.Record = func(sent bool, b []byte) {
		if sent {
			return
		}
		n++
		f := filepath.Join(dir, fmt.Sprintf("k%s-%s-%d", vmenv.KernelName(), name, n))
		os.WriteFile(f, fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b), 0o644)
	}
}

// rdmaJSON runs iproute2's rdma -j with args and decodes its output.
func rdmaJSON(t *testing.T, args ...string) []jsonObj {
	t.Helper()
	out, err := exec.Command("rdma", append([]string{"-j"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("rdma -j %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	var objs []jsonObj
	if err := json.Unmarshal(out, &objs); err != nil {
		t.Fatalf("rdma -j %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return objs
}

// sortObjs orders objects by their JSON text, so lists compare as sets.
func sortObjs(objs []jsonObj) []jsonObj {
	sort.Slice(objs, func(i, j int) bool {
		a, _ := json.Marshal(objs[i])
		b, _ := json.Marshal(objs[j])
		return string(a) < string(b)
	})
	return objs
}

// asJSON marshals our results (their MarshalJSON) and decodes them as
// rdma -j's output is decoded.
func asJSON[T any](t *testing.T, xs []T) []jsonObj {
	t.Helper()
	if len(xs) == 0 {
		return []jsonObj{}
	}
	b, err := json.Marshal(xs)
	if err != nil {
		t.Fatal(err)
	}
	out := []jsonObj{}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// compare checks ours against rdma -j args, field by field.
func compare(t *testing.T, ours []jsonObj, args ...string) {
	t.Helper()
	theirs := rdmaJSON(t, args...)
	if diff := cmp.Diff(sortObjs(theirs), sortObjs(ours)); diff != "" {
		t.Errorf("rdma -j %s (-iproute2 +rdmanl):\n%s", strings.Join(args, " "), diff)
	}
	if len(theirs) == 0 {
		t.Errorf("rdma -j %s: empty; the comparison proves nothing", strings.Join(args, " "))
	}
}

// compareMaybeEmpty is compare for lists that may rightly be empty.
func compareMaybeEmpty(t *testing.T, ours []jsonObj, args ...string) {
	t.Helper()
	theirs := rdmaJSON(t, args...)
	if diff := cmp.Diff(sortObjs(theirs), sortObjs(ours)); diff != "" {
		t.Errorf("rdma -j %s (-iproute2 +rdmanl):\n%s", strings.Join(args, " "), diff)
	}
}

func testCtx(t *testing.T) context.Context {
	// Generous: under TCG on a loaded host, adding or deleting an rxe
	// device has taken tens of seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestVMIproute2 compares every query with iproute2's rdma -j on live
// objects of this process and of two others.
func TestVMIproute2(t *testing.T) {
	c := dialVM(t)
	ctx := testCtx(t)
	livetest.Start(t)

	t.Run("dev", func(t *testing.T) {
		devs, err := c.Devices(ctx)
		if err != nil {
			t.Fatal(err)
		}
		compare(t, asJSON(t, devs), "dev")
		// rdma -d dev adds the DIM setting and a name per capability bit
		// (iproute2's names, "UNKNOWN" for bits it does not know).
		for _, o := range rdmaJSON(t, "-d", "dev") {
			for _, d := range devs {
				if o["ifname"] != d.Name {
					continue
				}
				caps, _ := o["caps"].([]any)
				if len(caps) != bits.OnesCount64(d.Caps) || o["adaptive-moderation"] != d.AdaptiveModeration {
					t.Errorf("%s: caps %#x (%d bits), DIM %v; rdma -d: %v, %v", d.Name, d.Caps, bits.OnesCount64(d.Caps),
						d.AdaptiveModeration, caps, o["adaptive-moderation"])
				}
			}
		}
		for _, d := range devs {
			if d.Driver != "rxe" || d.Ports != 1 || d.Protocol != "roce" {
				t.Errorf("%s: driver %q, %d ports, protocol %q; want rxe, 1, roce", d.Name, d.Driver, d.Ports, d.Protocol)
			}
			one, err := c.DeviceByIndex(ctx, d.Index)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(d, one); diff != "" {
				t.Errorf("DeviceByIndex(%d) differs from the dump (-dump +get):\n%s", d.Index, diff)
			}
			compare(t, asJSON(t, []Device{one}), "dev", "show", d.Name)
		}
	})
	t.Run("link", func(t *testing.T) {
		ports, err := c.Links(ctx)
		if err != nil {
			t.Fatal(err)
		}
		compare(t, asJSON(t, ports), "link")
		for _, p := range ports {
			one, err := c.Port(ctx, p.DevIndex, p.Port)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(p, one); diff != "" {
				t.Errorf("Port differs from the dump (-dump +get):\n%s", diff)
			}
		}
	})
	t.Run("system", func(t *testing.T) {
		s, err := c.System(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("rdma", "-j", "system").CombinedOutput()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := s.String(), strings.TrimSpace(string(out)); got != want {
			t.Errorf("System() prints %q, rdma -j system %q", got, want)
		}
		if s.NetnsMode != NetnsShared || !s.CopyOnFork {
			t.Errorf("System() = %+v; want shared mode and copy-on-fork", s)
		}
	})
	t.Run("res", func(t *testing.T) {
		s, err := c.Summary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		compare(t, asJSON(t, s), "res")
	})
	t.Run("qp", func(t *testing.T) {
		qps, err := c.QPs(ctx, AllDevices)
		if err != nil {
			t.Fatal(err)
		}
		compare(t, asJSON(t, qps), "res", "show", "qp")
		mustOwn(t, qps, func(q QP) Owner { return q.Owner })
	})
	t.Run("cq", func(t *testing.T) {
		cqs, err := c.CQs(ctx, AllDevices)
		if err != nil {
			t.Fatal(err)
		}
		compare(t, asJSON(t, cqs), "res", "show", "cq")
		mustOwn(t, cqs, func(q CQ) Owner { return q.Owner })
	})
	t.Run("mr", func(t *testing.T) {
		mrs, err := c.MRs(ctx, AllDevices)
		if err != nil {
			t.Fatal(err)
		}
		compare(t, asJSON(t, mrs), "res", "show", "mr")
		mustOwn(t, mrs, func(m MR) Owner { return m.Owner })
	})
	t.Run("pd", func(t *testing.T) {
		pds, err := c.PDs(ctx, AllDevices)
		if err != nil {
			t.Fatal(err)
		}
		compare(t, asJSON(t, pds), "res", "show", "pd")
		mustOwn(t, pds, func(p PD) Owner { return p.Owner })
	})
	t.Run("cm_id", func(t *testing.T) {
		ids, err := c.CMIDs(ctx, AllDevices)
		if err != nil {
			t.Fatal(err)
		}
		compare(t, asJSON(t, ids), "res", "show", "cm_id")
	})
	t.Run("ctx", func(t *testing.T) {
		xs, err := c.Contexts(ctx, AllDevices)
		if err != nil {
			t.Fatal(err)
		}
		compare(t, asJSON(t, xs), "res", "show", "ctx")
		mustOwn(t, xs, func(x Ctx) Owner { return x.Owner })
	})
	t.Run("statistic", func(t *testing.T) {
		pcs, err := c.AllPortCounters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		compare(t, asJSON(t, pcs), "statistic")
		// rxe's counters, the same on both kernels.
		want := []string{"sent_pkts", "rcvd_pkts", "duplicate_request", "out_of_seq_request", "rcvd_rnr_err",
			"send_rnr_err", "rcvd_seq_err", "ack_deferred", "retry_exceeded_err", "retry_rnr_exceeded_err",
			"completer_retry_err", "send_err", "link_downed", "rdma_sends", "rdma_recvs"}
		var got []string
		for _, ctr := range pcs[0].Counters {
			got = append(got, ctr.Name)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("rxe's counters (-want +got):\n%s", diff)
		}
	})
}

// mustOwn checks that the list has objects of this process and of
// ibv_rc_pingpong, with their command names.
func mustOwn[T any](t *testing.T, xs []T, owner func(T) Owner) {
	t.Helper()
	self, pp := false, false
	for _, x := range xs {
		o := owner(x)
		// The kernel reports the id of the thread that created the
		// object; Go creates them from any of its threads.
		_, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", o.PID))
		self = self || (o.PID != 0 && err == nil)
		pp = pp || o.Comm == "ibv_rc_pingpong"
	}
	if !self || !pp {
		t.Errorf("objects of this process: %v, of ibv_rc_pingpong: %v; want both", self, pp)
	}
}
