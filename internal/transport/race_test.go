//go:build race

package transport

// raceOn: the race detector drops a share of sync.Pool puts on purpose, so
// a pooled request can be allocated anew.
const raceOn = true
