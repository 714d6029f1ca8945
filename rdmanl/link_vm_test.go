package rdmanl

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// ipTool is iproute2's ip in the test VM (the first ip in PATH is
// busybox's, which cannot name a veth peer).
const ipTool = "/usr/bin/ip"

// veth makes the veth pair a, b, up, removed at the test's end.
func veth(t *testing.T, a, b string) {
	t.Helper()
	for _, args := range [][]string{{"link", "add", a, "type", "veth", "peer", "name", b},
		{"link", "set", a, "up"}, {"link", "set", b, "up"}} {
		if out, err := exec.Command(ipTool, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	t.Cleanup(func() { exec.Command(ipTool, "link", "del", a).Run() })
}

func names(devs []Device) []string {
	var out []string
	for _, d := range devs {
		out = append(out, d.Name)
	}
	return out
}

// TestVMLink adds an rxe device on a new veth, renames it, checks the
// kernel's refusals, and deletes it.
func TestVMLink(t *testing.T) {
	c := dialVM(t)
	ctx := testCtx(t)
	veth(t, "rnl0", "rnl1")

	if err := c.AddLink(ctx, "rxe2", LinkRXE, "rnl0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteLink(context.Background(), "rxe2") })
	d, err := c.Device(ctx, "rxe2")
	if err != nil {
		t.Fatal(err)
	}
	if d.Driver != "rxe" || d.Ports != 1 {
		t.Errorf("new device %+v: want driver rxe with 1 port", d)
	}
	ports, err := c.Ports(ctx, d.Index)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 1 || ports[0].Netdev != "rnl0" {
		t.Errorf("ports of rxe2: %+v, want one on rnl0", ports)
	}
	all, err := c.Links(ctx)
	if err != nil {
		t.Fatal(err)
	}
	compare(t, asJSON(t, all), "link")

	for _, tc := range []struct {
		name          string
		dev, typ, net string
		want          error
		errno         unix.Errno
	}{
		{"name taken", vmenv.RXE0, LinkRXE, "rnl1", ErrNameTaken, unix.ENFILE},
		{"netdev in use", "rxe3", LinkRXE, "rnl0", ErrNetdevInUse, unix.EEXIST},
		{"netdev missing", "rxe3", LinkRXE, "nosuchnet0", ErrNetdevNotFound, unix.ENODEV},
		{"no such type", "rxe3", "nosuchtype", "rnl1", ErrLinkTypeUnavailable, unix.EINVAL},
		// Debian 12's kernels are built without siw (CONFIG_RDMA_SIW).
		{"siw not built", "siw0", LinkSIW, "rnl1", ErrLinkTypeUnavailable, unix.EINVAL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.AddLink(ctx, tc.dev, tc.typ, tc.net)
			if !errors.Is(err, tc.want) || !errors.Is(err, tc.errno) {
				t.Fatalf("AddLink(%s, %s, %s) = %v; want %v and %v", tc.dev, tc.typ, tc.net, err, tc.want, tc.errno)
			}
			var e *Error
			if !errors.As(err, &e) || !strings.Contains(e.Op, tc.dev) {
				t.Errorf("error %v does not say which link", err)
			}
		})
	}

	// Rename there and back; a taken name is refused.
	if err := c.Rename(ctx, "rxe2", "rnlx"); err != nil {
		t.Fatal(err)
	}
	devs, err := c.Devices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(devs); !slices.Contains(got, "rnlx") || slices.Contains(got, "rxe2") {
		t.Errorf("after renaming rxe2 to rnlx: %v", got)
	}
	compare(t, asJSON(t, devs), "dev")
	if err := c.Rename(ctx, "rnlx", vmenv.RXE0); !errors.Is(err, ErrNameTaken) {
		t.Errorf("Rename to a taken name: %v, want ErrNameTaken", err)
	}
	if err := c.Rename(ctx, "rnlx", "rxe2"); err != nil {
		t.Fatal(err)
	}

	if err := c.DeleteLink(ctx, "rxe2"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Device(ctx, "rxe2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("rxe2 after DeleteLink: %v, want ErrNotFound", err)
	}
	if err := c.DeleteLink(ctx, "rxe2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("DeleteLink twice: %v, want ErrNotFound", err)
	}
}

// TestVMBadInput feeds each call input it must refuse before or at the
// kernel, with a clear error.
func TestVMBadInput(t *testing.T) {
	c := dialVM(t)
	ctx := testCtx(t)
	long := strings.Repeat("x", 64)
	for _, tc := range []struct {
		name string
		call func() error
		want error  // a sentinel, or nil to check only the text
		text string // what the error must name
	}{
		{"AddLink/empty name", func() error { return c.AddLink(ctx, "", LinkRXE, "va") }, nil, "empty"},
		{"AddLink/long name", func() error { return c.AddLink(ctx, long, LinkRXE, "va") }, nil, "longer than 63"},
		{"AddLink/name with %", func() error { return c.AddLink(ctx, "rxe%d", LinkRXE, "va") }, nil, "contains"},
		{"AddLink/name with /", func() error { return c.AddLink(ctx, "a/b", LinkRXE, "va") }, nil, "contains"},
		{"AddLink/empty type", func() error { return c.AddLink(ctx, "rxe9", "", "va") }, nil, "link type"},
		{"AddLink/empty netdev", func() error { return c.AddLink(ctx, "rxe9", LinkRXE, "") }, nil, "network device"},
		{"AddLink/long netdev", func() error { return c.AddLink(ctx, "rxe9", LinkRXE, "0123456789abcdef") }, nil, "network device"},
		{"DeleteLink/missing", func() error { return c.DeleteLink(ctx, "nosuch9") }, ErrNotFound, "nosuch9"},
		{"Rename/missing", func() error { return c.Rename(ctx, "nosuch9", "x") }, ErrNotFound, "nosuch9"},
		{"Rename/empty", func() error { return c.Rename(ctx, vmenv.RXE0, "") }, nil, "empty"},
		{"Device/missing", func() error { _, err := c.Device(ctx, "nosuch9"); return err }, ErrNotFound, "nosuch9"},
		{"DeviceByIndex/missing", func() error { _, err := c.DeviceByIndex(ctx, 1<<20); return err }, ErrNotFound, "1048576"},
		{"Ports/missing", func() error { _, err := c.Ports(ctx, 1<<20); return err }, ErrNotFound, "1048576"},
		{"Port/no such port", func() error { _, err := c.Port(ctx, 0, 9); return err }, ErrNotFound, "port 9"},
		{"PortCounters/missing", func() error { _, err := c.PortCounters(ctx, 1<<20, 1); return err }, ErrNotFound, "1048576"},
		{"QPs/missing", func() error { _, err := c.QPs(ctx, 1<<20); return err }, ErrNotFound, "1048576"},
		{"SetNetnsMode/bad", func() error { return c.SetNetnsMode(ctx, 7) }, nil, "neither"},
		{"MoveToNetns/negative fd", func() error { return c.MoveToNetns(ctx, vmenv.RXE1, -1) }, nil, "negative"},
		{"SetQPCounterAuto/bad mask", func() error { return c.SetQPCounterAuto(ctx, 0, 1, 1<<7) }, nil, "criteria"},
		{"HWCounters/missing", func() error { _, err := HWCounters("nosuch9", 1); return err }, ErrNotFound, "nosuch9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.text) {
				t.Errorf("err = %v; want %v naming %q", err, tc.want, tc.text)
			}
		})
	}
	// The Conn still works after every refusal.
	if _, err := c.Devices(ctx); err != nil {
		t.Fatal(err)
	}
	// A context that is already over stops a call before it waits.
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Devices(done); !errors.Is(err, context.Canceled) {
		t.Errorf("Devices with a canceled context: %v", err)
	}
	if _, err := c.Devices(ctx); err != nil {
		t.Errorf("Devices after a canceled call: %v", err)
	}
}

// newNetns makes a new network namespace and returns an fd for it; the
// namespace lives until the fd is closed (and nothing else holds it).
func newNetns(t *testing.T) *os.File {
	t.Helper()
	type result struct {
		f   *os.File
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		f, err := os.Open("/proc/thread-self/ns/net")
		// Back to the initial namespace, so only f holds the new one;
		// a thread that cannot go back dies with this goroutine.
		if serr := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); serr == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{f, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.f
}

// setModeWhenFree sets the netns mode, retrying while the kernel refuses
// with EBUSY because a namespace other than the initial one still exists
// (one just closed is destroyed asynchronously).
func setModeWhenFree(t *testing.T, c *Conn, m NetnsMode) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := c.SetNetnsMode(context.Background(), m)
		if err == nil {
			return
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			t.Fatalf("set netns mode %v: %v", m, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestVMNetns checks the namespace modes: in shared mode no device moves
// and the mode cannot change while another namespace exists; in exclusive
// mode a new namespace sees no device, and rxe1 cannot be moved into it
// (rxe cannot disassociate its user contexts, which the kernel requires).
func TestVMNetns(t *testing.T) {
	c := dialVM(t)
	ctx := testCtx(t)

	// Shared mode: devices cannot move, and the mode cannot change while
	// another namespace exists.
	ns := newNetns(t)
	if err := c.MoveToNetns(ctx, vmenv.RXE1, int(ns.Fd())); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("MoveToNetns in shared mode: %v, want EOPNOTSUPP", err)
	}
	if err := c.SetNetnsMode(ctx, NetnsExclusive); !errors.Is(err, unix.EBUSY) {
		t.Errorf("SetNetnsMode with a second namespace alive: %v, want EBUSY", err)
	}
	ns.Close()

	setModeWhenFree(t, c, NetnsExclusive)
	t.Cleanup(func() { setModeWhenFree(t, c, NetnsShared) })
	s, err := c.System(ctx)
	if err != nil || s.NetnsMode != NetnsExclusive {
		t.Fatalf("System() = %+v, %v; want exclusive", s, err)
	}
	out, _ := exec.Command("rdma", "system").CombinedOutput()
	if !strings.Contains(string(out), "netns exclusive") {
		t.Errorf("rdma system says %q in exclusive mode", out)
	}

	// Exclusive mode: a new namespace sees no device at first.
	ns = newNetns(t)
	nsOpen := true
	defer func() {
		if nsOpen {
			ns.Close()
		}
	}()
	inNS, err := DialNetns(int(ns.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer inNS.Close()
	if devs, err := inNS.Devices(ctx); err != nil || len(devs) != 0 {
		t.Fatalf("devices of a new namespace in exclusive mode: %v, %v; want none", names(devs), err)
	}

	// rxe cannot move: the kernel moves only devices whose driver can
	// disassociate user contexts (ib_device_set_netns_put), and rxe has no
	// disassociate_ucontext on 6.1 or 6.12. The VM has no other device.
	err = c.MoveToNetns(ctx, vmenv.RXE1, int(ns.Fd()))
	if !errors.Is(err, ErrNotSupported) || !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("MoveToNetns(rxe1) in exclusive mode: %v; want ErrNotSupported (EOPNOTSUPP)", err)
	}
	// Nothing moved: the host keeps both devices, the namespace has none.
	host, err := c.Devices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(host); !slices.Contains(got, vmenv.RXE1) || !slices.Contains(got, vmenv.RXE0) {
		t.Errorf("host devices in exclusive mode: %v; want rxe0 and rxe1", got)
	}
	compare(t, asJSON(t, host), "dev")
	if devs, err := inNS.Devices(ctx); err != nil || len(devs) != 0 {
		t.Errorf("devices of the namespace after the refused move: %v, %v; want none", names(devs), err)
	}
	inNS.Close()
	ns.Close()
	nsOpen = false
}
