package rxe

import (
	"slices"
	"testing"
)

type fakeMapped struct {
	link tracked
	n    int
}

func (*fakeMapped) Destroyed() error { return nil }

// TestLifetimeTracking: the context's list holds each tracked object once,
// whatever the order of track and untrack, and a nil lifetime (a queue made
// outside a context) tracks nothing.
func TestLifetimeTracking(t *testing.T) {
	var l lifetime
	objs := make([]*fakeMapped, 5)
	for i := range objs {
		objs[i] = &fakeMapped{n: i}
		l.track(&objs[i].link, objs[i])
	}
	l.track(&objs[2].link, objs[2]) // again: no second entry
	l.untrack(&objs[0].link)        // the oldest
	l.untrack(&objs[3].link)        // one in the middle
	l.untrack(&objs[3].link)        // again: nothing
	l.untrack(&objs[4].link)        // the newest
	l.track(&objs[3].link, objs[3]) // back, now the newest
	var got []int
	for _, o := range l.objects() {
		got = append(got, o.(*fakeMapped).n)
	}
	if want := []int{3, 2, 1}; !slices.Equal(got, want) {
		t.Fatalf("tracked %v, want %v", got, want)
	}
	for _, o := range objs {
		l.untrack(&o.link)
	}
	if got := l.objects(); len(got) != 0 {
		t.Fatalf("after untracking all: %d objects left", len(got))
	}
	var none *lifetime
	none.track(&objs[0].link, objs[0])
	none.untrack(&objs[0].link)
	if objs[0].link.obj != nil {
		t.Fatal("a nil lifetime linked an object")
	}
}
