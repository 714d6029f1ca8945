// Package leakcheck fails a test binary that leaves RDMA resources of the
// process behind: file descriptors (uverbs device files, their event files,
// sockets, pipes, ordinary files) and mappings of /dev/infiniband files (a
// provider's queues and doorbells).
//
// A package's tests use it from TestMain:
//
//	func TestMain(m *testing.M) { leakcheck.Main(m) }
//
// Objects a test forgot are released by their cleanups once collected, so
// the check runs the collector a few times before it compares. The kernel's
// own objects (what `rdma res show` counts) are another matter: those tests
// compare counts themselves.
package leakcheck

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// kept holds descriptors a test binary keeps open on purpose until it exits.
var kept sync.Map // fd number (string) -> true

// Keep exempts fd from the check: a descriptor the test binary opens once
// and keeps for its whole life on purpose (uverbs' benchmarks keep a perf
// counter open so the kernel patches its syscall tracepoint only once).
func Keep(fd int) { kept.Store(fmt.Sprint(fd), true) }

// Snapshot is what the process holds at one moment.
type Snapshot struct {
	// FDs are the targets of the open descriptors (readlink of
	// /proc/self/fd/N), sorted, without those the Go runtime keeps for itself.
	FDs []string
	// Mappings counts the process's mappings of /dev/infiniband files.
	Mappings int
}

// Take records the process's descriptors and device mappings now.
func Take() Snapshot {
	return Snapshot{FDs: fds(), Mappings: deviceMappings()}
}

// Diff describes what after holds beyond s ("" if nothing): descriptors
// opened and not closed, and device mappings not unmapped.
func (s Snapshot) Diff(after Snapshot) string {
	var b strings.Builder
	if extra := surplus(s.FDs, after.FDs); len(extra) > 0 {
		fmt.Fprintf(&b, "%d file descriptor(s) left open: %s", len(extra), strings.Join(extra, ", "))
	}
	if after.Mappings > s.Mappings {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%d /dev/infiniband mapping(s) before, %d after", s.Mappings, after.Mappings)
	}
	return b.String()
}

// Main runs the package's tests and exits with their status, or with 1 when
// they passed but left descriptors or device mappings behind.
func Main(m *testing.M) {
	os.Exit(run(m, os.Stderr))
}

func run(m interface{ Run() int }, w io.Writer) int {
	before := Take()
	code := m.Run()
	if code != 0 {
		return code
	}
	if msg := Settle(before); msg != "" {
		fmt.Fprintf(w, "leak check: %s\n", msg)
		return 1
	}
	return 0
}

// Settle compares the process with before, first giving the cleanups of
// forgotten objects a chance to run; it returns Diff's description, "" when
// nothing is left.
func Settle(before Snapshot) string {
	var msg string
	for i := 0; i < 10; i++ {
		if msg = before.Diff(Take()); msg == "" {
			return ""
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	return msg
}

// Check fails t if, when t and its subtests finish, the process holds
// descriptors or device mappings it did not hold when Check was called.
func Check(t testing.TB) {
	t.Helper()
	before := Take()
	t.Cleanup(func() {
		if msg := Settle(before); msg != "" {
			t.Errorf("leak check: %s", msg)
		}
	})
}

// surplus returns the elements of after not matched one for one in before.
func surplus(before, after []string) []string {
	have := map[string]int{}
	for _, s := range before {
		have[s]++
	}
	var extra []string
	for _, s := range after {
		if have[s] > 0 {
			have[s]--
			continue
		}
		extra = append(extra, s)
	}
	return extra
}

// runtimeFD reports descriptors the Go runtime opens on first use and keeps:
// the network poller's epoll instance and its wake-up eventfd (or pipe on
// older kernels, which the runtime never closes either).
func runtimeFD(target string) bool {
	return target == "anon_inode:[eventpoll]" || target == "anon_inode:[eventfd]"
}

func fds() []string {
	f, err := os.Open("/proc/self/fd")
	if err != nil {
		return nil
	}
	self := int(f.Fd())
	names, _ := f.Readdirnames(-1)
	var out []string
	for _, n := range names {
		if n == fmt.Sprint(self) {
			continue
		}
		if _, ok := kept.Load(n); ok {
			continue
		}
		target, err := os.Readlink("/proc/self/fd/" + n)
		if err != nil || runtimeFD(target) {
			continue
		}
		out = append(out, target)
	}
	f.Close()
	slices.Sort(out)
	return out
}

func deviceMappings() int {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte(" /dev/infiniband/"))
}
