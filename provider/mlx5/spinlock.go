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
// The locked instruction of the compare-and-swap is most of what a lock
// costs (about 5 ns of a 30 ns post and poll), and most queues are only
// ever used by one goroutine. So, where the platform allows (amd64
// without -race, see lockAs), a lock is biased: the first goroutine to
// take it owns it, and enters and leaves as a solo lock's data path does
// (below), with ordinary stores and loads. Another goroutine that takes
// it revokes the bias once and for all: it raises excl, which the owner's
// entry reads, makes every thread of the process execute a full barrier
// (soloBarrier), and waits for the owner to be out; from then on every
// goroutine, the owner included, takes the lock by compare-and-swap on
// cas, and excl stays raised, so that an owner that read the bias before
// it was revoked can never enter by the old way. Revoking costs one
// membarrier system call, once in the lock's life.
//
// A queue its user declares single-threaded (one goroutine at a time on
// its data path; libmlx5's MLX5_SINGLE_THREADED and thread domains) makes
// its lock solo: the data path then enters from any goroutine with an
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
	state uint32  // 1: the owner or a solo data path is inside (written by them alone)
	solo  bool    // set once, before the queue is shared
	excl  uint32  // solo: LockExcl holds the lock or waits; biased: the bias is being or was revoked
	cas   uint32  // 1: held by compare-and-swap (a lock that is neither solo nor biased)
	bias  uintptr // 0: nobody took it yet; a goroutine (curG): its owner; with biasRevoked set: revoked
}

// biasRevoked marks a revoked bias (goroutine pointers are aligned, so
// the bit is free). A lock that cannot be biased is revoked with no owner
// from its first use.
const biasRevoked uintptr = 1

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

// Lock takes the lock; lockAs with the caller's goroutine, for the cold
// callers.
func (l *spinLock) Lock() { l.lockAs(l.who()) }

// Unlock gives back what Lock took. Called on a lock not held, it is a
// bug the lock does not detect.
func (l *spinLock) Unlock() { l.unlockAs(l.who()) }

// lockSlow is lockAs's way when the fast entry did not take the lock.
func (l *spinLock) lockSlow(me uintptr) {
	if l.solo {
		l.soloWait()
		return
	}
	for {
		b := atomic.LoadUintptr(&l.bias)
		if b&^biasRevoked == me && me != 0 {
			// The owner, out of a fast entry that met a revocation
			// (or that read the bias already revoked): state is its
			// own, and says it is not inside.
			storeRelease(&l.state, 0)
		}
		switch {
		case b&biasRevoked != 0:
			// The usual way of a revoked lock, shared by goroutines.
			if !atomic.CompareAndSwapUint32(&l.cas, 0, 1) {
				spinCAS(&l.cas)
			}
			return
		case b == 0:
			if !biasable || me == 0 || soloBarrierReady() != nil {
				atomic.CompareAndSwapUintptr(&l.bias, 0, biasRevoked)
				continue
			}
			if atomic.CompareAndSwapUintptr(&l.bias, 0, me) {
				// Enter as the owner does; the atomic store is a full
				// barrier, so this side needs no membarrier.
				atomic.StoreUint32(&l.state, 1)
				if atomic.LoadUint32(&l.excl) == 0 {
					return
				}
			}
		case b == me:
			// A revocation raised excl and has not flipped the bias
			// yet: wait for it.
			for i := 0; atomic.LoadUintptr(&l.bias) == me; i++ {
				backoff(i)
			}
		default:
			if l.revoke(b) {
				return
			}
		}
	}
}

// revoke takes the lock from its owner b for good: it reports whether it
// did so and holds the lock, or whether another goroutine revoked it
// first (then the caller takes the lock as any other).
func (l *spinLock) revoke(b uintptr) bool {
	if !atomic.CompareAndSwapUint32(&l.excl, 0, 1) {
		for i := 0; atomic.LoadUintptr(&l.bias)&biasRevoked == 0; i++ {
			backoff(i)
		}
		return false
	}
	// Nobody takes cas before the bias is revoked: hold it before
	// revoking, so that those who see the revocation wait for this
	// goroutine, which waits for the owner.
	atomic.StoreUint32(&l.cas, 1)
	atomic.StoreUintptr(&l.bias, b|biasRevoked)
	// excl raised, then every thread's barrier: an owner either entered
	// before it and shows in state, or reads excl raised and backs out.
	soloBarrier()
	for i := 0; atomic.LoadUint32(&l.state) != 0; i++ {
		backoff(i)
	}
	return true
}

// unlockSlow is unlockAs's way for a lock not held by its fast entry: a
// lock held by compare-and-swap, or by an owner that entered before its
// bias was revoked (its state still says so; nobody else writes it).
func (l *spinLock) unlockSlow(me uintptr) {
	if me != 0 && atomic.LoadUintptr(&l.bias)&^biasRevoked == me && atomic.LoadUint32(&l.state) != 0 {
		storeRelease(&l.state, 0)
		return
	}
	storeRelease(&l.cas, 0)
}

// soloWait is a solo lock's entry when a control operation holds it:
// wait out of its way, then enter as lockAs does.
func (l *spinLock) soloWait() {
	for {
		storeRelease(&l.state, 0)
		for i := 0; atomic.LoadUint32(&l.excl) != 0; i++ {
			backoff(i)
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
		backoff(i)
	}
}

// backoff is a wait loop's pause after i tries: none for the first 32,
// then the P yielded, so that a holder that was preempted runs again.
func backoff(i int) {
	if i >= 32 {
		runtime.Gosched()
	}
}

// LockExcl takes the lock for a control operation, which may run beside
// the data path's goroutine: on a solo lock it also waits until the data
// path is out and keeps it out. On any other lock it is Lock.
func (l *spinLock) LockExcl() {
	if !l.solo {
		l.Lock()
		return
	}
	if !atomic.CompareAndSwapUint32(&l.excl, 0, 1) {
		spinCAS(&l.excl)
	}
	soloBarrier()
	for i := 0; atomic.LoadUint32(&l.state) != 0; i++ {
		backoff(i)
	}
}

// UnlockExcl gives back what LockExcl took.
func (l *spinLock) UnlockExcl() {
	if l.solo {
		atomic.StoreUint32(&l.excl, 0)
		return
	}
	l.Unlock()
}
