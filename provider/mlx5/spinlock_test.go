package mlx5

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
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
		countUnder(&wg, &n, per, w, 1000, l.Lock, l.Unlock)
	}
	wg.Wait()
	if n != workers*per {
		t.Fatalf("counter %d, want %d", n, workers*per)
	}
}

// countUnder starts a goroutine that adds one to *n iters times, each
// between lock and unlock, yielding inside the section every every-th
// time (offset by w, so that workers yield at different times).
func countUnder(wg *sync.WaitGroup, n *int, iters, w, every int, lock, unlock func()) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range iters {
			lock()
			bump(n, (i+w)%every == 0)
			unlock()
		}
	}()
}

// bump adds one to *n as a read and a later write, yielding between the
// two when yield is set: a lost update shows a section that was not
// exclusive.
func bump(n *int, yield bool) {
	v := *n
	if yield {
		runtime.Gosched()
	}
	*n = v + 1
}

// TestSpinLockBiasRevoked: in each round a fresh lock is taken first by
// one goroutine (its owner, where locks are biased), which keeps adding to
// a counter under it; part way through, other goroutines join, so that the
// bias is revoked while the owner is inside or about to enter. No update
// is lost, and afterwards the lock is revoked for good.
func TestSpinLockBiasRevoked(t *testing.T) {
	rounds, per := 300, 1000
	if testing.Short() {
		rounds = 30
	}
	joiners := runtime.GOMAXPROCS(0) + 1
	for r := range rounds {
		var (
			l         spinLock
			n, owned  int
			wg, ready sync.WaitGroup
			stop      atomic.Bool
		)
		ready.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load() || i < 100; i++ {
				l.Lock()
				bump(&n, i%500 == r%500)
				l.Unlock()
				owned++
				if i == 50 {
					ready.Done()
				}
				if i%64 == 0 {
					runtime.Gosched() // outside the lock: with one P, the joiners' turn
				}
			}
		}()
		ready.Wait()
		var joined sync.WaitGroup
		for w := range joiners {
			countUnder(&joined, &n, per, w, 97, l.Lock, l.Unlock)
		}
		joined.Wait()
		stop.Store(true)
		wg.Wait()
		if want := owned + joiners*per; n != want {
			t.Fatalf("round %d: counter %d, want %d", r, n, want)
		}
		if biasable && l.bias&biasRevoked == 0 {
			t.Fatalf("round %d: bias %#x not revoked after other goroutines took the lock", r, l.bias)
		}
	}
}

// TestSpinLockBiasSameThread: a lock's bias belongs to a goroutine, not
// to the thread it runs on. With one P, the owner takes the lock and
// yields inside it, so that a second goroutine runs on the same thread
// and tries to take the lock: it must wait until the owner leaves.
func TestSpinLockBiasSameThread(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var (
		l               spinLock
		inside, entered atomic.Bool
		wg              sync.WaitGroup
	)
	n := 0
	l.Lock() // this goroutine owns it
	n++
	l.Unlock()
	if biasable && l.bias != curG() {
		t.Fatalf("bias %#x, want this goroutine's %#x", l.bias, curG())
	}
	l.Lock()
	inside.Store(true)
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.Lock()
		if inside.Load() {
			t.Error("a second goroutine entered while the owner was inside")
		}
		entered.Store(true)
		l.Unlock()
	}()
	for range 100 {
		runtime.Gosched()
	}
	if entered.Load() {
		t.Error("the second goroutine got the lock while the owner held it")
	}
	inside.Store(false)
	l.Unlock()
	wg.Wait()
	if !entered.Load() {
		t.Fatal("the second goroutine never took the lock")
	}
	// The owner, now revoked, still takes and gives it back.
	l.Lock()
	n++
	l.Unlock()
	if biasable && l.bias&biasRevoked == 0 {
		t.Fatalf("bias %#x not revoked", l.bias)
	}
	if n != 2 {
		t.Fatalf("counter %d, want 2", n)
	}
}

// TestSpinLockSolo: on a solo lock, one goroutine on the data path (Lock)
// and several control goroutines (LockExcl) add to one counter, each
// yielding inside its section now and then; no update is lost, so the
// data path and the control side exclude each other although the data
// path takes no locked instruction. Under -race the counter's accesses
// are checked against the lock's happens-before edges.
func TestSpinLockSolo(t *testing.T) {
	var l spinLock
	if !l.setSolo() {
		t.Skipf("no solo lock here: %v", soloBarrierReady())
	}
	var (
		n    int
		wg   sync.WaitGroup
		data = 2000000
		per  = 2000
	)
	controls := runtime.GOMAXPROCS(0) + 1
	if testing.Short() {
		data, per = 20000, 50
	}
	countUnder(&wg, &n, data, 0, 5000, l.Lock, l.Unlock)
	for w := range controls {
		countUnder(&wg, &n, per, w, 20, l.LockExcl, l.UnlockExcl)
	}
	wg.Wait()
	if want := data + controls*per; n != want {
		t.Fatalf("counter %d, want %d", n, want)
	}
}

// TestSpinLockSoloNoLockedOp: a solo lock's Lock and Unlock allocate
// nothing, and a plain lock is not solo until setSolo says so.
func TestSpinLockSoloNoLockedOp(t *testing.T) {
	var plain, solo spinLock
	if plain.solo {
		t.Fatal("a zero spinLock is solo")
	}
	if !solo.setSolo() {
		t.Skipf("no solo lock here: %v", soloBarrierReady())
	}
	n := 0
	if a := testing.AllocsPerRun(100, func() { solo.Lock(); n++; solo.Unlock() }); a != 0 {
		t.Errorf("solo Lock/Unlock: %v allocs", a)
	}
	if a := testing.AllocsPerRun(100, func() { plain.Lock(); n++; plain.Unlock() }); a != 0 {
		t.Errorf("biased Lock/Unlock: %v allocs", a)
	}
	if biasable && plain.bias != curG() {
		t.Errorf("bias %#x after one goroutine's use, want that goroutine's %#x", plain.bias, curG())
	}
}

// BenchmarkSpinLock: an uncontended Lock+Unlock: biased to the
// benchmark's goroutine (plain; where locks are not biased, a
// compare-and-swap), revoked (a compare-and-swap), and solo.
func BenchmarkSpinLock(b *testing.B) {
	var plain, revoked, solo spinLock
	revoked.bias = biasRevoked
	if !solo.setSolo() {
		b.Skipf("no solo lock here: %v", soloBarrierReady())
	}
	n := 0
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			plain.Lock()
			n++
			plain.Unlock()
		}
	})
	b.Run("revoked", func(b *testing.B) {
		for b.Loop() {
			revoked.Lock()
			n++
			revoked.Unlock()
		}
	})
	b.Run("solo", func(b *testing.B) {
		for b.Loop() {
			solo.Lock()
			n++
			solo.Unlock()
		}
	})
}

// TestSpinLockInlined: the data path's lockAs and unlockAs are inlined into
// post and Poll (a call would cost about a nanosecond of the 30 a write
// takes). Lock sits one node under the inliner's budget; this fails when
// a change to it, or to the compiler's costs, pushes it over.
func TestSpinLockInlined(t *testing.T) {
	if runtime.GOARCH != "amd64" || raceEnabled {
		t.Skip("the plain-access Lock is amd64's, without -race")
	}
	if testing.Short() {
		t.Skip("builds the package with -gcflags=-m")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	out, err := exec.Command(gobin, "build", "-gcflags=-m", "-o", os.DevNull, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-m: %v\n%s", err, out)
	}
	for _, want := range []string{"can inline (*spinLock).lockAs", "can inline (*spinLock).unlockAs"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("the compiler says no %q", want)
		}
	}
}
