package mlx5

import (
	"runtime"
	"sync"
	"testing"
)

// TestSpinLockExcludes: goroutines more than the Ps, each adding to a
// counter under the lock and yielding inside the section now and then
// (a holder descheduled while others spin), lose no update; -race sees
// the unlock as a release.
func TestSpinLockExcludes(t *testing.T) {
	var (
		l   spinLock
		n   int
		wg  sync.WaitGroup
		per = 20000
	)
	workers := 2*runtime.GOMAXPROCS(0) + 1
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				l.Lock()
				v := n
				if (i+w)%1000 == 0 {
					runtime.Gosched()
				}
				n = v + 1
				l.Unlock()
			}
		}()
	}
	wg.Wait()
	if n != workers*per {
		t.Fatalf("counter %d, want %d", n, workers*per)
	}
}
