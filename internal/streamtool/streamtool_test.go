package streamtool

import "testing"

func TestSizeStr(t *testing.T) {
	for in, want := range map[int64]string{64: "64", 1536: "1.5k", 100000: "97k", 1048576000: "1000m",
		1258291200: "1.1g", 4096: "4k", 12 << 20: "12m"} {
		if got := SizeStr(in); got != want {
			t.Errorf("SizeStr(%d) = %q, want %q", in, got, want)
		}
	}
	if got := cntStr(100000); got != "100k" {
		t.Errorf("cntStr(100000) = %q", got)
	}
}
