package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

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
