package rdmanl

import (
	"context"
	"fmt"
	"path"

	"github.com/goverbs/goverbs/internal/uevent"
)

// EventKind says what happened to a device.
type EventKind int

// Device events.
const (
	DeviceAdded   EventKind = iota + 1 // registered
	DeviceRemoved                      // unregistered
	DeviceRenamed                      // Name is the new name, OldName the old one
)

func (k EventKind) String() string {
	switch k {
	case DeviceAdded:
		return "added"
	case DeviceRemoved:
		return "removed"
	case DeviceRenamed:
		return "renamed"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is a change of the RDMA device list.
type Event struct {
	Kind    EventKind
	Name    string
	OldName string // for DeviceRenamed
}

// Watcher delivers RDMA device events. Next is for one goroutine at a
// time; Close may be called from any and ends a Next in progress.
//
// The events come from the kernel's device events (NETLINK_KOBJECT_UEVENT,
// subsystem "infiniband"), which 6.1 and 6.12 both send for registration,
// unregistration and renaming. RDMA netlink itself has no notifications on
// 6.1; 6.12 adds a multicast group (RDMA_NL_GROUP_NOTIFY, command
// RDMA_NLDEV_CMD_MONITOR) for registration and netdev attach/detach, but
// no renames, so device events here are the uevents on every kernel.
// Only the initial network namespace receives them.
type Watcher struct {
	c *uevent.Conn
}

// Watch starts watching. Events that happen before Watch returns are not
// delivered: list the devices after Watch, then apply the events.
func Watch() (*Watcher, error) {
	c, err := uevent.Open()
	if err != nil {
		return nil, fmt.Errorf("rdmanl: watch devices: %w", err)
	}
	return &Watcher{c: c}, nil
}

// Close stops watching.
func (w *Watcher) Close() error { return w.c.Close() }

// ErrEventsLost is returned by Next when the kernel dropped events (its
// buffer overflowed): list the devices again.
var ErrEventsLost = uevent.ErrLost

// Next waits for the next device event. It returns ctx's error when ctx
// ends, ErrEventsLost after an overrun, and os.ErrClosed after Close.
func (w *Watcher) Next(ctx context.Context) (Event, error) {
	for {
		e, err := w.c.Read(ctx)
		if err != nil {
			return Event{}, err
		}
		if ev, ok := deviceEvent(e); ok {
			return ev, nil
		}
	}
}

// deviceEvent turns a kernel device event of the infiniband class into an
// Event: add, remove, and move (a rename, with DEVPATH_OLD).
func deviceEvent(e uevent.Event) (Event, bool) {
	if e.Subsystem != "infiniband" {
		return Event{}, false
	}
	name := path.Base(e.DevPath)
	switch e.Action {
	case "add":
		return Event{Kind: DeviceAdded, Name: name}, true
	case "remove":
		return Event{Kind: DeviceRemoved, Name: name}, true
	case "move":
		old, ok := e.Env["DEVPATH_OLD"]
		if !ok {
			return Event{}, false
		}
		return Event{Kind: DeviceRenamed, Name: name, OldName: path.Base(old)}, true
	}
	return Event{}, false
}
