package uverbs

import (
	"runtime"
	"testing"
)

// TestRegistry: load finds what store put until remove, which says
// whether it was there; an object nobody holds is collected and loads as
// nil.
func TestRegistry(t *testing.T) {
	type obj [64]byte
	var r registry[obj]
	if r.load(1) != nil || r.remove(1) {
		t.Fatal("an empty registry knows 1")
	}
	kept := &obj{}
	r.store(1, kept)
	r.store(2, &obj{})
	if r.load(1) != kept {
		t.Fatal("load(1) is not what was stored")
	}
	for range 3 {
		runtime.GC()
	}
	if r.load(2) != nil {
		t.Error("an object nobody holds was not collected")
	}
	if !r.remove(1) || r.remove(1) || r.load(1) != nil {
		t.Error("remove(1) twice: want true, then false, then nothing to load")
	}
	runtime.KeepAlive(kept)
}
