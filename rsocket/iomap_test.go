package rsocket

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goverbs/goverbs/uverbs"
)

// hostIOMap makes an IOMap over plain mapped memory (no MR: that needs a
// device), with byte i set to v; release unmaps it as it does a mapping.
func hostIOMap(t testing.TB, size, i int, v byte) *IOMap {
	mem, err := uverbs.AllocBuffer(size)
	if err != nil {
		t.Fatal(err)
	}
	m := &IOMap{size: size, mem: mem, buf: mem.Bytes()}
	m.buf[i] = v
	return m
}

// TestIOMapLoadClose: a Load racing with the mapping's release returns
// the byte or 0, never faults on the unmapped memory, and 0 once release
// returned. On one P the loader runs until the scheduler preempts it, at
// any instruction of Load, and release runs then: where Load read the
// memory after dropping its lock (as it once did), that fault came within
// a few rounds.
func TestIOMapLoadClose(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const size = 4096
	for range 100 {
		m := hostIOMap(t, size, size-1, 0x5A)
		var released atomic.Bool
		var loads atomic.Int64
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				after := released.Load()
				switch v := m.Load(size - 1); {
				case v != 0 && v != 0x5A:
					t.Errorf("Load = %#x, want 0x5A or 0", v)
					return
				case after && v != 0:
					t.Errorf("Load after release = %#x, want 0", v)
					return
				case after:
					return
				}
				loads.Add(1)
			}
		}()
		for loads.Load() == 0 {
			time.Sleep(100 * time.Microsecond) // until the loader runs and is preempted
		}
		if err := m.release(); err != nil {
			t.Fatal(err)
		}
		released.Store(true)
		<-done
		if m.Bytes() != nil || m.Load(0) != 0 {
			t.Fatal("Bytes or Load after release not nil and 0")
		}
	}
}

// TestIOMapLoadAllocs: Load, which a waiting loop calls without end,
// allocates nothing.
func TestIOMapLoadAllocs(t *testing.T) {
	m := hostIOMap(t, 4096, 7, 3)
	defer m.release()
	var v byte
	if n := testing.AllocsPerRun(1000, func() { v = m.Load(7) }); n != 0 || v != 3 {
		t.Errorf("Load: %v allocations, value %d; want 0, 3", n, v)
	}
}

func BenchmarkIOMapLoad(b *testing.B) {
	m := hostIOMap(b, 4096, 7, 3)
	defer m.release()
	b.ReportAllocs()
	for b.Loop() {
		m.Load(7)
	}
}
