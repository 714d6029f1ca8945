package cli

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestStrtolMatchesGlibc(t *testing.T) {
	var vecs []struct {
		In  string
		Out int64
	}
	readJSON(t, "testdata/strtol_glibc.json", &vecs)
	for _, v := range vecs {
		if got := Strtol(v.In); got != v.Out {
			t.Errorf("Strtol(%q) = %d, glibc %d", v.In, got, v.Out)
		}
	}
}

func TestParseInt(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"7", 7}, {"+7", 7}, {"-7", -7}, {"010", 8}, {"0x1F", 31}, {"0X1f", 31}, {"-0x10", -16},
		{"9223372036854775807", 1<<63 - 1}, {"-9223372036854775808", -1 << 63},
	} {
		got, err := ParseInt(tc.in, -1<<63, 1<<63-1)
		if err != nil || got != tc.want {
			t.Errorf("ParseInt(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestParseIntBadInput(t *testing.T) {
	const min, max = -1 << 63, 1<<63 - 1
	check := func(in string, min, max int64, want NumberError, wantMsg string) {
		t.Helper()
		v, err := ParseInt(in, min, max)
		var ne *NumberError
		if !errors.Is(err, ErrBadNumber) || !errors.As(err, &ne) {
			t.Errorf("ParseInt(%q) = %d, %v; want a *NumberError", in, v, err)
			return
		}
		if diff := cmp.Diff(want, *ne); diff != "" {
			t.Errorf("ParseInt(%q) error (-want +got):\n%s", in, diff)
		}
		if wantMsg != "" && err.Error() != wantMsg {
			t.Errorf("ParseInt(%q) says %q, want %q", in, err, wantMsg)
		}
	}
	// Text strtol would read a number from, or 0, and C would go on with.
	for _, in := range []string{"", "-", "+", "0x", "0x-1", "09", "1e3", "1.5", "12abc", "0b1", "--1", "+-1", "\t1", " 8", "1_000"} {
		check(in, min, max, NumberError{Text: in, Min: min, Max: max, Syntax: true}, "")
	}
	check("12abc", 0, 9, NumberError{Text: "12abc", Max: 9, Syntax: true}, `"12abc" is not a number`)
	for _, tc := range []struct {
		in       string
		min, max int64
		wantMsg  string
	}{
		{"9223372036854775808", min, max, `"9223372036854775808" is out of range [-9223372036854775808, 9223372036854775807]`},
		{"-9223372036854775809", min, max, `"-9223372036854775809" is out of range [-9223372036854775808, 9223372036854775807]`},
		{"99999999999999999999999", 1, 5, `"99999999999999999999999" is out of range [1, 5]`},
		{"10", 0, 9, `"10" is out of range [0, 9]`},
		{"-1", 0, 9, `"-1" is out of range [0, 9]`},
	} {
		check(tc.in, tc.min, tc.max, NumberError{Text: tc.in, Min: tc.min, Max: tc.max}, tc.wantMsg)
	}
}
