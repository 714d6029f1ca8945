package perfstat

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseLines(t *testing.T) {
	type m struct{ A int }
	got, err := ParseLines[m]([]byte("noise\nX {\"A\":1}\nX {\"A\":2}\n"), "X ")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]m{{1}, {2}}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := ParseLines[m]([]byte("noise\n"), "X "); err == nil {
		t.Error("no lines: no error")
	}
	if _, err := ParseLines[m]([]byte("X {"), "X "); err == nil || !strings.Contains(err.Error(), "guest line") {
		t.Errorf("bad JSON: %v", err)
	}
}
