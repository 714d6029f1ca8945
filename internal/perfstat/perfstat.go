// Package perfstat holds what the VM benchmark harnesses (perfcompare,
// rsockperf) share on the host side: reading the guest's JSON result
// lines, showing them as they come, and medians and ranges.
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
	"sort"
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

// Median returns the median of v (the mean of the middle two for an even
// count), 0 for none.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// MinMax returns the smallest and largest of v, 0 and 0 for none.
func MinMax(v []float64) (lo, hi float64) {
	if len(v) == 0 {
		return 0, 0
	}
	lo, hi = v[0], v[0]
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
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
