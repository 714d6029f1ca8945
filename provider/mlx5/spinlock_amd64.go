//go:build amd64 && !race

package mlx5

// biasable: locks are biased to their first goroutine here (see
// spinLock).
const biasable = true

// curG returns the running goroutine's g, from the thread's TLS slot
// where the runtime keeps it: stable for the goroutine's life (the
// runtime never frees or moves a g) and different for any two goroutines
// alive at once, which is all a lock's bias needs of it.
func curG() uintptr

// who returns what lockAs and unlockAs take as me: curG(), which a solo
// lock needs not. Lock and Unlock call it each; see whoFast for the data
// path.
func (l *spinLock) who() uintptr {
	if l.solo {
		return 0
	}
	return curG()
}

// whoFast is who for a caller that passes the same me to lockAs and
// unlockAs, as post and Poll do: on a lock whose bias is revoked it
// returns 0, which takes the lock by compare-and-swap and gives it back
// the same way, without the call that finds the goroutine. (Lock and
// Unlock may not use it: a bias revoked between the two would have the
// owner, inside by the biased entry, give back the compare-and-swap word
// that the revoking goroutine holds.)
func (l *spinLock) whoFast() uintptr {
	if l.solo || l.bias&biasRevoked != 0 {
		return 0
	}
	return curG()
}

// lockAs takes the lock for the data path, me being curG() of the
// caller. A solo lock's entry, and its owner's, is an ordinary store and
// load (amd64 keeps the store before the load only in program order, not
// in visibility; the other side's membarrier makes up for that, see
// spinLock), and the load orders what follows it (amd64 keeps loads in
// order with later loads and stores; the compiler moves nothing above
// the branch that tests it). Written with plain field accesses and one
// call so that it stays within the inliner's budget: post and Poll call
// it once each.
func (l *spinLock) lockAs(me uintptr) {
	if l.solo || l.bias == me {
		l.state = 1
		if l.excl == 0 { // no control operation or revocation inside or waiting
			return
		}
	}
	l.lockSlow(me)
}

// unlockAs gives back what lockAs(me) took.
func (l *spinLock) unlockAs(me uintptr) {
	if l.solo || l.bias == me {
		storeRelease(&l.state, 0)
		return
	}
	l.unlockSlow(me)
}
