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
	for _, tc := range []struct {
		in       string
		min, max int64
		want     NumberError
		wantMsg  string
	}{
		{"", 0, 9, NumberError{Text: "", Max: 9, Syntax: true}, `"" is not a number`},
		{"-", 0, 9, NumberError{Text: "-", Max: 9, Syntax: true}, `"-" is not a number`},
		{"+", 0, 9, NumberError{Text: "+", Max: 9, Syntax: true}, `"+" is not a number`},
		{"0x", 0, 9, NumberError{Text: "0x", Max: 9, Syntax: true}, `"0x" is not a number`},
		{"0x-1", 0, 9, NumberError{Text: "0x-1", Max: 9, Syntax: true}, `"0x-1" is not a number`},
		{"09", 0, 9, NumberError{Text: "09", Max: 9, Syntax: true}, `"09" is not a number`},
		{"1e3", 0, 9, NumberError{Text: "1e3", Max: 9, Syntax: true}, `"1e3" is not a number`},
		{"1.5", 0, 9, NumberError{Text: "1.5", Max: 9, Syntax: true}, `"1.5" is not a number`},
		{"12abc", 0, 9, NumberError{Text: "12abc", Max: 9, Syntax: true}, `"12abc" is not a number`},
		{"0b1", 0, 9, NumberError{Text: "0b1", Max: 9, Syntax: true}, `"0b1" is not a number`},
		{"--1", 0, 9, NumberError{Text: "--1", Max: 9, Syntax: true}, `"--1" is not a number`},
		{"\t1", 0, 9, NumberError{Text: "\t1", Max: 9, Syntax: true}, `"\t1" is not a number`},
		{"1_000", 0, 9, NumberError{Text: "1_000", Max: 9, Syntax: true}, `"1_000" is not a number`},
		{"9223372036854775808", -1 << 63, 1<<63 - 1, NumberError{Text: "9223372036854775808", Min: -1 << 63, Max: 1<<63 - 1},
			`"9223372036854775808" is out of range [-9223372036854775808, 9223372036854775807]`},
		{"-9223372036854775809", -1 << 63, 1<<63 - 1, NumberError{Text: "-9223372036854775809", Min: -1 << 63, Max: 1<<63 - 1},
			`"-9223372036854775809" is out of range [-9223372036854775808, 9223372036854775807]`},
		{"99999999999999999999999", 1, 5, NumberError{Text: "99999999999999999999999", Min: 1, Max: 5},
			`"99999999999999999999999" is out of range [1, 5]`},
		{"10", 0, 9, NumberError{Text: "10", Max: 9}, `"10" is out of range [0, 9]`},
		{"-1", 0, 9, NumberError{Text: "-1", Max: 9}, `"-1" is out of range [0, 9]`},
	} {
		v, err := ParseInt(tc.in, tc.min, tc.max)
		var ne *NumberError
		if !errors.Is(err, ErrBadNumber) || !errors.As(err, &ne) {
			t.Errorf("ParseInt(%q) = %d, %v; want a *NumberError", tc.in, v, err)
			continue
		}
		if diff := cmp.Diff(tc.want, *ne); diff != "" {
			t.Errorf("ParseInt(%q) error (-want +got):\n%s", tc.in, diff)
		}
		if diff := cmp.Diff(tc.wantMsg, err.Error()); diff != "" {
			t.Errorf("ParseInt(%q) message (-want +got):\n%s", tc.in, diff)
		}
	}
}
