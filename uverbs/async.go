package uverbs

import (
	"context"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
)

// AsyncEventType is the kind of an asynchronous event (enum ibv_event_type).
type AsyncEventType uint32

// Asynchronous events.
const (
	EventCQErr            AsyncEventType = 0
	EventQPFatal          AsyncEventType = 1
	EventQPReqErr         AsyncEventType = 2
	EventQPAccessErr      AsyncEventType = 3
	EventCommEst          AsyncEventType = 4
	EventSQDrained        AsyncEventType = 5
	EventPathMig          AsyncEventType = 6
	EventPathMigErr       AsyncEventType = 7
	EventDeviceFatal      AsyncEventType = 8
	EventPortActive       AsyncEventType = 9
	EventPortErr          AsyncEventType = 10
	EventLIDChange        AsyncEventType = 11
	EventPKeyChange       AsyncEventType = 12
	EventSMChange         AsyncEventType = 13
	EventSRQErr           AsyncEventType = 14
	EventSRQLimitReached  AsyncEventType = 15
	EventQPLastWQEReached AsyncEventType = 16
	EventClientReregister AsyncEventType = 17
	EventGIDChange        AsyncEventType = 18
	EventWQFatal          AsyncEventType = 19
)

var asyncEventNames = [...]string{
	"CQ error", "local work queue catastrophic error", "invalid request local work queue error",
	"local access violation work queue error", "communication established", "send queue drained",
	"path migrated", "path migration request error", "local catastrophic error", "port active",
	"port error", "LID change", "P_Key change", "SM change", "SRQ catastrophic error",
	"SRQ limit reached", "last WQE reached", "client reregistration", "GID table change",
	"WQ fatal",
}

// String returns the description ibv_event_type_str gives.
func (t AsyncEventType) String() string {
	if int(t) < len(asyncEventNames) {
		return asyncEventNames[t]
	}
	return fmt.Sprintf("unknown event %d", uint32(t))
}

// AsyncEvent is an asynchronous event of the device or of one of its
// objects.
type AsyncEvent struct {
	Type AsyncEventType
	// Port is set for port events.
	Port uint8
	// CQ is set for CQ events, QP for QP events, SRQ for SRQ events
	// (EventSRQErr, EventSRQLimitReached); nil if the object is gone.
	CQ  *CQ
	QP  *QP
	SRQ *SRQ
	// Element is the kernel's raw element: the object's user handle, or
	// the port number.
	Element uint64
}

// WaitAsyncEvent returns the next asynchronous event, waiting until one
// arrives or ctx ends. The goroutine parks on the Go netpoller. One
// goroutine at a time may wait; to select on events, run it in a goroutine
// that sends them on a channel.
//
// When the device is removed, or fails, the last event is EventDeviceFatal
// (from the kernel where the driver sends it, from the library where it
// does not: see ErrDeviceRemoved); the library has then closed the
// context, and later calls return ErrDeviceRemoved.
//
// There is no acknowledgement: rdma-core needs one so that destroying an
// object waits until no event still refers to it by address; goverbs
// refers to objects by numbers it never reuses, so a late event finds
// the object gone (nil) instead of freed memory.
func (c *Context) WaitAsyncEvent(ctx context.Context) (AsyncEvent, error) {
	if err := c.check(); err != nil {
		return c.fatalEvent(err)
	}
	var desc abi.AsyncEventDesc
	if err := readEvent(ctx, c.async, &c.asyncWaker, &desc); err != nil {
		return c.fatalEvent(fmt.Errorf("uverbs: get_async_event: %w", err))
	}
	ev := AsyncEvent{Type: AsyncEventType(desc.EventType), Element: desc.Element}
	switch ev.Type {
	case EventCQErr:
		ev.CQ = c.lookupCQ(desc.Element)
	case EventQPFatal, EventQPReqErr, EventQPAccessErr, EventCommEst, EventSQDrained, EventPathMig,
		EventPathMigErr, EventQPLastWQEReached:
		ev.QP = c.qps.load(desc.Element)
	case EventSRQErr, EventSRQLimitReached:
		ev.SRQ = c.srqs.load(desc.Element)
	case EventDeviceFatal:
		// The kernel has disassociated the context (or the device
		// failed): nothing of it works any more.
		c.fatalSent.Store(true)
		c.deviceRemoved(unix.EIO)
	case EventPortActive, EventPortErr, EventLIDChange, EventPKeyChange, EventSMChange, EventClientReregister, EventGIDChange:
		ev.Port = uint8(desc.Element)
	}
	return ev, nil
}

// fatalEvent turns err, the end of the event stream, into the one
// EventDeviceFatal the program is owed when the library closed the context
// for a removed device, and into ErrDeviceRemoved after it.
func (c *Context) fatalEvent(err error) (AsyncEvent, error) {
	if c == nil {
		return AsyncEvent{}, err
	}
	r := c.removed.Load()
	if r == nil {
		return AsyncEvent{}, err
	}
	if c.fatalSent.CompareAndSwap(false, true) {
		return AsyncEvent{Type: EventDeviceFatal}, nil
	}
	return AsyncEvent{}, r
}
