package mlx5_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/provider/mlx5"
	"github.com/goverbs/goverbs/uverbs"
)

// The hardware suite: the provider's RC integrity test (integrity_test.go,
// the one the HCA model runs in loopback_test.go) on a real device through
// uverbs: two RC QPs of one context connected to each other on port 1,
// random traffic, every byte and every completion checked. It runs on the
// first mlx5 device in /sys/class/infiniband, or the one
// GOVERBS_HW_DEVICE names, and skips with the reason when there is none.
// HARDWARE.md says how to build it as a static binary and run it on a host
// with a ConnectX.

var (
	hwRounds = flag.Int("hw.rounds", 300, "hardware suite: integrity rounds")
	hwSeed   = flag.Uint64("hw.seed", 1, "hardware suite: random seed")
)

// hwDevice returns the device to test, or why there is none.
func hwDevice() (string, string) {
	if name := os.Getenv("GOVERBS_HW_DEVICE"); name != "" {
		return name, ""
	}
	const class = "/sys/class/infiniband"
	entries, err := os.ReadDir(class)
	if err != nil {
		return "", "no RDMA devices: " + err.Error()
	}
	var seen []string
	for _, e := range entries {
		driver, _ := os.Readlink(filepath.Join(class, e.Name(), "device", "driver"))
		if strings.HasPrefix(e.Name(), "mlx5_") || filepath.Base(driver) == "mlx5_core" {
			return e.Name(), ""
		}
		seen = append(seen, e.Name()+" ("+filepath.Base(driver)+")")
	}
	return "", "no mlx5 device in " + class + " (found: " + strings.Join(seen, ", ") + "); set GOVERBS_HW_DEVICE to pick one"
}

// hwSide is one QP of the pair on the device.
type hwSide struct {
	qp      *uverbs.QP
	cq      *uverbs.CQ
	mr      *uverbs.MR
	mem     []byte
	atomics bool
}

// The provider's data path types and uverbs' public ones are declared
// alike (uverbs' TestDataPathLayout), so the suite's work requests go to
// the public API as they are, the way uverbs hands them to the provider.
func (s *hwSide) PostSend(wrs []provider.SendWR) error {
	return s.qp.PostSend(unsafe.Slice((*uverbs.SendWR)(unsafe.Pointer(unsafe.SliceData(wrs))), len(wrs)))
}
func (s *hwSide) PostRecv(wrs []provider.RecvWR) error {
	return s.qp.PostRecv(unsafe.Slice((*uverbs.RecvWR)(unsafe.Pointer(unsafe.SliceData(wrs))), len(wrs)))
}
func (s *hwSide) Poll(wcs []provider.WC) (int, error) {
	return s.cq.Poll(unsafe.Slice((*uverbs.WC)(unsafe.Pointer(unsafe.SliceData(wcs))), len(wcs)))
}
func (s *hwSide) QPN() uint32              { return s.qp.QPN() }
func (s *hwSide) Arena() []byte            { return s.mem }
func (s *hwSide) Lkey() uint32             { return s.mr.Lkey() }
func (s *hwSide) Rkey() uint32             { return s.mr.Rkey() }
func (s *hwSide) MaxInline() int           { return int(s.qp.Cap().MaxInlineData) }
func (s *hwSide) MaxSGE() int              { return 4 }
func (s *hwSide) ZeroLengthRecvSGEs() bool { return true }
func (s *hwSide) Atomics() bool            { return s.atomics }

func TestHardwareIntegrity(t *testing.T) {
	name, why := hwDevice()
	if name == "" {
		t.Skip(why)
	}
	t.Run("thread-safe", func(t *testing.T) { hwIntegrity(t, name, false) })
	// The same traffic on CQs and QPs created single-threaded: each side
	// has one posting and one polling goroutine, as the option requires.
	t.Run("single-threaded", func(t *testing.T) { hwIntegrity(t, name, true) })
}

func hwIntegrity(t *testing.T, name string, solo bool) {
	c, err := uverbs.Open(name)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	t.Cleanup(func() { c.Close() })
	t.Logf("device %s, provider %s, transport %v", name, c.Provider(), c.Transport())
	if c.Provider() != "mlx5" {
		t.Logf("note: %s is not an mlx5 device; the suite runs, but on the %s provider", name, c.Provider())
	}
	attr, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	port, err := c.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pd.Close() })
	gidIndex := -1
	var gid uverbs.GID
	if port.LinkLayer == uverbs.LinkLayerEthernet {
		g, err := c.RecommendedGID(1)
		if err != nil {
			t.Fatalf("port 1 of %s: %v", name, err)
		}
		gidIndex, gid = g.Index, g.GID
	}
	access := uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteAtomic
	var sides [2]*hwSide
	for i := range sides {
		cq, err := c.CreateCQ(63, &uverbs.CQOptions{SingleThreaded: solo})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cq.Close() })
		if solo && !cq.SingleThreaded() && c.Provider() == "mlx5" {
			t.Log("note: the CQ kept its lock (no membarrier here?)")
		}
		qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, SingleThreaded: solo,
			Cap: uverbs.QPCap{MaxSendWr: 16, MaxRecvWr: 16, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 128}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { qp.Close() })
		mem := make([]byte, 256<<10)
		mr, err := pd.RegisterPinned(mem, access)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mr.Close() })
		if unsafe.SliceData(mr.Bytes()) != unsafe.SliceData(mem) {
			t.Fatal("the MR does not map the arena")
		}
		sides[i] = &hwSide{qp: qp, cq: cq, mr: mr, mem: mem, atomics: attr.AtomicCap != uverbs.AtomicNone}
	}
	for i, s := range sides {
		peer := sides[1-i]
		if err := s.qp.Connect(uverbs.ConnectAttr{SGIDIndex: gidIndex, Access: access,
			Remote: uverbs.Endpoint{QPN: peer.qp.QPN(), LID: port.LID, GID: gid}}); err != nil {
			t.Fatalf("connect QP %#x to %#x: %v", s.qp.QPN(), peer.qp.QPN(), err)
		}
	}
	if !sides[0].atomics {
		t.Logf("%s reports no atomics (atomic_cap %v): the run leaves them out", name, attr.AtomicCap)
	}
	mlx5.RunIntegrity(t, *hwSeed, *hwRounds, sides[0], sides[1])
}

// TestHardwareEvents arms the CQ (all completions, then solicited only)
// through the provider's UAR doorbell, waits for each event on the
// channel and acknowledges it: the arm sequence number the provider puts
// in the doorbell advances with every event, and an arm with a stale one
// would be ignored by the HCA, so a lost event shows as a timeout.
func TestHardwareEvents(t *testing.T) {
	name, why := hwDevice()
	if name == "" {
		t.Skip(why)
	}
	c, err := uverbs.Open(name)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	t.Cleanup(func() { c.Close() })
	port, err := c.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pd.Close() })
	ch, err := c.NewCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	cq, err := c.CreateCQ(16, &uverbs.CQOptions{Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cq.Close() })
	qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: uverbs.QPCap{MaxSendWr: 4, MaxRecvWr: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qp.Close() })
	mem := make([]byte, 4096)
	access := uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite
	mr, err := pd.RegisterPinned(mem, access)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mr.Close() })
	ca := uverbs.ConnectAttr{SGIDIndex: -1, Access: access, Remote: uverbs.Endpoint{QPN: qp.QPN(), LID: port.LID}}
	if port.LinkLayer == uverbs.LinkLayerEthernet {
		g, err := c.RecommendedGID(1)
		if err != nil {
			t.Fatal(err)
		}
		ca.SGIDIndex, ca.Remote.GID = g.Index, g.GID
	}
	if err := qp.Connect(ca); err != nil { // to itself
		t.Fatal(err)
	}
	wcs := make([]uverbs.WC, 4)
	for i := 0; i < 10; i++ {
		solicited := i%2 == 1
		if err := cq.RequestNotify(solicited); err != nil {
			t.Fatalf("event %d: arm: %v", i, err)
		}
		// A SEND to itself: the receive completion is solicited when the
		// send says so; the send completion never is.
		if err := qp.PostRecv([]uverbs.RecvWR{{ID: uint64(100 + i), SGL: []uverbs.SGE{{Addr: mr.Addr() + 2048, Length: 64, Lkey: mr.Lkey()}}}}); err != nil {
			t.Fatal(err)
		}
		flags := uverbs.SendSignaled
		if solicited {
			flags |= uverbs.SendSolicited
		}
		if err := qp.PostSend([]uverbs.SendWR{{ID: uint64(i), Opcode: uverbs.WRSend, Flags: flags,
			SGL: []uverbs.SGE{{Addr: mr.Addr(), Length: 64, Lkey: mr.Lkey()}}}}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		got, err := ch.Wait(ctx)
		cancel()
		if err != nil {
			t.Fatalf("event %d (solicited only: %v): %v", i, solicited, err)
		}
		if got != cq {
			t.Fatalf("event %d for another CQ", i)
		}
		cq.AckEvents(1)
		deadline := time.Now().Add(10 * time.Second)
		for n := 0; n < 2; {
			if time.Now().After(deadline) {
				t.Fatalf("event %d: %d of 2 completions", i, n)
			}
			k, err := cq.Poll(wcs)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range wcs[:k] {
				if w.Status != uverbs.WCSuccess {
					t.Fatalf("event %d: completion %+v", i, w)
				}
			}
			n += k
		}
	}
}

// TestHardwareDeviceChoice: the device lookup gives a device or the
// reason for none.
func TestHardwareDeviceChoice(t *testing.T) {
	name, why := hwDevice()
	if (name == "") == (why == "") {
		t.Fatalf("hwDevice() = %q, %q", name, why)
	}
	t.Logf("device %q; %s", name, why)
}
