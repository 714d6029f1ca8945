package main

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The reference outputs in testdata were produced by glibc 2.36 (Debian 12,
// the C library ibv_devinfo 44 runs on): inet_ntop through Python's
// socket.inet_ntop, strtol through ctypes.

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

func TestInetNtop6MatchesGlibc(t *testing.T) {
	var vecs []struct{ Hex, Text string }
	readJSON(t, "testdata/inet_ntop6_glibc.json", &vecs)
	if len(vecs) < 100 {
		t.Fatalf("only %d vectors", len(vecs))
	}
	for _, v := range vecs {
		raw, err := hex.DecodeString(v.Hex)
		if err != nil || len(raw) != 16 {
			t.Fatalf("bad vector %q", v.Hex)
		}
		if got := inetNtop6([16]byte(raw)); got != v.Text {
			t.Errorf("inetNtop6(%s) = %q, glibc %q", v.Hex, got, v.Text)
		}
	}
}

func TestStrtolMatchesGlibc(t *testing.T) {
	var vecs []struct {
		In  string
		Out int64
	}
	readJSON(t, "testdata/strtol_glibc.json", &vecs)
	for _, v := range vecs {
		if got := strtol(v.In); got != v.Out {
			t.Errorf("strtol(%q) = %d, glibc %d", v.In, got, v.Out)
		}
	}
}

func TestBoardIDText(t *testing.T) {
	long := make([]byte, 256)
	for i := range long {
		long[i] = 'a'
	}
	longNL := append(append([]byte{}, long[:255]...), '\n')
	tests := []struct {
		name string
		raw  []byte
		want string
		ok   bool
	}{
		{"unreadable", nil, "", false},
		{"empty", []byte{}, "", false},
		{"newline only", []byte("\n"), "", false},
		{"plain", []byte("MT_0000000010\n"), "MT_0000000010", true},
		{"no newline", []byte("abc"), "abc", true},
		{"two newlines", []byte("abc\n\n"), "abc\n", true},
		{"embedded NUL", []byte("ab\x00cd\n"), "ab", true},
		{"full buffer without newline", long, "", false},
		{"full buffer with newline", longNL, string(long[:255]), true},
	}
	for _, tt := range tests {
		got, ok := boardIDText(tt.raw)
		if diff := cmp.Diff(struct {
			S  string
			OK bool
		}{tt.want, tt.ok}, struct {
			S  string
			OK bool
		}{got, ok}); diff != "" {
			t.Errorf("%s: boardIDText (-want +got):\n%s", tt.name, diff)
		}
	}
}
