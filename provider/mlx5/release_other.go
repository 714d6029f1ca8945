//go:build !amd64 || race

package mlx5

import "sync/atomic"

// storeRelease stores v at p, ordered after every load and store before
// it (on arm64 an STLR).
func storeRelease(p *uint32, v uint32) { atomic.StoreUint32(p, v) }
