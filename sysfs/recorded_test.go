package sysfs_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/sysfs"
)

// TestRecorded reads the trees recorded from the test VM's kernels (see
// sysfs/internal/record): two rxe devices on the veth pair va/vb.
func TestRecorded(t *testing.T) {
	for _, kernel := range []string{"6.1", "6.12"} {
		t.Run(kernel, func(t *testing.T) {
			tree := loadTree(t, "rxe-"+kernel+".txtar")
			f := sysfs.NewFS(tree)
			devs, err := f.AllDevices()
			if err != nil {
				t.Fatal(err)
			}
			if len(devs) != 2 {
				t.Fatalf("%d devices, want 2", len(devs))
			}
			for i, d := range devs {
				netdev := []string{"va", "vb"}[i]
				// rxe's node GUID is its netdev's EUI-64, which is also
				// the interface ID of its link-local GID.
				ll := netip.AddrFrom16(d.Ports[0].GIDs[0].GID).As16()
				guid := sysfs.GUID(0)
				for _, b := range ll[8:] {
					guid = guid<<8 | sysfs.GUID(b)
				}
				want := sysfs.Device{
					Name:         fmt.Sprintf("rxe%d", i),
					NodeType:     sysfs.NodeCA,
					NodeGUID:     guid,
					SysImageGUID: guid,
					NodeDesc:     "rxe",
					Uverbs: sysfs.Uverbs{Name: fmt.Sprintf("uverbs%d", i), CharDev: fmt.Sprintf("/dev/infiniband/uverbs%d", i),
						Dev: sysfs.DevNum{Major: 231, Minor: 192 + uint32(i)}, ABIVersion: 2},
					Ports: []sysfs.Port{{
						Num: 1, State: sysfs.PortActive, PhysState: sysfs.PhysLinkUp, LinkLayer: sysfs.LinkLayerEthernet,
						CapMask: 0x00010000, Rate: "10 Gb/sec (1X FDR10)",
						GIDs: []sysfs.GIDEntry{
							{Index: 0, GID: ll, Type: sysfs.GIDAttrRoCEv2, Netdev: netdev},
							{Index: 1, GID: netip.MustParseAddr(fmt.Sprintf("::ffff:10.99.0.%d", i+1)).As16(), Type: sysfs.GIDAttrRoCEv2, Netdev: netdev},
						},
						PKeys: []uint16{0xffff},
					}},
				}
				if ll[0] != 0xfe || ll[1] != 0x80 {
					t.Errorf("%s GID[0] %v is not link-local", d.Name, netip.AddrFrom16(ll))
				}
				if diff := cmp.Diff(want, d, problemIs); diff != "" {
					t.Errorf("%s (-want +got):\n%s", d.Name, diff)
				}
			}
		})
	}
}
