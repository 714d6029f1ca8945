package sysfs_test

import (
	"fmt"
	"log"

	"github.com/goverbs/goverbs/sysfs"
	"github.com/goverbs/goverbs/sysfs/sysfstest"
)

// Lists the usable devices of a system recorded from the test VM (Debian's
// 6.1 kernel with two rxe devices). On a real system, use sysfs.New("/").
func ExampleFS_Devices() {
	f := sysfs.NewFS(sysfstest.MustLoad("testdata/rxe-6.1.txtar"))
	devs, err := f.Devices()
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range devs {
		fmt.Printf("%s: %s (%s), node GUID %v, uverbs ABI %d\n",
			d.Name, d.Uverbs.CharDev, d.NodeType.Transport(), d.NodeGUID, d.Uverbs.ABIVersion)
		for _, p := range d.Ports {
			fmt.Printf("  port %d: %v, %v, %s\n", p.Num, p.State, p.LinkLayer, p.Rate)
			for _, g := range p.GIDs {
				fmt.Printf("    GID[%d] %v %v on %s\n", g.Index, g.GID, g.Type, g.Netdev)
			}
		}
	}
	// Output:
	// rxe0: /dev/infiniband/uverbs0 (InfiniBand), node GUID 6cb5:c5ff:fed2:296c, uverbs ABI 2
	//   port 1: ACTIVE, Ethernet, 10 Gb/sec (1X FDR10)
	//     GID[0] fe80::6cb5:c5ff:fed2:296c RoCE v2 on va
	//     GID[1] ::ffff:10.99.0.1 RoCE v2 on va
	// rxe1: /dev/infiniband/uverbs1 (InfiniBand), node GUID c844:79ff:fe18:b641, uverbs ABI 2
	//   port 1: ACTIVE, Ethernet, 10 Gb/sec (1X FDR10)
	//     GID[0] fe80::c844:79ff:fe18:b641 RoCE v2 on vb
	//     GID[1] ::ffff:10.99.0.2 RoCE v2 on vb
}

// Shows why devices cannot be used, on a hand-written tree.
func ExampleFS_AllDevices() {
	f := sysfs.NewFS(sysfstest.MustLoad("testdata/synthetic.txtar"))
	devs, err := f.AllDevices()
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range devs {
		if d.Problem != nil {
			fmt.Printf("%s: %v\n", d.Name, d.Problem)
		} else {
			fmt.Printf("%s: usable\n", d.Name)
		}
	}
	// Output:
	// rxe0: usable
	// mlx5_0: sysfs: /dev/infiniband/uverbs1: no read-write access to the uverbs character device: access dev/infiniband/uverbs1: permission denied
	// siw0: sysfs: /dev/infiniband/uverbs2: the uverbs character device node is missing or wrong: stat dev/infiniband/uverbs2: file does not exist
	// hfi1_0: sysfs: /dev/infiniband/uverbs3 is device 231:200, but sys/class/infiniband_verbs/uverbs3/dev says 231:195: the uverbs character device node is missing or wrong
	// mlx5_1: sysfs: mlx5_1: no uverbs character device is bound to the device
}

// Reads one GID table entry, as the uverbs package does on kernels without
// the GID query ioctl.
func ExampleFS_ReadGID() {
	f := sysfs.NewFS(sysfstest.MustLoad("testdata/rxe-6.1.txtar"))
	g, err := f.ReadGID("rxe0", 1, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(g.GID, g.Type, g.Type.Resolve(sysfs.LinkLayerEthernet), g.Netdev)
	_, err = f.ReadGID("rxe0", 1, 2)
	fmt.Println(err)
	// Output:
	// ::ffff:10.99.0.1 RoCE v2 RoCE v2 va
	// sysfs: rxe0 port 1 GID 2: GID table entry is empty
}
