package guardmem

import (
	"os"
	"testing"
)

func TestMapAndTail(t *testing.T) {
	page := os.Getpagesize()
	for _, n := range []int{1, page - 1, page, page + 1, 3 * page} {
		pages, region := Map(t, n)
		if len(pages)%page != 0 || len(pages) < n {
			t.Errorf("Map(%d): %d usable bytes, want whole pages holding %d", n, len(pages), n)
		}
		if len(region) != len(pages)+2*page || &region[page] != &pages[0] {
			t.Errorf("Map(%d): reservation of %d bytes does not hold the pages between two guards", n, len(region))
		}
		for i := range pages {
			pages[i] = 0xa5 // every usable byte is writable
		}
		tail := Tail(t, n)
		if len(tail) != n || cap(tail) != n {
			t.Errorf("Tail(%d): len %d cap %d", n, len(tail), cap(tail))
		}
		tail[0], tail[n-1] = 1, 2
	}
}
