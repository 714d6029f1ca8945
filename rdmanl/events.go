package rdmanl

import (
	"context"
	"fmt"
	"path"

	nl "github.com/goverbs/goverbs/internal/rdmanl"
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
// 6.1; 6.12 adds a multicast group (see Monitor) for registration and
// netdev attach/detach, but no renames, so device events here are the
// uevents on every kernel.
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

// NotifyKind is the kind of an RDMA netlink notification (enum
// rdma_nl_notify_event_type).
type NotifyKind uint8

// Notification kinds.
const (
	NotifyRegister     NotifyKind = nl.RDMA_REGISTER_EVENT
	NotifyUnregister   NotifyKind = nl.RDMA_UNREGISTER_EVENT
	NotifyNetdevAttach NotifyKind = nl.RDMA_NETDEV_ATTACH_EVENT
	NotifyNetdevDetach NotifyKind = nl.RDMA_NETDEV_DETACH_EVENT
)

func (k NotifyKind) String() string {
	switch k {
	case NotifyRegister:
		return "register"
	case NotifyUnregister:
		return "unregister"
	case NotifyNetdevAttach:
		return "netdev-attach"
	case NotifyNetdevDetach:
		return "netdev-detach"
	}
	return fmt.Sprintf("NotifyKind(%d)", uint8(k))
}

// Notification is one RDMA netlink notification (RDMA_NLDEV_CMD_MONITOR).
type Notification struct {
	Kind     NotifyKind
	DevIndex uint32
	DevName  string
	// Port, Netdev and NetdevIndex are set for the netdev kinds.
	Port        uint32
	Netdev      string
	NetdevIndex uint32
}

// Monitor receives RDMA netlink's own notifications (the multicast group
// RDMA_NL_GROUP_NOTIFY; rdma monitor in newer iproute2). Older kernels,
// 6.1 among them, send none, and there is no way to ask: the group is
// joined silently. On 6.12 a device's registration, its netdev's
// attachment and its unregistration arrive; renames do not (use Watch).
type Monitor struct {
	c *nl.Conn
}

// NewMonitor joins the notification group.
func NewMonitor() (*Monitor, error) {
	c, err := nl.DialGroups(1 << (nl.RDMA_NL_GROUP_NOTIFY - 1))
	if err != nil {
		return nil, err
	}
	return &Monitor{c: c}, nil
}

// Close leaves the group.
func (m *Monitor) Close() error { return m.c.Close() }

// Next waits for the next notification; ctx bounds the wait.
func (m *Monitor) Next(ctx context.Context) (Notification, error) {
	for {
		msgs, err := m.c.Receive(ctx)
		if err != nil {
			return Notification{}, err
		}
		for _, msg := range msgs {
			if msg.Type != nl.MsgType(nl.RDMA_NLDEV_CMD_MONITOR) {
				continue
			}
			a, err := nl.NewAttrs(msg.Payload)
			if err != nil {
				return Notification{}, fmt.Errorf("rdmanl: notification: %w", err)
			}
			return parseNotification(a)
		}
	}
}

func parseNotification(a nl.Attrs) (Notification, error) {
	ev, err := a.U8(nl.RDMA_NLDEV_ATTR_EVENT_TYPE)
	if err != nil {
		return Notification{}, fmt.Errorf("rdmanl: notification: %w", err)
	}
	n := Notification{Kind: NotifyKind(ev), DevName: a.OptStr(nl.RDMA_NLDEV_ATTR_DEV_NAME), Netdev: a.OptStr(nl.RDMA_NLDEV_ATTR_NDEV_NAME)}
	if err := optU32s(a, u32Field{&n.DevIndex, nl.RDMA_NLDEV_ATTR_DEV_INDEX}, u32Field{&n.Port, nl.RDMA_NLDEV_ATTR_PORT_INDEX},
		u32Field{&n.NetdevIndex, nl.RDMA_NLDEV_ATTR_NDEV_INDEX}); err != nil {
		return Notification{}, fmt.Errorf("rdmanl: notification: %w", err)
	}
	return n, nil
}
