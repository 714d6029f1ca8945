// Package cqwait waits for completions without spinning: the CQ is armed
// and the goroutine parks on its completion channel (the Go netpoller)
// while the CQ is empty. The tools' control paths (rping, ibperf's rdma_cm
// exchange, the rdma_cm interoperability peers) use it; data paths poll.
package cqwait

import (
	"context"
	"fmt"

	"github.com/goverbs/goverbs/uverbs"
)

// Poll moves the next completions of cq into wcs and returns how many (at
// least one), waiting on ch, the CQ's completion channel, while there are
// none, until ctx ends (then ctx's cause). ch must serve cq alone, and one
// goroutine at a time may wait on it.
func Poll(ctx context.Context, cq *uverbs.CQ, ch *uverbs.CompChannel, wcs []uverbs.WC) (int, error) {
	armed := false
	for {
		n, err := cq.Poll(wcs)
		if err != nil {
			return 0, fmt.Errorf("poll CQ: %w", err)
		}
		if n > 0 {
			return n, nil
		}
		if !armed {
			// A completion that lands between the poll and the arming
			// raises no event: poll once more after arming.
			if err := cq.RequestNotify(false); err != nil {
				return 0, fmt.Errorf("arm CQ: %w", err)
			}
			armed = true
			continue
		}
		got, err := ch.Wait(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return 0, context.Cause(ctx)
			}
			return 0, fmt.Errorf("wait for a completion event: %w", err)
		}
		got.AckEvents(1)
		if got != cq {
			return 0, fmt.Errorf("completion event for another CQ than the one waited for")
		}
		armed = false
	}
}
