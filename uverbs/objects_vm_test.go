package uverbs

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestPDAndMR(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.String(), func(t *testing.T) {
			c := openRXE(t, tr)
			pd, err := c.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			buf, err := AllocBuffer(1 << 16)
			if err != nil {
				t.Fatal(err)
			}
			defer buf.Close()
			mr, err := pd.RegisterBuffer(buf, 4096, 8192, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead)
			if err != nil {
				t.Fatal(err)
			}
			if mr.Lkey() == 0 || mr.Rkey() == 0 || mr.Len() != 8192 || mr.IOVA() != uint64(buf.Addr())+4096 {
				t.Errorf("MR lkey %#x rkey %#x len %d iova %#x", mr.Lkey(), mr.Rkey(), mr.Len(), mr.IOVA())
			}
			// The kernel refuses to free a PD that still has an MR.
			if err := pd.Close(); !errors.Is(err, unix.EBUSY) {
				t.Errorf("closing a PD with a live MR: %v, want EBUSY", err)
			}
			if err := buf.Close(); !errors.Is(err, ErrBusy) {
				t.Errorf("closing a registered buffer: %v, want ErrBusy", err)
			}
			mrIOVA, err := pd.RegisterBufferIOVA(buf, 0, 4096, 0x1000_0000, AccessLocalWrite, true)
			if err != nil {
				t.Fatal(err)
			}
			if mrIOVA.IOVA() != 0x1000_0000 {
				t.Errorf("IOVA %#x", mrIOVA.IOVA())
			}
			goMem := make([]byte, 3000)
			mrGo, err := pd.RegisterPinned(goMem, AccessLocalWrite)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range []*MR{mr, mrIOVA, mrGo} {
				if err := m.Close(); err != nil {
					t.Fatal(err)
				}
				if err := m.Close(); err != nil {
					t.Errorf("second MR Close: %v", err)
				}
			}
			if err := pd.Close(); err != nil {
				t.Fatal(err)
			}
			if err := pd.Close(); err != nil {
				t.Errorf("second PD Close: %v", err)
			}
			if _, err := pd.RegisterBuffer(buf, 0, 10, AccessLocalWrite); !errors.Is(err, ErrClosed) {
				t.Errorf("register on a closed PD: %v, want ErrClosed", err)
			}
		})
	}
}

func TestMRBadInput(t *testing.T) {
	c := openRXE(t, TransportAuto)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	buf, err := AllocBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	for _, tc := range []struct {
		name        string
		off, length int
		access      Access
	}{
		{"remote write without local write", 0, 4096, AccessRemoteWrite},
		{"remote atomic without local write", 0, 4096, AccessRemoteAtomic},
		{"zero length", 0, 0, AccessLocalWrite},
		{"beyond the buffer", 4000, 200, AccessLocalWrite},
		{"negative offset", -1, 10, AccessLocalWrite},
		{"unknown access bit", 0, 10, Access(1 << 9)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mr, err := pd.RegisterBuffer(buf, tc.off, tc.length, tc.access)
			if err == nil {
				mr.Close()
				t.Fatal("accepted")
			}
		})
	}
	if err := buf.Close(); err != nil {
		t.Errorf("a failed registration left the buffer held: %v", err)
	}
	if _, err := pd.RegisterBuffer(nil, 0, 1, AccessLocalWrite); err == nil {
		t.Error("nil buffer accepted")
	}
	if _, err := pd.RegisterPinned(nil, AccessLocalWrite); err == nil {
		t.Error("empty memory accepted")
	}
}

func TestCQAndChannel(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.String(), func(t *testing.T) {
			c := openRXE(t, tr)
			ch, err := c.NewCompChannel()
			if err != nil {
				t.Fatal(err)
			}
			var cqs []*CQ
			for i := 0; i < 4; i++ {
				cq, err := c.CreateCQ(16, &CQOptions{Channel: ch})
				if err != nil {
					t.Fatal(err)
				}
				if cq.Capacity() < 16 {
					t.Errorf("capacity %d < 16", cq.Capacity())
				}
				if err := cq.RequestNotify(i%2 == 0); err != nil {
					t.Fatal(err)
				}
				cqs = append(cqs, cq)
			}
			if err := ch.Close(); !errors.Is(err, ErrBusy) {
				t.Errorf("closing a channel with CQs: %v, want ErrBusy", err)
			}
			attr, err := c.QueryDevice()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.CreateCQ(int(attr.MaxCQE)+1, nil); !errors.Is(err, unix.EINVAL) {
				t.Errorf("CQ beyond max_cqe %d: %v, want EINVAL from the kernel", attr.MaxCQE, err)
			}
			if _, err := c.CreateCQ(0, nil); err == nil {
				t.Error("CQ of 0 entries accepted")
			}
			if _, err := c.CreateCQ(4, &CQOptions{CompVector: c.NumCompVectors()}); err == nil {
				t.Error("out-of-range completion vector accepted")
			}
			for _, cq := range cqs {
				if err := cq.Close(); err != nil {
					t.Fatal(err)
				}
				if err := cq.Close(); err != nil {
					t.Errorf("second CQ Close: %v", err)
				}
			}
			if err := ch.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// threads counts the process's OS threads.
func threads(t *testing.T) int {
	t.Helper()
	n := 0
	for i := 0; i < 3; i++ { // let exiting threads go
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
		var err error
		if n, err = countDir("/proc/self/task"); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// TestEventWaitsParkGoroutines blocks many goroutines on completion and
// async events, cancels them through their contexts, and checks that no OS
// thread was held for any of them.
func TestEventWaitsParkGoroutines(t *testing.T) {
	c := openRXE(t, TransportAuto)
	const waiters = 32
	chans := make([]*CompChannel, waiters)
	for i := range chans {
		ch, err := c.NewCompChannel()
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		cq, err := c.CreateCQ(4, &CQOptions{Channel: ch})
		if err != nil {
			t.Fatal(err)
		}
		defer cq.Close()
		if err := cq.RequestNotify(false); err != nil {
			t.Fatal(err)
		}
		chans[i] = ch
	}
	before := threads(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, waiters+1)
	for _, ch := range chans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := ch.Wait(ctx)
			errs <- err
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := c.WaitAsyncEvent(ctx)
		errs <- err
	}()
	time.Sleep(300 * time.Millisecond)
	during := threads(t)
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled wait returned %v, want context.Canceled", err)
		}
	}
	// A blocking read per waiter would need 33 threads; the netpoller needs none.
	if during > before+4 {
		t.Errorf("%d OS threads before waiting, %d with %d waiters blocked", before, during, waiters+1)
	}
	dctx, dcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer dcancel()
	if _, err := chans[0].Wait(dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("wait with a deadline: %v, want DeadlineExceeded", err)
	}
	t.Logf("OS threads: %d before, %d while %d goroutines waited", before, during, waiters+1)
}
