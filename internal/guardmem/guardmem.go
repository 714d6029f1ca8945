// Package guardmem maps test memory fenced by PROT_NONE pages, so that a
// provider's ring code that reads or writes one byte outside the buffer it
// was given faults (and fails the test) instead of silently touching a
// neighbour. The providers' host tests put their queues, doorbell records
// and stand-in device pages in it.
package guardmem

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// Map reserves n bytes rounded up to whole pages between two PROT_NONE
// pages, unmapped when the test ends. It returns the usable pages and the
// whole reservation (guard pages included).
func Map(t testing.TB, n int) (pages, region []byte) {
	t.Helper()
	page := os.Getpagesize()
	count := max(1, (n+page-1)/page)
	region, err := unix.Mmap(-1, 0, (count+2)*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(region) })
	end := (count + 1) * page
	if err := unix.Mprotect(region[:page], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mprotect(region[end:], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	return region[page:end:end], region
}

// Tail returns n bytes that end exactly at a PROT_NONE page (and start
// within whole pages that follow another): an access one past the end
// faults.
func Tail(t testing.TB, n int) []byte {
	t.Helper()
	pages, _ := Map(t, n)
	return pages[len(pages)-n:]
}
