package mlx5

import (
	"runtime"
	"sync/atomic"
)

// spinLock guards a queue's data path (a send queue's post, a CQ's poll)
// as libmlx5's mlx5_spinlock does: a compare-and-swap to take it and a
// release store to give it back. A sync.Mutex gives it back with a locked
// read-modify-write, because it must see whether a waiter parked; nobody
// parks here, so the unlock is one ordinary store on amd64 (see
// storeRelease). The sections it guards are tens of nanoseconds without a
// system call, except the CQ's resize and the context's close, which are
// rare: a waiter spins briefly, then yields its P to the scheduler so
// that a holder that was preempted runs again.
//
// A queue its user declares single-threaded (one goroutine at a time on
// its data path; libmlx5's MLX5_SINGLE_THREADED and thread domains) makes
// its lock solo: the data path then enters with Lock, which is an
// ordinary store and load and no locked instruction, and control
// operations that may run on other goroutines (close, destroy, resize, a
// QP attaching to a CQ) enter with LockExcl. The two meet as in Dekker's
// algorithm, the data path raising state and then reading excl, the
// control side raising excl and then reading state, with the
// store-to-load barrier each side needs paid by the control side alone: a
// membarrier system call, which makes every running thread of the process
// execute a full barrier (see soloBarrier). So a solo queue's Close and
// destroy stay safe against a racing Poll or PostSend, while two
// data-path callers at once break the queue as they would break
// libmlx5's (the race detector reports it: under -race every access here
// is atomic). Unlock is the same store either way.
type spinLock struct {
	state uint32 // 1: the holder of Lock is inside (and, not solo, of LockExcl)
	solo  bool   // set once, before the queue is shared
	excl  uint32 // solo: LockExcl holds the lock or waits for the data path
}

// setSolo makes the lock solo if the kernel gives the process the
// barrier a solo lock needs; it reports whether it did. Call it before
// the lock is shared.
func (l *spinLock) setSolo() bool {
	if soloBarrierReady() != nil {
		return false
	}
	l.solo = true
	return true
}

// lockSlow is Lock's way when the lock was not free.
func (l *spinLock) lockSlow() {
	if !l.solo {
		spinCAS(&l.state)
		return
	}
	// A control operation holds the lock: wait out of its way, then
	// enter as Lock does.
	for {
		storeRelease(&l.state, 0)
		for i := 0; atomic.LoadUint32(&l.excl) != 0; i++ {
			if i >= 32 {
				runtime.Gosched()
			}
		}
		atomic.StoreUint32(&l.state, 1)
		if atomic.LoadUint32(&l.excl) == 0 {
			return
		}
	}
}

// spinCAS swaps *w from 0 to 1, spinning and then yielding until it can.
func spinCAS(w *uint32) {
	for i := 0; ; i++ {
		if atomic.LoadUint32(w) == 0 && atomic.CompareAndSwapUint32(w, 0, 1) {
			return
		}
		if i >= 32 {
			runtime.Gosched()
		}
	}
}

// Unlock gives back what Lock took. Called on a lock not held, it is a
// bug the lock does not detect.
func (l *spinLock) Unlock() { storeRelease(&l.state, 0) }

// LockExcl takes the lock for a control operation, which may run beside
// the data path's goroutine: on a solo lock it also waits until the data
// path is out and keeps it out. On any other lock it is Lock.
func (l *spinLock) LockExcl() {
	if !l.solo {
		if !atomic.CompareAndSwapUint32(&l.state, 0, 1) {
			spinCAS(&l.state)
		}
		return
	}
	if !atomic.CompareAndSwapUint32(&l.excl, 0, 1) {
		spinCAS(&l.excl)
	}
	soloBarrier()
	for i := 0; atomic.LoadUint32(&l.state) != 0; i++ {
		if i >= 32 {
			runtime.Gosched()
		}
	}
}

// UnlockExcl gives back what LockExcl took.
func (l *spinLock) UnlockExcl() {
	if l.solo {
		atomic.StoreUint32(&l.excl, 0)
		return
	}
	storeRelease(&l.state, 0)
}
