package uverbs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"weak"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/uevent"
)

// ErrDeviceRemoved matches (errors.Is) every error of a context whose
// device went away (`rdma link delete`, the driver unbound, the netdev under
// an rxe device deleted) or failed (DEVICE_FATAL). The error also matches
// ErrClosed, since the library closed the context, and unwraps to the errno
// that told: ENODEV when the library saw the device's removal, EIO when the
// kernel reported it. Close the objects and the context, and open the
// device again once it is back.
var ErrDeviceRemoved = errors.New("uverbs: device removed")

// removedError is what every call of a removed context returns.
type removedError struct {
	name string
	err  error // the errno that told
}

func (e *removedError) Error() string {
	return fmt.Sprintf("uverbs: %s: device removed (%v): the context is closed; close its objects and open the device again once it is back", e.name, e.err)
}

func (e *removedError) Is(target error) bool {
	return target == ErrDeviceRemoved || target == ErrClosed
}
func (e *removedError) Unwrap() error { return e.err }

// Device removal.
//
// What the kernel does when a uverbs device goes away depends on the
// driver. Drivers with disassociate_ucontext (mlx4, mlx5, hns, efa...) have
// their objects destroyed at once: the async event file delivers
// DEVICE_FATAL, mappings are zapped and every later command fails with EIO.
// Drivers without it, rxe among them (checked in the 6.1 and 6.12 sources:
// ib_uverbs_remove_one), get no event at all: the kernel removes
// /dev/infiniband/uverbsN and then waits, inside the removal (`rdma link
// delete` blocks), until every process has closed its uverbs files, event
// files and mappings of the device; until then commands still work.
//
// So that such a removal neither hangs the administrator's command nor
// leaves the program talking to a dead device, the library watches the
// kernel's device events (the NETLINK_KOBJECT_UEVENT socket udev reads) for
// the removal of the uverbs character device of an open context, and then
// releases everything the process holds of it, exactly as if the program
// had closed the context. Calls from then on fail with ErrDeviceRemoved,
// and WaitAsyncEvent delivers one EventDeviceFatal first (the kernel's own,
// where the driver sends it). One socket serves the whole process while a
// context is open. Where the socket cannot be opened (a seccomp filter, a
// network namespace other than the initial one, which gets no device
// events), removal is noticed only where the kernel reports it.

// removalWatch is the process's device-event watcher.
var removalWatch watcher

type watcher struct {
	mu     sync.Mutex
	file   *uevent.Conn // nil while no context is watched
	nextID uint64
	users  map[uint64]watched
}

type watched struct {
	rdev uint64 // the uverbs character device
	ctx  weak.Pointer[Context]
}

// add watches for the removal of c's character device rdev and returns the
// id to stop with. It fails only if the event socket cannot be opened.
func (w *watcher) add(c *Context, rdev uint64) (uint64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.file == nil {
		f, err := openUevents()
		if err != nil {
			return 0, err
		}
		w.file = f
		w.users = map[uint64]watched{}
		go w.run(f)
	}
	w.nextID++
	w.users[w.nextID] = watched{rdev: rdev, ctx: weak.Make(c)}
	return w.nextID, nil
}

// remove stops watching for id; the last one closes the socket.
func (w *watcher) remove(id uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.users[id]; !ok {
		return
	}
	delete(w.users, id)
	if len(w.users) == 0 && w.file != nil {
		w.file.Close() // ends run
		w.file = nil
	}
}

// openUevents opens a socket on the kernel's device events.
func openUevents() (*uevent.Conn, error) {
	c, err := uevent.Open()
	if err != nil {
		return nil, fmt.Errorf("uverbs: %w", err)
	}
	return c, nil
}

// run reads device events until the socket closes.
func (w *watcher) run(c *uevent.Conn) {
	for {
		e, err := c.Read(context.Background())
		switch {
		case errors.Is(err, os.ErrClosed): // closed by remove
			return
		case errors.Is(err, uevent.ErrLost):
			w.rescan() // events were lost
			continue
		case err != nil:
			// The socket broke: fall back on looking, so a removal in
			// the meantime is not missed, and stop.
			w.rescan()
			return
		}
		if rdev, ok := removedCharDev(e); ok {
			w.removed(func(d uint64) bool { return d == rdev })
		}
	}
}

// uverbsRemoval parses a kernel device event and returns the device number
// of a removed uverbs character device.
func uverbsRemoval(msg []byte) (rdev uint64, ok bool) {
	e, err := uevent.Parse(msg)
	if err != nil {
		return 0, false
	}
	return removedCharDev(e)
}

// removedCharDev returns the device number of a removed uverbs character
// device, if e is that.
func removedCharDev(e uevent.Event) (rdev uint64, ok bool) {
	if e.Action != "remove" || e.Subsystem != "infiniband_verbs" {
		return 0, false
	}
	major, minor := devNumber(e.Env["MAJOR"]), devNumber(e.Env["MINOR"])
	if major < 0 || minor < 0 {
		return 0, false
	}
	return unix.Mkdev(uint32(major), uint32(minor)), true
}

// devNumber parses a device number field, -1 if it is not one.
func devNumber(v string) int {
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return -1
	}
	return int(n)
}

// rescan checks every watched device after lost events: a character
// device whose sysfs entry is gone was removed.
func (w *watcher) rescan() {
	w.removed(func(rdev uint64) bool {
		_, err := os.Stat(fmt.Sprintf("/sys/dev/char/%d:%d", unix.Major(rdev), unix.Minor(rdev)))
		return errors.Is(err, os.ErrNotExist)
	})
}

// removed releases the contexts whose device gone reports as removed.
func (w *watcher) removed(gone func(rdev uint64) bool) {
	var hit []*Context
	w.mu.Lock()
	for id, u := range w.users {
		if !gone(u.rdev) {
			continue
		}
		if c := u.ctx.Value(); c != nil {
			hit = append(hit, c)
		} else {
			delete(w.users, id)
		}
	}
	w.mu.Unlock()
	// Outside the lock: releasing a context stops its watch.
	for _, c := range hit {
		c.deviceRemoved(unix.ENODEV)
	}
}

// watchRemoval starts watching for the removal of c's device. Without the
// event socket the context works all the same; only the removal goes
// unnoticed (until the kernel reports it, on drivers that do).
func (c *Context) watchRemoval() error {
	var st unix.Stat_t
	if err := unix.Fstat(int(c.file.Fd()), &st); err != nil {
		return nil
	}
	id, err := removalWatch.add(c, st.Rdev)
	if err != nil {
		return nil
	}
	// The watcher may release the context (a removal) from now on; it
	// reads watchID under relMu.
	c.relMu.Lock()
	c.watchID = id
	released := c.devReleased
	c.relMu.Unlock()
	if released {
		removalWatch.remove(id)
	}
	// A context the program forgot stops being watched when collected (its
	// files close with their own cleanups), so the socket closes too.
	runtime.AddCleanup(c, func(id uint64) { removalWatch.remove(id) }, id)
	// The device may have gone between the open and the watch.
	if _, err := os.Stat(fmt.Sprintf("/sys/dev/char/%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))); errors.Is(err, os.ErrNotExist) {
		return &removedError{name: c.name, err: unix.ENODEV}
	}
	return nil
}

// deviceRemoved closes the context on behalf of the program: the device is
// gone (errno says how we know). Calls from then on return ErrDeviceRemoved.
func (c *Context) deviceRemoved(errno error) {
	c.mu.Lock()
	if c.closed { // the program closed it first
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.removed.Store(&removedError{name: c.name, err: errno})
	c.mu.Unlock()
	_ = c.releaseDevice(true)
}

// removedErr returns the device-removed error in place of err, a data path
// or event error that came from the library's closing of a removed context.
func (c *Context) removedErr(err error) error {
	if r := c.removed.Load(); r != nil {
		return r
	}
	return err
}
