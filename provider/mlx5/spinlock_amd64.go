//go:build amd64 && !race

package mlx5

import "sync/atomic"

// Lock takes the lock for the data path. A solo lock's entry is an
// ordinary store and load (amd64 keeps the store before the load only
// in program order, not in visibility; the control side's membarrier
// makes up for that, see spinLock), and the load orders what follows it
// (amd64 keeps loads in order with later loads and stores; the compiler
// moves nothing above the branch that tests it). Written with plain
// field accesses and one call so that it stays within the inliner's
// budget: post and Poll call it once each.
func (l *spinLock) Lock() {
	if l.solo {
		l.state = 1
		if l.excl == 0 { // no control operation inside or waiting
			return
		}
	} else if atomic.CompareAndSwapUint32(&l.state, 0, 1) {
		return
	}
	l.lockSlow()
}
