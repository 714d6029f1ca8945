//go:build !amd64 || race

package mlx5

import "sync/atomic"

// Lock takes the lock for the data path. A solo lock's entry stores and
// loads atomically here: on arm64 the load must be an acquire (LDAR),
// and the race detector must see both.
func (l *spinLock) Lock() {
	if l.solo {
		atomic.StoreUint32(&l.state, 1)
		if atomic.LoadUint32(&l.excl) == 0 {
			return
		}
	} else if atomic.CompareAndSwapUint32(&l.state, 0, 1) {
		return
	}
	l.lockSlow()
}
