// Package uevent reads the kernel's device events (NETLINK_KOBJECT_UEVENT,
// the messages udev reads): the one home of that socket and its parser for
// the module. uverbs watches it for the removal of a character device,
// rdmanl for RDMA devices coming, going and being renamed.
package uevent

import (
	"bytes"
	"errors"
	"fmt"
)

// Event is one kernel device event ("remove@/devices/...\0KEY=value\0...").
type Event struct {
	Action    string // "add", "remove", "move" (a rename), "change", "bind", ...
	DevPath   string // "/devices/virtual/infiniband/rxe2"
	Subsystem string // "infiniband", "infiniband_verbs", "net", ...
	// Env holds every KEY=value of the event, those above included
	// (DEVPATH_OLD on a move; MAJOR, MINOR and DEVNAME on character
	// devices).
	Env map[string]string
}

// ErrMalformed is matched by the error of Parse for bytes that are not a
// kernel device event.
var ErrMalformed = errors.New("uevent: malformed device event")

// Parse decodes one kernel device event. It requires the summary line
// "ACTION@DEVPATH" and the ACTION, DEVPATH and SUBSYSTEM keys, which every
// kernel event carries; udev's re-sent events (starting "libudev") are
// malformed here.
func Parse(msg []byte) (Event, error) {
	fields := bytes.Split(msg, []byte{0})
	head := string(fields[0])
	at := bytes.IndexByte(fields[0], '@')
	if at <= 0 {
		return Event{}, fmt.Errorf("%w: summary %.40q has no ACTION@DEVPATH", ErrMalformed, head)
	}
	e := Event{Env: map[string]string{}}
	for _, f := range fields[1:] {
		k, v, ok := bytes.Cut(f, []byte{'='})
		if !ok || len(k) == 0 {
			continue // the trailing NUL's empty field, or junk
		}
		e.Env[string(k)] = string(v)
	}
	e.Action, e.DevPath, e.Subsystem = e.Env["ACTION"], e.Env["DEVPATH"], e.Env["SUBSYSTEM"]
	if e.Action == "" || e.DevPath == "" || e.Subsystem == "" {
		return Event{}, fmt.Errorf("%w: %.40q lacks ACTION, DEVPATH or SUBSYSTEM", ErrMalformed, head)
	}
	if head[:at] != e.Action || head[at+1:] != e.DevPath {
		return Event{}, fmt.Errorf("%w: summary %.60q disagrees with ACTION %q and DEVPATH %q", ErrMalformed, head, e.Action, e.DevPath)
	}
	return e, nil
}

// ErrLost is returned by Read when the kernel dropped events because the
// socket's buffer was full; callers that track state should rescan.
var ErrLost = errors.New("uevent: events were lost (receive buffer overrun)")
