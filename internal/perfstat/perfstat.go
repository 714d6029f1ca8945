// Package perfstat holds what the VM benchmark harnesses (perfcompare,
// rsockperf) share on the host side: reading the guest's JSON result
// lines and showing them as they come (medians and ranges are
// internal/benchstat's).
package perfstat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// BuildStatic builds each package (the map's values) with CGO_ENABLED=0
// into the path that is its key, the compiler's output going to stderr.
func BuildStatic(ctx context.Context, bins map[string]string) error {
	for out, pkg := range bins {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build %s: %w", pkg, err)
		}
	}
	return nil
}

// ParseLines decodes the JSON after prefix on each line of out that
// starts with it; none at all is an error.
func ParseLines[T any](out []byte, prefix string) ([]T, error) {
	var ms []T
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok {
			continue
		}
		var m T
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			return nil, fmt.Errorf("guest line %q: %w", l, err)
		}
		ms = append(ms, m)
	}
	if len(ms) == 0 {
		return nil, errors.New("the guest reported no measurements")
	}
	return ms, nil
}

// Progress is an io.Writer that shows W the lines starting with Prefix,
// without it, as the guest prints them.
type Progress struct {
	W      io.Writer
	Prefix string
}

func (p Progress) Write(b []byte) (int, error) {
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, p.Prefix) {
			fmt.Fprintln(p.W, "  ", strings.TrimPrefix(l, p.Prefix))
		}
	}
	return len(b), nil
}

// Commit is HEAD's short hash, "-dirty" added when tracked files differ
// from it: the code a run measured.
func Commit(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if exec.CommandContext(ctx, "git", "diff", "--quiet", "HEAD").Run() != nil {
		c += "-dirty"
	}
	return c
}

// LoadAvg is the host's /proc/loadavg, for a run's report.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}
