package mlx5

import (
	"errors"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
)

// revokingKernel is a fake kernel whose munmap makes the pages fault, as
// an unmapped UAR would: a doorbell written after it kills the test.
type revokingKernel struct{ *fakeKernel }

func (k revokingKernel) munmap(b []byte) error { return unix.Mprotect(b, unix.PROT_NONE) }

// TestPostRacingClose: posts on several QPs, arms of a CQ and clock reads
// race the context's Close, which revokes the UAR and clock pages. Every operation either
// completes before the pages go or fails with ErrClosed; none writes a
// revoked page (that would fault). Run under -race it also checks the
// lock-free send-completion path against the posting goroutines.
func TestPostRacingClose(t *testing.T) {
	for round := 0; round < 20; round++ {
		postRacingClose(t, false)
	}
}

// TestPostRacingCloseSolo is TestPostRacingClose with single-threaded
// queues: each QP's send queue and the CQ take their locks without a
// locked instruction (one goroutine posts to each, one arms the CQ), and
// Close and the destroys must still wait for them.
func TestPostRacingCloseSolo(t *testing.T) {
	if err := soloBarrierReady(); err != nil {
		t.Skipf("no solo locks here: %v", err)
	}
	for round := 0; round < 20; round++ {
		postRacingClose(t, true)
	}
}

func postRacingClose(t *testing.T, solo bool) {
	c := newContext(4096)
	c.preferBF, c.scatterToCQE = true, true
	c.resp = testResp()
	c.ops = revokingKernel{newFakeKernel(t)}
	c.allocBuf = guardedAlloc(t)
	if err := c.setup(); err != nil {
		t.Fatal(err)
	}
	pc, err := c.NewCQ(64)
	if err != nil {
		t.Fatal(err)
	}
	cq := pc.(*CQ)
	if solo && !cq.SetSingleThreaded() {
		t.Fatal("SetSingleThreaded refused")
	}
	if err := cq.Created(nil, 0x90, int(cq.ncqe)-1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cq.Destroyed() })
	const posters = 3
	qps := make([]*QP, posters)
	for i := range qps {
		qps[i] = newTestQP(t, c, provider.QPInit{Type: abi.QPTypeRC, MaxSendWr: 16, MaxSendSGE: 1, SingleThreaded: solo})
		if qps[i].sq.mu.solo != solo {
			t.Fatalf("send queue solo %v, want %v", qps[i].sq.mu.solo, solo)
		}
	}
	mem := make([]byte, 64)
	sge := provider.SGE{Addr: uint64(uintptr(unsafe.Pointer(&mem[0]))), Length: 64, Lkey: 1}

	var started sync.WaitGroup
	var done sync.WaitGroup
	errs := make(chan error, posters+2)
	worker := func(op func() error, retire func()) {
		defer done.Done()
		n := 0
		for {
			err := op()
			switch {
			case err == nil:
				if retire != nil {
					retire()
				}
			case errors.Is(err, provider.ErrClosed):
				// Closed for good: every later try fails the same way.
				for range 10 {
					if err := op(); !errors.Is(err, provider.ErrClosed) {
						errs <- err
						return
					}
				}
				return
			default:
				errs <- err
				return
			}
			if n++; n == 100 {
				started.Done()
			}
		}
	}
	for _, q := range qps {
		wrs := []provider.SendWR{{ID: 1, Opcode: provider.WRRDMAWrite, Flags: provider.SendSignaled,
			SGL: []provider.SGE{sge}, RemoteAddr: 0x1000, Rkey: 2}}
		started.Add(1)
		done.Add(1)
		// This goroutine is the queue's only poster and, standing in for
		// its CQ, its only consumer.
		go worker(func() error { return q.PostSend(wrs) },
			func() { q.sq.completeSend(uint16(q.sq.curPost-1), nil) })
	}
	started.Add(2)
	done.Add(2)
	go worker(func() error { return cq.Arm(false) }, nil)
	go worker(func() error {
		if _, ok := c.HCACoreClock(); !ok {
			return provider.ErrClosed // the clock page is gone
		}
		return nil
	}, nil)
	started.Wait()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	done.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("racing Close: %v", err)
	}
}

// TestPollRacingDestroySolo: a goroutine polls a single-threaded CQ
// without pause while another creates and destroys QPs on it (each
// attaching to and detaching from the CQ, which rewrites what Poll
// reads) and then destroys the CQ, whose ring is unmapped: the poller
// never reads a ring gone (that would fault) and ends with ErrClosed.
func TestPollRacingDestroySolo(t *testing.T) {
	if err := soloBarrierReady(); err != nil {
		t.Skipf("no solo locks here: %v", err)
	}
	for round := range 20 {
		c := loopContext(t)
		cq, mcq := loopCQ(t, c, 64, 0x90)
		if !cq.SetSingleThreaded() {
			t.Fatal("SetSingleThreaded refused")
		}
		polling := make(chan struct{})
		result := make(chan error, 1)
		go func() {
			wcs := make([]provider.WC, 4)
			for i := 0; ; i++ {
				_, err := cq.Poll(wcs)
				if i == 100 {
					close(polling)
				}
				if err != nil {
					if errors.Is(err, provider.ErrClosed) && i >= 100 {
						err = nil
					}
					result <- err
					return
				}
			}
		}()
		<-polling
		for i := range 8 {
			q, _ := loopQP(t, c, cq, mcq, uint32(0x1100+round*16+i), loopCaps)
			if err := q.Destroyed(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cq.Destroyed(); err != nil {
			t.Fatal(err)
		}
		if err := <-result; err != nil {
			t.Fatalf("round %d: poll: %v", round, err)
		}
	}
}
