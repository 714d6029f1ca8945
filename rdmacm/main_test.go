package rdmacm

import (
	"testing"

	"github.com/goverbs/goverbs/internal/leakcheck"
)

// TestMain fails the package if the tests leave file descriptors (the
// connection manager's, uverbs device and event files) or device mappings
// behind.
func TestMain(m *testing.M) { leakcheck.Main(m) }
