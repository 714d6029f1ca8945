//go:build !(linux && amd64)

package cminterop

import (
	"context"
	"testing"
	"time"
)

// runSlowWrites traces the tool through amd64's syscall registers; the
// test VM is amd64, so elsewhere the test that needs it does not run.
func runSlowWrites(ctx context.Context, t *testing.T, delay time.Duration, tool string, args ...string) result {
	t.Helper()
	t.Skip("the traced mckey sender (slowwrites_test.go) is written for linux/amd64")
	return result{}
}
