//go:build !amd64 || race

package mlx5

import "sync/atomic"

// biasable: no bias here (see spinLock): every lock that is not solo is
// taken by compare-and-swap, which the race detector sees.
const biasable = false

// curG stands for the caller's goroutine where locks are not biased.
func curG() uintptr { return 0 }

// who returns what lockAs and unlockAs take as me.
func (l *spinLock) who() uintptr { return 0 }

// whoFast is who for the data path (see the amd64 version).
func (l *spinLock) whoFast() uintptr { return 0 }

// lockAs takes the lock for the data path. A solo lock's entry stores
// and loads atomically here: on arm64 the load must be an acquire
// (LDAR), and the race detector must see both.
func (l *spinLock) lockAs(_ uintptr) {
	if l.solo {
		atomic.StoreUint32(&l.state, 1)
		if atomic.LoadUint32(&l.excl) == 0 {
			return
		}
	} else if atomic.CompareAndSwapUint32(&l.cas, 0, 1) {
		return
	}
	l.lockSlow(0)
}

// unlockAs gives back what lockAs took.
func (l *spinLock) unlockAs(_ uintptr) {
	if l.solo {
		storeRelease(&l.state, 0)
		return
	}
	storeRelease(&l.cas, 0)
}
