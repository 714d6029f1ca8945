// Package afterctx runs a function when a context ends, like
// context.AfterFunc, with a stop that does not return while the function
// still runs.
//
// The readers of kernel sockets (device events, RDMA netlink) end a read
// when its context ends by setting the socket's read deadline in the past.
// That callback must not outlive the read: run late, it would land on the
// next read's deadline, which that read would take for its own context's.
package afterctx

import (
	"context"
	"time"
)

// Delay delays every callback, for tests: a callback run late, as on a
// loaded host.
var Delay time.Duration

// Func arranges for f to run once ctx ends and returns stop, which
// cancels f if it has not started and otherwise waits for it to return.
func Func(ctx context.Context, f func()) (stop func()) {
	fired := make(chan struct{})
	s := context.AfterFunc(ctx, func() {
		defer close(fired)
		if d := Delay; d > 0 {
			time.Sleep(d)
		}
		f()
	})
	return func() {
		if !s() {
			<-fired
		}
	}
}
