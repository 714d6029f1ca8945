//go:build amd64 && !race

package mlx5

// storeRelease stores v at p, ordered after every load and store before
// it: the release store of rdma-core's udma barriers and of
// pthread_spin_unlock. amd64 keeps stores in order with earlier loads and
// stores (TSO), and the compiler emits a Go store where the program puts
// it: it orders every load and store of one block by their memory
// argument and never moves a store across another or a load across a
// store. sync/atomic's store is an XCHG, a locked instruction that also
// waits for the store buffer to drain, which a release store needs not.
// Race builds take the atomic store, which the race detector knows as a
// release.
func storeRelease(p *uint32, v uint32) { *p = v }
