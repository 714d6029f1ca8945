package cli

import (
	"encoding/json"
	"os"
	"testing"
)

// The reference outputs in testdata were produced by glibc 2.36 (Debian 12,
// the C library rdma-core v44's tools run on): getopt_long by
// testdata/getopt_ref, inet_ntop through Python's socket.inet_ntop, strtol
// through ctypes.

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
