package sysfs_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/rdmanl"
	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/sysfs"
)

func requireVM(t *testing.T) {
	t.Helper()
	if !vmenv.InVM() {
		t.Skip(`needs the goverbs test VM (GOVERBS_VM unset): go test -exec "$PWD/bin/vmexec -kernel 6.1" ./sysfs/`)
	}
}

// TestVMLive reads the VM's real sysfs: rxe0 on va and rxe1 on vb, both
// usable, in the kernel's order, and in agreement with netlink.
func TestVMLive(t *testing.T) {
	requireVM(t)
	t.Logf("kernel %s", vmenv.KernelRelease())
	f := sysfs.New("/")
	devs, err := f.Devices()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range devs {
		names = append(names, d.Name)
	}
	if diff := cmp.Diff([]string{vmenv.RXE0, vmenv.RXE1}, names); diff != "" {
		t.Fatalf("devices (-want +got):\n%s", diff)
	}
	for i, d := range devs {
		netdev, addr := vmenv.NetdevA, vmenv.AddrA
		if i == 1 {
			netdev, addr = vmenv.NetdevB, vmenv.AddrB
		}
		if d.Problem != nil || d.Driver != "rxe" || d.NodeType != sysfs.NodeCA || d.NodeGUID == 0 ||
			d.Uverbs.ABIVersion != 2 || d.Uverbs.Dev.Major != 231 || d.Uverbs.CharDev != "/dev/infiniband/"+d.Uverbs.Name {
			t.Errorf("%s: %+v", d.Name, d)
		}
		if len(d.Ports) != 1 {
			t.Fatalf("%s has %d ports", d.Name, len(d.Ports))
		}
		p := d.Ports[0]
		if p.Num != 1 || p.State != sysfs.PortActive || p.PhysState != sysfs.PhysLinkUp || p.LinkLayer != sysfs.LinkLayerEthernet {
			t.Errorf("%s port: %+v", d.Name, p)
		}
		if _, err := sysfs.ParseRate(p.Rate); err != nil {
			t.Errorf("%s rate: %v", d.Name, err)
		}
		wantGID := sysfs.GIDEntry{Index: vmenv.GIDIndex, GID: netip.MustParseAddr("::ffff:" + addr).As16(), Type: sysfs.GIDAttrRoCEv2, Netdev: netdev}
		found := false
		for _, g := range p.GIDs {
			rg, err := f.ReadGID(d.Name, 1, g.Index)
			if err != nil || rg != g {
				t.Errorf("%s ReadGID(1, %d) = %+v, %v; the table says %+v", d.Name, g.Index, rg, err, g)
			}
			found = found || g == wantGID
		}
		if !found {
			t.Errorf("%s GIDs %+v lack %+v", d.Name, p.GIDs, wantGID)
		}
		// rxe's table has 1024 entries, most of them empty.
		if _, err := f.ReadGID(d.Name, 1, 1000); !errors.Is(err, sysfs.ErrGIDEmpty) || !errors.Is(err, unix.ENODATA) {
			t.Errorf("%s ReadGID(1, 1000): err = %v, want ErrGIDEmpty", d.Name, err)
		}
	}

	// Netlink, which rdma-core asks first, must say the same.
	c, err := rdmanl.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nl, err := c.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(nl) != len(devs) {
		t.Fatalf("netlink has %d devices, sysfs %d", len(nl), len(devs))
	}
	for i, n := range nl {
		d := devs[i]
		if n.Name != d.Name || n.NodeGUID != uint64(d.NodeGUID) || n.SysImageGUID != uint64(d.SysImageGUID) ||
			sysfs.NodeType(n.NodeType) != d.NodeType || int(n.Ports) != len(d.Ports) {
			t.Errorf("netlink device %+v disagrees with sysfs %+v", n, d)
		}
		cd, err := c.CharDev(n.Index, "uverbs")
		if err != nil {
			t.Fatal(err)
		}
		want := rdmanl.CharDev{Name: d.Uverbs.Name, Major: d.Uverbs.Dev.Major, Minor: d.Uverbs.Dev.Minor,
			ABI: uint32(d.Uverbs.ABIVersion), DriverID: 14}
		if cd != want {
			t.Errorf("netlink uverbs of %s = %+v, sysfs says %+v", d.Name, cd, want)
		}
	}
}

// TestVMRecordedShape checks that the recorded trees still describe what the
// VM's kernel shows: the same devices with the same problems and
// attributes, apart from what changes with every boot (GUIDs, GIDs).
func TestVMRecordedShape(t *testing.T) {
	requireVM(t)
	file := "rxe-" + vmenv.KernelName() + ".txtar"
	rec, err := sysfs.NewFS(loadTree(t, file)).Devices()
	if err != nil {
		t.Fatal(err)
	}
	live, err := sysfs.New("/").Devices()
	if err != nil {
		t.Fatal(err)
	}
	strip := func(devs []sysfs.Device) []sysfs.Device {
		out := make([]sysfs.Device, len(devs))
		for i, d := range devs {
			d.NodeGUID, d.SysImageGUID, d.Driver = 0, 0, ""
			d.Ports = append([]sysfs.Port(nil), d.Ports...)
			for j := range d.Ports {
				var idx []sysfs.GIDEntry
				for _, g := range d.Ports[j].GIDs {
					idx = append(idx, sysfs.GIDEntry{Index: g.Index, Type: g.Type, Netdev: g.Netdev})
				}
				d.Ports[j].GIDs = idx
			}
			out[i] = d
		}
		return out
	}
	if diff := cmp.Diff(strip(rec), strip(live)); diff != "" {
		t.Errorf("%s no longer matches the kernel (-recorded +live):\n%s", file, diff)
	}
}
