package uverbs

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the package if the tests leave uverbs file descriptors
// (device files, event files) or device mappings behind.
func TestMain(m *testing.M) {
	fds := deviceFDs()
	maps := deviceMappings()
	code := m.Run()
	for i := 0; i < 5; i++ { // cleanups of forgotten objects run after GC
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if after := deviceFDs(); code == 0 && after != fds {
		fmt.Fprintf(os.Stderr, "leak check: %d uverbs file descriptors open before the tests, %d after\n", fds, after)
		code = 1
	}
	if after := deviceMappings(); code == 0 && after != maps {
		fmt.Fprintf(os.Stderr, "leak check: %d uverbs mappings before the tests, %d after\n", maps, after)
		code = 1
	}
	os.Exit(code)
}

// deviceFDs counts the open descriptors of uverbs device and event files.
func deviceFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	n := 0
	for _, e := range ents {
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		if strings.HasPrefix(l, "/dev/infiniband/") || strings.Contains(l, "infinibandevent") {
			n++
		}
	}
	return n
}

// deviceMappings counts the process's mappings of /dev/infiniband files.
func deviceMappings() int {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return -1
	}
	return bytes.Count(b, []byte("/dev/infiniband/"))
}
