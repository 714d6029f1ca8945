package rdmacm

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/rdmanl"
	"github.com/goverbs/goverbs/sysfs"
	"github.com/goverbs/goverbs/uverbs"
)

// device is an opened uverbs context shared by every ID bound to one RDMA
// device (the kernel's device index and node GUID), as librdmacm shares one
// ibv_context per device. The last release closes it.
type device struct {
	key           devKey
	name          string
	ctx           *uverbs.Context
	maxRdAtom     uint8
	maxInitRdAtom uint8
	refs          int
	dead          bool // removed: not handed out again

	// pd is the PD that Dial and Accept give their connections on this
	// device unless WithPD names another, as librdmacm gives every ID one
	// PD per device: allocated for the first connection, deallocated with
	// the context.
	pdMu sync.Mutex
	pd   *uverbs.PD
}

// sharedPD returns the device's shared PD, allocating it for the first
// connection.
func (d *device) sharedPD() (*uverbs.PD, error) {
	d.pdMu.Lock()
	defer d.pdMu.Unlock()
	if d.pd == nil {
		pd, err := d.ctx.AllocPD()
		if err != nil {
			return nil, err
		}
		d.pd = pd
	}
	return d.pd, nil
}

type devKey struct {
	index uint32
	guid  uint64 // host order, as sysfs prints it
}

var devices = struct {
	sync.Mutex
	m map[devKey]*device
}{m: make(map[devKey]*device)}

// acquireDevice returns the shared context of the device with this index
// and GUID, opening it if needed.
func acquireDevice(key devKey) (*device, error) {
	devices.Lock()
	defer devices.Unlock()
	if d := devices.m[key]; d != nil && !d.dead {
		d.refs++
		return d, nil
	}
	name, err := deviceName(key)
	if err != nil {
		return nil, err
	}
	ctx, err := uverbs.Open(name)
	if err != nil {
		return nil, err
	}
	attr, err := ctx.QueryDevice()
	if err != nil {
		ctx.Close()
		return nil, err
	}
	d := &device{key: key, name: name, ctx: ctx, refs: 1,
		maxRdAtom: uint8(min(attr.MaxQPRdAtom, 255)), maxInitRdAtom: uint8(min(attr.MaxQPInitRdAtom, 255))}
	devices.m[key] = d
	return d, nil
}

// deviceName finds the RDMA device by index and GUID: netlink first (it
// knows the index; several rxe devices on one MAC share a GUID), then sysfs
// by GUID alone.
func deviceName(key devKey) (string, error) {
	if devs, err := rdmanl.Devices(); err == nil || errors.Is(err, rdmanl.ErrDumpInterrupted) {
		for _, d := range devs {
			if d.Index == key.index && d.NodeGUID == key.guid {
				return d.Name, nil
			}
		}
	}
	devs, err := sysfs.New("/").Devices()
	if err != nil {
		return "", fmt.Errorf("rdmacm: find the RDMA device of GUID %016x: %w", key.guid, err)
	}
	for _, d := range devs {
		if uint64(d.NodeGUID) == key.guid {
			return d.Name, nil
		}
	}
	return "", fmt.Errorf("rdmacm: no RDMA device with index %d and node GUID %016x (removed?): %w",
		key.index, key.guid, unix.ENODEV)
}

// release drops one reference; the last deallocates the shared PD and
// closes the context (which frees what the kernel would not deallocate:
// a PD with memory still registered on it).
func (d *device) release() {
	devices.Lock()
	d.refs--
	last := d.refs == 0
	if last && devices.m[d.key] == d {
		delete(devices.m, d.key)
	}
	devices.Unlock()
	if last {
		d.pdMu.Lock()
		if d.pd != nil {
			d.pd.Close()
			d.pd = nil
		}
		d.pdMu.Unlock()
		d.ctx.Close()
	}
}

// markRemoved stops handing the device out (DEVICE_REMOVAL).
func (d *device) markRemoved() {
	devices.Lock()
	d.dead = true
	if devices.m[d.key] == d {
		delete(devices.m, d.key)
	}
	devices.Unlock()
}

// device returns the device the ID is bound to (after Bind to a specific
// address, ResolveAddr, or on an incoming connection), opening it once.
func (id *ID) device() (*device, error) {
	id.mu.Lock()
	d := id.dev
	id.mu.Unlock()
	if d != nil {
		return d, nil
	}
	r, err := id.queryAddr()
	if err != nil {
		return nil, err
	}
	if r.NodeGUID == 0 {
		return nil, fmt.Errorf("rdmacm: the ID is not bound to an RDMA device yet (bind a specific address or resolve one first): %w", unix.EINVAL)
	}
	d, err = acquireDevice(devKey{index: r.IBDevIndex, guid: bits.ReverseBytes64(r.NodeGUID)})
	if err != nil {
		return nil, err
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.closed {
		d.release()
		return nil, errClosed("open device")
	}
	if id.dev != nil { // a concurrent call won
		d.release()
		return id.dev, nil
	}
	id.dev = d
	if id.sharedChan {
		holdDevice(id.ch, d)
	}
	return d, nil
}

// Context returns the uverbs context of the device the ID is bound to,
// shared with the other IDs on that device and owned by the package (do
// not close it). Create the ID's PD and CQs on it.
func (id *ID) Context() (*uverbs.Context, error) {
	if err := id.use("context"); err != nil {
		return nil, err
	}
	d, err := id.device()
	if err != nil {
		return nil, err
	}
	return d.ctx, nil
}

// DeviceName returns the name of the RDMA device the ID is bound to.
func (id *ID) DeviceName() (string, error) {
	if err := id.use("device name"); err != nil {
		return "", err
	}
	d, err := id.device()
	if err != nil {
		return "", err
	}
	return d.name, nil
}
