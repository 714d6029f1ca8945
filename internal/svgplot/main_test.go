package svgplot

import (
	"testing"

	"github.com/goverbs/goverbs/internal/leakcheck"
)

// TestMain fails the package if its tests leave file descriptors or
// /dev/infiniband mappings behind.
func TestMain(m *testing.M) { leakcheck.Main(m) }
