package rsocket

import (
	"testing"

	"github.com/goverbs/goverbs/internal/leakcheck"
)

// TestMain fails the package if the tests leave file descriptors or device
// mappings behind.
func TestMain(m *testing.M) { leakcheck.Main(m) }
