// Package rxe is the goverbs provider for Soft-RoCE (the kernel's rdma_rxe
// driver): RoCE v2 over any Ethernet netdev, done in software.
//
// Importing the package registers the provider; package uverbs links it in
// by default.
package rxe

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
)

func init() { provider.Register(rxeProvider{}) }

type rxeProvider struct{}

func (rxeProvider) Name() string                { return "rxe" }
func (rxeProvider) DriverID() abi.DriverID      { return abi.DriverRXE }
func (rxeProvider) ABIVersions() (int, int)     { return 1, 2 }
func (rxeProvider) MatchName(ibdev string) bool { return strings.HasPrefix(ibdev, "rxe") }

func (rxeProvider) NewContext(provider.Device) (provider.Context, error) {
	return &context{life: new(lifetime)}, nil
}

// context is rxe's per-context state. rxe's GET_CONTEXT carries no driver
// data in either direction.
type context struct {
	life *lifetime
}

// lifetime guards the uverbs fd against use after the context closed it:
// a doorbell on a closed (and perhaps reused) fd number would write into
// somebody else's file.
type lifetime struct {
	mu     sync.RWMutex
	closed bool

	// mapped links the objects with queues mapped from the uverbs file (a
	// ring through its sentinel; a map keyed by interface cost a tenth of
	// a QP's creation in hashing). A mapping keeps the file, and so every
	// kernel object of the context, alive after close(); Close unmaps them
	// all.
	mappedMu sync.Mutex
	mapped   tracked
}

// tracked is an object's link in its context's list of mapped objects.
type tracked struct {
	prev, next *tracked
	obj        interface{ Destroyed() error } // nil while unlinked
}

// track links o, whose link is t, unless it is linked already. It reports
// false, linking nothing, once the context is closing: Close has walked
// (or is walking) the list, so o must unmap its queues itself.
func (l *lifetime) track(t *tracked, o interface{ Destroyed() error }) bool {
	if l == nil {
		return true
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return false
	}
	l.mappedMu.Lock()
	if t.obj == nil {
		head := &l.mapped
		if head.next == nil {
			head.next, head.prev = head, head
		}
		t.obj, t.prev, t.next = o, head, head.next
		head.next.prev = t
		head.next = t
	}
	l.mappedMu.Unlock()
	return true
}

// objects returns the linked objects, the newest first.
func (l *lifetime) objects() []interface{ Destroyed() error } {
	l.mappedMu.Lock()
	defer l.mappedMu.Unlock()
	var objs []interface{ Destroyed() error }
	if head := &l.mapped; head.next != nil {
		for t := head.next; t != head; t = t.next {
			objs = append(objs, t.obj)
		}
	}
	return objs
}

// untrack unlinks t if it is linked.
func (l *lifetime) untrack(t *tracked) {
	if l == nil {
		return
	}
	l.mappedMu.Lock()
	if t.obj != nil {
		t.prev.next, t.next.prev = t.next, t.prev
		t.obj, t.prev, t.next = nil, nil, nil
	}
	l.mappedMu.Unlock()
}

func (*context) GetContextData() (in, out []byte) { return nil, nil }
func (*context) Started(*transport.Conn) error    { return nil }

// Close runs before the uverbs fd closes: from here on no doorbell rings,
// and no queue stays mapped (so the kernel frees the context's objects
// now, not when the garbage collector gets to them).
func (c *context) Close() error {
	c.life.mu.Lock()
	c.life.closed = true
	c.life.mu.Unlock()
	var errs []error
	for _, o := range c.life.objects() {
		errs = append(errs, o.Destroyed())
	}
	return errors.Join(errs...)
}

// FirmwareVersion formats fw_ver as librxe does: 16-bit major.minor.sub.
func (*context) FirmwareVersion(raw uint64) string {
	return fmt.Sprintf("%d.%d.%d", (raw>>32)&0xffff, (raw>>16)&0xffff, raw&0xffff)
}
