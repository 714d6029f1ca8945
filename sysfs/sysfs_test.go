package sysfs_test

import (
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/sysfs"
	"github.com/goverbs/goverbs/sysfs/sysfstest"
)

func loadTree(tb testing.TB, file string) *sysfstest.FS {
	tb.Helper()
	t, err := sysfstest.Load(filepath.Join("testdata", file))
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// editedTree loads a tree and replaces whole entries in its text: each key
// is a marker line's name part, each value the new marker and contents
// (without the leading "-- ").
func editedTree(tb testing.TB, file string, edits map[string]string) *sysfstest.FS {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		tb.Fatal(err)
	}
	text := string(data)
	for name, repl := range edits {
		start := strings.Index(text, "-- "+name+" ")
		if start < 0 {
			tb.Fatalf("no entry %q in %s", name, file)
		}
		end := strings.Index(text[start+3:], "\n-- ")
		if end < 0 {
			end = len(text)
		} else {
			end += start + 3 + 1
		}
		text = text[:start] + repl + text[end:]
	}
	t, err := sysfstest.Parse([]byte(text))
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

func mustAddr(s string) sysfs.GID { return netip.MustParseAddr(s).As16() }

const (
	rxeDir   = "sys/devices/virtual/infiniband/rxe0"
	rxePort  = rxeDir + "/ports/1"
	mlx5Dir  = "sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/infiniband/mlx5_0"
	mlx5Port = mlx5Dir + "/ports/1"
)

var problemIs = cmp.Comparer(func(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return errors.Is(a, b) || errors.Is(b, a)
})

func TestSyntheticAllDevices(t *testing.T) {
	f := sysfs.NewFS(loadTree(t, "synthetic.txtar"))
	devs, err := f.AllDevices()
	if err != nil {
		t.Fatal(err)
	}
	type summary struct {
		Name, Driver string
		Problem      error
	}
	var got []summary
	for _, d := range devs {
		got = append(got, summary{d.Name, d.Driver, d.Problem})
	}
	want := []summary{
		{"rxe0", "", nil}, // software device: its driver only comes from netlink
		{"mlx5_0", "mlx5_core", sysfs.ErrNoAccess},
		{"siw0", "", sysfs.ErrNoCharDev},
		{"hfi1_0", "hfi1", sysfs.ErrNoCharDev},
		{"mlx5_1", "mlx5_core", sysfs.ErrNoUverbs},
	}
	if diff := cmp.Diff(want, got, problemIs); diff != "" {
		t.Errorf("AllDevices (-want +got):\n%s", diff)
	}
	if p := devs[1].Problem; !errors.Is(p, fs.ErrPermission) || !errors.Is(p, unix.EACCES) {
		t.Errorf("mlx5_0 problem %v does not wrap EACCES", p)
	}
	if p := devs[2].Problem; !errors.Is(p, fs.ErrNotExist) {
		t.Errorf("siw0 problem %v does not wrap fs.ErrNotExist", p)
	}
	for _, d := range devs {
		if d.Problem != nil {
			t.Logf("%s: %v", d.Name, d.Problem)
		}
	}

	usable, err := f.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(usable) != 1 || usable[0].Name != "rxe0" {
		t.Errorf("Devices() = %v, want only rxe0", usable)
	}
}

func TestSyntheticDevice(t *testing.T) {
	f := sysfs.NewFS(loadTree(t, "synthetic.txtar"))
	for _, tc := range []struct {
		name string
		want sysfs.Device
	}{
		{"rxe0", sysfs.Device{
			Name:         "rxe0",
			NodeType:     sysfs.NodeCA,
			NodeGUID:     0x025056fffe8fc5b3,
			SysImageGUID: 0x025056fffe8fc5b3,
			NodeDesc:     "rxe0",
			Uverbs:       sysfs.Uverbs{Name: "uverbs0", CharDev: "/dev/infiniband/uverbs0", Dev: sysfs.DevNum{Major: 231, Minor: 192}, ABIVersion: 2},
			Ports: []sysfs.Port{{
				Num: 1, State: sysfs.PortActive, PhysState: sysfs.PhysLinkUp, LinkLayer: sysfs.LinkLayerEthernet,
				CapMask: 0x00010000, Rate: "10 Gb/sec (1X FDR10)",
				GIDs: []sysfs.GIDEntry{
					{Index: 0, GID: mustAddr("fe80::250:56ff:fe8f:c5b3"), Type: sysfs.GIDAttrIBRoCEv1, Netdev: "va"},
					{Index: 1, GID: mustAddr("::ffff:10.99.0.1"), Type: sysfs.GIDAttrRoCEv2, Netdev: "va"},
				},
				PKeys: []uint16{0xffff},
			}},
		}},
		{"mlx5_0", sysfs.Device{
			Name:         "mlx5_0",
			NodeType:     sysfs.NodeCA,
			NodeGUID:     0xb8599f0300d4e6a2,
			SysImageGUID: 0xb8599f0300d4e6a2,
			FWVer:        "16.35.2000",
			NodeDesc:     "host1 mlx5_0",
			HWRev:        "0x0",
			HCAType:      "MT4119",
			BoardID:      "MT_0000000010",
			Driver:       "mlx5_core",
			Uverbs:       sysfs.Uverbs{Name: "uverbs1", CharDev: "/dev/infiniband/uverbs1", Dev: sysfs.DevNum{Major: 231, Minor: 193}, ABIVersion: 1},
			Ports: []sysfs.Port{{
				Num: 1, State: sysfs.PortActive, PhysState: sysfs.PhysLinkUp, LinkLayer: sysfs.LinkLayerInfiniBand,
				LID: 5, SMLID: 1, CapMask: 0xa651e848, Rate: "100 Gb/sec (4X EDR)",
				GIDs: []sysfs.GIDEntry{
					// types/0 fails with EINVAL: IB/RoCE v1, as rdma-core reads it.
					{Index: 0, GID: mustAddr("fe80::b859:9f03:d4:e6a2"), Type: sysfs.GIDAttrIBRoCEv1},
				},
				PKeys: []uint16{0xffff, 0, 0x8001},
			}},
			Problem: sysfs.ErrNoAccess,
		}},
		{"hfi1_0", sysfs.Device{
			Name:         "hfi1_0",
			NodeType:     sysfs.NodeCA,
			NodeGUID:     0x001175010179e5a2,
			SysImageGUID: 0x001175010179e5a2,
			FWVer:        "1.27.0",
			NodeDesc:     "host1 hfi1_0",
			HWRev:        "17",
			BoardID:      "Intel Omni-Path Host Fabric Interface Adapter 100 Series",
			Driver:       "hfi1",
			Uverbs:       sysfs.Uverbs{Name: "uverbs3", CharDev: "/dev/infiniband/uverbs3", Dev: sysfs.DevNum{Major: 231, Minor: 195}, ABIVersion: 6},
			Ports: []sysfs.Port{{
				Num: 1, State: sysfs.PortInit, PhysState: sysfs.PhysLinkUp, LinkLayer: sysfs.LinkLayerInfiniBand,
				LID: 0xffff, CapMask: 0x00410022, Rate: "100 Gb/sec (4X EDR)",
				// No gid_attrs directory (kernels before 4.5): IB/RoCE v1.
				GIDs:  []sysfs.GIDEntry{{Index: 0, GID: mustAddr("fe80::11:7501:179:e5a2"), Type: sysfs.GIDAttrIBRoCEv1}},
				PKeys: []uint16{0xffff},
			}},
			Problem: sysfs.ErrNoCharDev,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := f.Device(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, problemIs); diff != "" {
				t.Errorf("Device(%q) (-want +got):\n%s", tc.name, diff)
			}
		})
	}
}

func TestDeviceNotFound(t *testing.T) {
	f := sysfs.NewFS(loadTree(t, "synthetic.txtar"))
	for _, name := range []string{"mlx5_9", "", ".", "..", "../rxe0", "rxe0/ports", "a\x00b"} {
		_, err := f.Device(name)
		if !errors.Is(err, sysfs.ErrNoDevice) || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Device(%q): err = %v, want ErrNoDevice and fs.ErrNotExist", name, err)
		}
	}
}

func TestNoRDMA(t *testing.T) {
	f := sysfs.New(t.TempDir())
	devs, err := f.AllDevices()
	if err != nil || len(devs) != 0 {
		t.Errorf("AllDevices on an empty root = %v, %v; want none and no error", devs, err)
	}
}

func TestReadGID(t *testing.T) {
	f := sysfs.NewFS(loadTree(t, "synthetic.txtar"))
	for _, tc := range []struct {
		dev         string
		port, index int
		want        sysfs.GIDEntry
		wantErr     error
	}{
		{"rxe0", 1, 0, sysfs.GIDEntry{Index: 0, GID: mustAddr("fe80::250:56ff:fe8f:c5b3"), Type: sysfs.GIDAttrIBRoCEv1, Netdev: "va"}, nil},
		{"rxe0", 1, 1, sysfs.GIDEntry{Index: 1, GID: mustAddr("::ffff:10.99.0.1"), Type: sysfs.GIDAttrRoCEv2, Netdev: "va"}, nil},
		{"rxe0", 1, 2, sysfs.GIDEntry{}, sysfs.ErrGIDEmpty},
		{"rxe0", 1, 3, sysfs.GIDEntry{}, unix.ENODATA},
		{"rxe0", 1, 4, sysfs.GIDEntry{}, fs.ErrNotExist}, // past the table
		{"rxe0", 2, 0, sysfs.GIDEntry{}, fs.ErrNotExist}, // no such port
		{"rxe0", -1, 0, sysfs.GIDEntry{}, fs.ErrInvalid},
		{"rxe9", 1, 0, sysfs.GIDEntry{}, sysfs.ErrNoDevice},
		{"siw0", 1, 0, sysfs.GIDEntry{Index: 0, GID: mustAddr("250:56ff:fe00:1::"), Type: sysfs.GIDAttrIBRoCEv1, Netdev: "eth0"}, nil},
		{"mlx5_0", 1, 0, sysfs.GIDEntry{Index: 0, GID: mustAddr("fe80::b859:9f03:d4:e6a2"), Type: sysfs.GIDAttrIBRoCEv1}, nil},
	} {
		got, err := f.ReadGID(tc.dev, tc.port, tc.index)
		if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
			t.Errorf("ReadGID(%s, %d, %d): err = %v, want %v", tc.dev, tc.port, tc.index, err, tc.wantErr)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ReadGID(%s, %d, %d) (-want +got):\n%s", tc.dev, tc.port, tc.index, diff)
		}
	}
}

// TestMalformed checks that every file the FS parses gives a typed error
// naming the file, and that the device is then reported unusable rather
// than half-read.
func TestMalformed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		file  string // the entry replaced
		entry string // its replacement: marker name part and contents
		dev   string
		// wantFile is the file the error must name; "" means the error is
		// not a ParseError but must match wantErr.
		wantFile string
		wantErr  error
	}{
		{"node guid short", rxeDir + "/node_guid", "-- " + rxeDir + "/node_guid --\n0250:56ff:fe8f\n", "rxe0", rxeDir + "/node_guid", nil},
		{"node guid junk", rxeDir + "/node_guid", "-- " + rxeDir + "/node_guid --\n0250:56ff:fe8f:c5bz\n", "rxe0", rxeDir + "/node_guid", nil},
		{"sys image guid empty", rxeDir + "/sys_image_guid", "-- " + rxeDir + "/sys_image_guid --\n\n", "rxe0", rxeDir + "/sys_image_guid", nil},
		{"node type no name", rxeDir + "/node_type", "-- " + rxeDir + "/node_type --\n1\n", "rxe0", rxeDir + "/node_type", nil},
		{"node type negative", rxeDir + "/node_type", "-- " + rxeDir + "/node_type --\n-1: CA\n", "rxe0", rxeDir + "/node_type", nil},
		{"node type missing", rxeDir + "/node_type", "", "rxe0", "", fs.ErrNotExist},
		{"state words", rxePort + "/state", "-- " + rxePort + "/state --\nACTIVE\n", "rxe0", rxePort + "/state", nil},
		{"phys state huge", rxePort + "/phys_state", "-- " + rxePort + "/phys_state --\n99999999999: LinkUp\n", "rxe0", rxePort + "/phys_state", nil},
		// The kernel hands both states out as a u8: a number past 255 is
		// refused, not cut down to a state it is not.
		{"state past a u8", rxePort + "/state", "-- " + rxePort + "/state --\n260: ACTIVE\n", "rxe0", rxePort + "/state", nil},
		{"phys state past a u8", rxePort + "/phys_state", "-- " + rxePort + "/phys_state --\n261: LinkUp\n", "rxe0", rxePort + "/phys_state", nil},
		{"link layer", rxePort + "/link_layer", "-- " + rxePort + "/link_layer --\nethernet\n", "rxe0", rxePort + "/link_layer", nil},
		{"lid decimal", rxePort + "/lid", "-- " + rxePort + "/lid --\n5\n", "rxe0", rxePort + "/lid", nil},
		{"cap mask too wide", rxePort + "/cap_mask", "-- " + rxePort + "/cap_mask --\n0x100000000\n", "rxe0", rxePort + "/cap_mask", nil},
		{"lmc hex", rxePort + "/lid_mask_count", "-- " + rxePort + "/lid_mask_count --\n0x1\n", "rxe0", rxePort + "/lid_mask_count", nil},
		{"rate", rxePort + "/rate", "-- " + rxePort + "/rate --\nfast\n", "rxe0", rxePort + "/rate", nil},
		{"gid short", rxePort + "/gids/0", "-- " + rxePort + "/gids/0 --\nfe80::1\n", "rxe0", rxePort + "/gids/0", nil},
		{"gid type", rxePort + "/gid_attrs/types/1", "-- " + rxePort + "/gid_attrs/types/1 --\nRoCE v3\n", "rxe0", rxePort + "/gid_attrs/types/1", nil},
		{"gid type unreadable", rxePort + "/gid_attrs/types/1", "-- " + rxePort + "/gid_attrs/types/1 (error EIO) --\n", "rxe0", "", unix.EIO},
		{"gid type empty", rxePort + "/gid_attrs/types/1", "-- " + rxePort + "/gid_attrs/types/1 --\n\n", "rxe0", rxePort + "/gid_attrs/types/1", nil},
		{"gid unreadable", rxePort + "/gids/1", "-- " + rxePort + "/gids/1 (error EIO) --\n", "rxe0", "", unix.EIO},
		{"pkey", rxePort + "/pkeys/0", "-- " + rxePort + "/pkeys/0 --\n0x1ffff\n", "rxe0", rxePort + "/pkeys/0", nil},
		{"uverbs dev", "sys/devices/virtual/infiniband_verbs/uverbs0/dev", "-- sys/devices/virtual/infiniband_verbs/uverbs0/dev --\n231\n", "rxe0", "sys/devices/virtual/infiniband_verbs/uverbs0/dev", nil},
		{"uverbs abi", "sys/devices/virtual/infiniband_verbs/uverbs0/abi_version", "-- sys/devices/virtual/infiniband_verbs/uverbs0/abi_version --\ntwo\n", "rxe0", "sys/devices/virtual/infiniband_verbs/uverbs0/abi_version", nil},
		{"class abi old", "sys/class/infiniband_verbs/abi_version", "-- sys/class/infiniband_verbs/abi_version --\n2\n", "rxe0", "", sysfs.ErrABIVersion},
		{"class abi new", "sys/class/infiniband_verbs/abi_version", "-- sys/class/infiniband_verbs/abi_version --\n7\n", "rxe0", "", sysfs.ErrABIVersion},
		{"class abi junk", "sys/class/infiniband_verbs/abi_version", "-- sys/class/infiniband_verbs/abi_version --\n6.0\n", "rxe0", "sys/class/infiniband_verbs/abi_version", sysfs.ErrABIVersion},
		{"class abi missing", "sys/class/infiniband_verbs/abi_version", "", "rxe0", "", sysfs.ErrABIVersion},
		{"char dev is a file", "dev/infiniband/uverbs0", "-- dev/infiniband/uverbs0 --\n", "rxe0", "", sysfs.ErrNoCharDev},
		{"fw_ver too long", rxeDir + "/fw_ver", "-- " + rxeDir + "/fw_ver --\n" + strings.Repeat("x", 9000) + "\n", "rxe0", rxeDir + "/fw_ver", nil},
		{"fw_ver unreadable", rxeDir + "/fw_ver", "-- " + rxeDir + "/fw_ver (error EIO) --\n", "rxe0", "", unix.EIO},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := sysfs.NewFS(editedTree(t, "synthetic.txtar", map[string]string{tc.file: tc.entry}))
			d, err := f.Device(tc.dev)
			if err != nil {
				t.Fatal(err)
			}
			if d.Problem == nil {
				t.Fatal("no Problem")
			}
			if tc.wantErr != nil && !errors.Is(d.Problem, tc.wantErr) {
				t.Errorf("Problem %v does not match %v", d.Problem, tc.wantErr)
			}
			if tc.wantFile != "" {
				// Errors name files by the class path, as users know them.
				wantFile := strings.NewReplacer(rxeDir, "sys/class/infiniband/rxe0",
					"sys/devices/virtual/infiniband_verbs/", "sys/class/infiniband_verbs/").Replace(tc.wantFile)
				var pe *sysfs.ParseError
				if !errors.As(d.Problem, &pe) || pe.File != wantFile || !errors.Is(d.Problem, sysfs.ErrMalformed) {
					t.Errorf("Problem %v is not a ParseError for %s", d.Problem, wantFile)
				}
			} else if !strings.Contains(d.Problem.Error(), "sys") && !strings.Contains(d.Problem.Error(), "dev/") {
				t.Errorf("Problem %v names no file", d.Problem)
			}
			devs, err := f.Devices()
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range devs {
				if u.Name == tc.dev {
					t.Errorf("%s is listed as usable", tc.dev)
				}
			}
		})
	}
}

// TestOptionalFiles checks that attributes drivers may leave out are not
// errors when missing.
func TestOptionalFiles(t *testing.T) {
	f := sysfs.NewFS(editedTree(t, "synthetic.txtar", map[string]string{
		mlx5Dir + "/fw_ver":      "",
		mlx5Dir + "/hca_type":    "",
		mlx5Dir + "/hw_rev":      "",
		mlx5Dir + "/board_id":    "",
		mlx5Dir + "/node_desc":   "",
		mlx5Port + "/pkeys/0":    "",
		mlx5Port + "/pkeys/1":    "",
		mlx5Port + "/pkeys/2":    "",
		"dev/infiniband/uverbs1": "-- dev/infiniband/uverbs1 (char 231:193) --\n",
		mlx5Port + "/rate":       "-- " + mlx5Port + "/rate (error EINVAL) --\n",
	}))
	d, err := f.Device("mlx5_0")
	if err != nil {
		t.Fatal(err)
	}
	if d.Problem != nil {
		t.Fatalf("Problem: %v", d.Problem)
	}
	if d.FWVer != "" || d.HCAType != "" || d.HWRev != "" || d.BoardID != "" || d.NodeDesc != "" || d.Ports[0].PKeys != nil || d.Ports[0].Rate != "" {
		t.Errorf("missing optional files read as %+v", d)
	}
}

// TestOSRoot checks New on a tree copied to a real directory: symbolic links
// followed by the OS, CharDev paths under the root.
func TestOSRoot(t *testing.T) {
	root := t.TempDir()
	tree := loadTree(t, "synthetic.txtar")
	if err := tree.Materialize(root); err != nil {
		t.Fatal(err)
	}
	f := sysfs.New(root)
	d, err := f.Device("rxe0")
	if err != nil {
		t.Fatal(err)
	}
	if want := root + "/dev/infiniband/uverbs0"; d.Uverbs.CharDev != want {
		t.Errorf("CharDev = %q, want %q", d.Uverbs.CharDev, want)
	}
	// A regular file stands in for the character device, which only root
	// could create: the FS must notice.
	if !errors.Is(d.Problem, sysfs.ErrNoCharDev) {
		t.Errorf("Problem = %v, want ErrNoCharDev", d.Problem)
	}
	want, err := sysfs.NewFS(tree).Device("rxe0")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, d, cmpopts.IgnoreFields(sysfs.Device{}, "Problem", "Uverbs.CharDev")); diff != "" {
		t.Errorf("New(dir) and NewFS(tree) disagree (-tree +dir):\n%s", diff)
	}
}

func TestUverbs(t *testing.T) {
	f := sysfs.NewFS(loadTree(t, "synthetic.txtar"))
	for _, tc := range []struct {
		dev     string
		want    sysfs.Uverbs
		wantErr error
	}{
		{"rxe0", sysfs.Uverbs{Name: "uverbs0", CharDev: "/dev/infiniband/uverbs0", Dev: sysfs.DevNum{Major: 231, Minor: 192}, ABIVersion: 2}, nil},
		{"mlx5_0", sysfs.Uverbs{Name: "uverbs1", CharDev: "/dev/infiniband/uverbs1", Dev: sysfs.DevNum{Major: 231, Minor: 193}, ABIVersion: 1}, sysfs.ErrNoAccess},
		{"mlx5_1", sysfs.Uverbs{}, sysfs.ErrNoUverbs},
		{"siw0", sysfs.Uverbs{Name: "uverbs2", CharDev: "/dev/infiniband/uverbs2", Dev: sysfs.DevNum{Major: 231, Minor: 194}, ABIVersion: 1}, sysfs.ErrNoCharDev},
		{"nope", sysfs.Uverbs{}, sysfs.ErrNoDevice},
	} {
		got, err := f.Uverbs(tc.dev)
		if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
			t.Errorf("Uverbs(%s): err = %v, want %v", tc.dev, err, tc.wantErr)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Uverbs(%s) (-want +got):\n%s", tc.dev, diff)
		}
		// It must agree with Device.
		if d, err := f.Device(tc.dev); err == nil && (d.Uverbs != got || !errors.Is(d.Problem, tc.wantErr)) {
			t.Errorf("Device(%s) says %+v, %v", tc.dev, d.Uverbs, d.Problem)
		}
	}
}

func TestReadPKey(t *testing.T) {
	f := sysfs.NewFS(loadTree(t, "synthetic.txtar"))
	for _, tc := range []struct {
		dev         string
		port, index int
		want        uint16
		wantErr     error
	}{
		{"mlx5_0", 1, 0, 0xffff, nil},
		{"mlx5_0", 1, 2, 0x8001, nil},
		{"mlx5_0", 1, 3, 0, fs.ErrNotExist},
		{"mlx5_0", 2, 0, 0, fs.ErrNotExist},
		{"mlx5_0", 1, -1, 0, fs.ErrInvalid},
		{"nope", 1, 0, 0, sysfs.ErrNoDevice},
	} {
		got, err := f.ReadPKey(tc.dev, tc.port, tc.index)
		if got != tc.want || !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
			t.Errorf("ReadPKey(%s, %d, %d) = %#x, %v; want %#x, %v", tc.dev, tc.port, tc.index, got, err, tc.want, tc.wantErr)
		}
	}
	bad := sysfs.NewFS(editedTree(t, "synthetic.txtar", map[string]string{mlx5Port + "/pkeys/0": "-- " + mlx5Port + "/pkeys/0 --\nffff\n"}))
	if _, err := bad.ReadPKey("mlx5_0", 1, 0); !errors.Is(err, sysfs.ErrMalformed) || !strings.Contains(err.Error(), "sys/class/infiniband/mlx5_0/ports/1/pkeys/0") {
		t.Errorf("malformed P_Key: err = %v", err)
	}
}
