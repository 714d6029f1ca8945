package mlx5

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// goldenDir holds the libmlx5 differential harness: the fake mlx5 kernel,
// the driver program, the fake sysfs tree and the committed golden.json.
const goldenDir = "testdata/libmlx5"

// TestLibmlx5GoldenIsCurrent rebuilds the harness with gcc, runs rdma-core's
// libmlx5 against the fake kernel and checks that it produces exactly the
// committed golden.json: the vectors the provider is compared with are what
// the real library does, not something edited by hand. It needs gcc,
// libibverbs-dev and ibverbs-providers 44 (Debian 12) and skips, naming what
// is missing, without them — unless GOVERBS_REQUIRE_LIBMLX5=1 (set by make
// unit, so CI cannot pass by skipping it).
func TestLibmlx5GoldenIsCurrent(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		// The test VM's guest has no bash (nor gcc): the check belongs to
		// the host run.
		skipOrRequire(t, "libmlx5 harness cannot be built here: bash not found")
	}
	noteHarnessInputs(t)
	out := t.TempDir()
	cmd := exec.Command("bash", filepath.Join(goldenDir, "gen.sh"), out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if exitErr := (*exec.ExitError)(nil); errors.As(err, &exitErr) && exitErr.ExitCode() == 77 {
		skipOrRequire(t, "libmlx5 harness cannot be built here: "+strings.TrimSpace(stderr.String()))
	}
	if err != nil {
		t.Fatalf("gen.sh: %v\n%s", err, stderr.String())
	}
	got := readGoldenFile(t, filepath.Join(out, "golden.json"))
	want := readGoldenFile(t, filepath.Join(goldenDir, "golden.json"))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("libmlx5 now produces different vectors (-committed +regenerated); "+
			"if rdma-core or the harness changed on purpose, refresh with "+
			"%s/gen.sh DIR and copy DIR/golden.json:\n%s", goldenDir, diff)
	}
}

// harnessSystemInputs are the host files gen.sh builds and runs against,
// besides the harness itself: rdma-core's headers and libraries.
var harnessSystemInputs = []string{
	"/usr/include/infiniband/mlx5dv.h", "/usr/include/infiniband/verbs.h",
	"/usr/lib/*/libmlx5.so*", "/usr/lib/*/libibverbs.so*", "/usr/lib/*/libibverbs/libmlx5-rdmav*.so",
}

// noteHarnessInputs reads every file the harness subprocess depends on, so
// that go test's result cache, which records only the files the test process
// itself opens, reruns the test when any of them changes instead of
// replaying an old PASS.
func noteHarnessInputs(t *testing.T) {
	t.Helper()
	paths := []string{}
	err := filepath.WalkDir(goldenDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, pat := range harnessSystemInputs {
		m, _ := filepath.Glob(pat)
		for _, p := range m {
			if r, err := filepath.EvalSymlinks(p); err == nil {
				paths = append(paths, p, r)
			}
		}
	}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			continue // a missing system file makes gen.sh skip or fail, by name
		}
		f.Close()
	}
}

// skipOrRequire skips with the reason, or fails when GOVERBS_REQUIRE_LIBMLX5=1.
func skipOrRequire(t *testing.T, reason string) {
	t.Helper()
	if os.Getenv("GOVERBS_REQUIRE_LIBMLX5") == "1" {
		t.Fatal(reason)
	}
	t.Skip(reason)
}

// readGoldenFile decodes a golden.json with every hex string turned into
// bytes, so that differences show as byte strings.
func readGoldenFile(t *testing.T, path string) any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return hexToBytes("", v)
}

func hexToBytes(key string, v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = hexToBytes(k, e)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = hexToBytes(key, e)
		}
		return v
	case string:
		if key == "hex" || strings.HasSuffix(key, "_hex") {
			if b, err := hex.DecodeString(v); err == nil {
				return b
			}
		}
		return v
	default:
		return v
	}
}
