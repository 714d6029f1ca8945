package uevent

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/afterctx"
)

// TestReadAfterExpiredRead: a Read whose context expired leaves nothing
// behind that ends the next Read early; that Read still returns
// os.ErrClosed at Close, at once. (Its context's callback once set the
// read deadline after it returned; the next Read took that deadline for
// its own context's and waited for the context, past Close.)
func TestReadAfterExpiredRead(t *testing.T) {
	// The callback runs late, as it did on a loaded host.
	afterctx.Delay = 20 * time.Millisecond
	defer func() { afterctx.Delay = 0 }()
	for i := 0; i < 20; i++ {
		c, err := Open()
		if err != nil {
			t.Skipf("no device event socket here: %v", err)
		}
		short, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		if _, err := c.Read(short); !errors.Is(err, context.DeadlineExceeded) {
			cancel()
			c.Close()
			// An event of the host's arrived: nothing to learn this round.
			continue
		}
		cancel()
		long, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		done := make(chan error, 1)
		go func() {
			for {
				if _, err := c.Read(long); err != nil {
					done <- err
					return
				}
			}
		}()
		time.Sleep(40 * time.Millisecond) // past the late callback
		start := time.Now()
		c.Close()
		err = <-done
		cancel()
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("round %d: Read after Close: %v after %v, want os.ErrClosed", i, err, time.Since(start))
		}
	}
}
