package uverbs

import (
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/leakcheck"
)

// TestMain fails the package if the tests leave file descriptors (device
// files, event files, sockets, files) or device mappings behind.
func TestMain(m *testing.M) { leakcheck.Main(m) }

// deviceFDs counts the open descriptors of uverbs device and event files.
func deviceFDs() int {
	n := 0
	for _, l := range leakcheck.Take().FDs {
		if strings.HasPrefix(l, "/dev/infiniband/") || strings.Contains(l, "infinibandevent") {
			n++
		}
	}
	return n
}
