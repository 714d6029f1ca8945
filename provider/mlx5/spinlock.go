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
type spinLock struct{ state uint32 }

// Lock takes the lock.
func (l *spinLock) Lock() {
	if !atomic.CompareAndSwapUint32(&l.state, 0, 1) {
		l.lockSlow()
	}
}

func (l *spinLock) lockSlow() {
	for i := 0; ; i++ {
		if atomic.LoadUint32(&l.state) == 0 && atomic.CompareAndSwapUint32(&l.state, 0, 1) {
			return
		}
		if i >= 32 {
			runtime.Gosched()
		}
	}
}

// Unlock gives the lock back. Called on a lock not held, it is a bug
// the lock does not detect.
func (l *spinLock) Unlock() { storeRelease(&l.state, 0) }
