package uverbs

import (
	"sync"
	"weak"
)

// registry maps the user handles the kernel hands back in events to the
// objects they name, without keeping those alive (a CQ or QP the program
// dropped is still collected, and its cleanup destroys it). A map under a
// read-write mutex: a sync.Map allocated two nodes and boxed the weak
// pointer into an interface for every object stored.
type registry[T any] struct {
	mu sync.RWMutex
	m  map[uint64]weak.Pointer[T]
}

func (r *registry[T]) store(id uint64, p *T) {
	wp := weak.Make(p)
	r.mu.Lock()
	if r.m == nil {
		r.m = make(map[uint64]weak.Pointer[T])
	}
	r.m[id] = wp
	r.mu.Unlock()
}

// load returns the object of id, or nil for one never stored, deleted or
// collected.
func (r *registry[T]) load(id uint64) *T {
	r.mu.RLock()
	wp, ok := r.m[id]
	r.mu.RUnlock()
	if !ok {
		return nil
	}
	return wp.Value()
}

// drain forgets every entry and returns the objects still alive.
func (r *registry[T]) drain() []*T {
	r.mu.Lock()
	m := r.m
	r.m = nil
	r.mu.Unlock()
	var live []*T
	for _, wp := range m {
		if p := wp.Value(); p != nil {
			live = append(live, p)
		}
	}
	return live
}

// remove forgets id and reports whether it was there.
func (r *registry[T]) remove(id uint64) bool {
	r.mu.Lock()
	_, ok := r.m[id]
	delete(r.m, id)
	r.mu.Unlock()
	return ok
}
