package main

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/uverbs"
)

// differentialArgs are the command lines run through both rdma-core's
// ibv_devinfo and ibinfo in the test VM.
var differentialArgs = [][]string{
	{},
	{"-v"},
	{"-l"},
	{"-d", "rxe0"},
	{"-d", "rxe1", "-i", "1", "-v"},
	{"--ib-dev=rxe0", "--verbose"},
	{"-d", "nosuch"},
	{"-i", "7"},
	{"-d", "rxe0", "-i", "2"},
	{"-x"},
	{"--bogus"},
	{"-i", "0"},
	{"-i", "256", "-v"},
	{"-vd", "rxe1"},
	{"-l", "-x"},
}

// recordEnv names a directory to write the real ibv_devinfo's outputs and
// the attributes ibinfo read into, for the offline golden tests
// (testdata/vm/<kernel>/); vmexec -get brings it back.
const recordEnv = "IBINFO_RECORD"

// TestDifferentialVM compares ibinfo with rdma-core's ibv_devinfo on the
// test VM's rxe devices: the same standard output, byte for byte, and the
// same exit status. Outside the VM it skips; inside, missing devices fail.
func TestDifferentialVM(t *testing.T) {
	if !vmenv.InVM() {
		t.Skip("not in the goverbs test VM: run go test -exec \"$PWD/bin/vmexec -kernel 6.1\" ./cmd/ibinfo/ (GOVERBS_VM unset)")
	}
	vmenv.RequireDevice(t, vmenv.RXE0)
	vmenv.RequireDevice(t, vmenv.RXE1)
	ref, err := exec.LookPath("ibv_devinfo")
	if err != nil {
		t.Fatalf("inside the test VM (kernel %s) but no ibv_devinfo: %v", vmenv.KernelName(), err)
	}
	t.Logf("kernel %s (%s), GOVERBS_TRANSPORT=%q, reference %s", vmenv.KernelName(), vmenv.KernelRelease(), os.Getenv("GOVERBS_TRANSPORT"), ref)
	compared := 0
	for _, args := range differentialArgs {
		name := "[" + strings.Join(args, " ") + "]"
		want, wantExit, wantErr := runReference(t, ref, args)
		compared += len(want)
		var got, gotErr bytes.Buffer
		gotExit := run(append([]string{"ibv_devinfo"}, args...), &got, &gotErr, environment{sys: newRealSystem()})
		if diff := cmp.Diff(want, got.String()); diff != "" {
			t.Errorf("%s: stdout differs (-ibv_devinfo +ibinfo):\n%s\nibv_devinfo stderr:\n%s\nibinfo stderr:\n%s", name, diff, wantErr, gotErr.String())
		}
		if gotExit != wantExit {
			t.Errorf("%s: exit status %d, ibv_devinfo %d\nibv_devinfo stderr:\n%s\nibinfo stderr:\n%s", name, gotExit, wantExit, wantErr, gotErr.String())
		}
	}
	t.Logf("%d command lines, %d bytes of ibv_devinfo output compared", len(differentialArgs), compared)
	if dir := os.Getenv(recordEnv); dir != "" {
		record(t, ref, filepath.Join(dir, vmenv.KernelName()))
	}
}

// runReference runs ibv_devinfo with argv[0] "ibv_devinfo" (it prints
// argv[0] in its usage) and only the rxe provider (no warnings about
// providers without devices).
func runReference(t *testing.T, ref string, args []string) (stdout string, exit int, stderr string) {
	t.Helper()
	cmd := exec.Command(ref, args...)
	cmd.Args[0] = "ibv_devinfo"
	cmd.Env = append(os.Environ(), "IBV_DRIVERS=rxe")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		exit = ee.ExitCode()
	case err != nil:
		t.Fatalf("run %s: %v", ref, err)
	}
	return out.String(), exit, errb.String()
}

// record writes the reference outputs of ibv_devinfo and -v, and the
// attributes ibinfo reads, as a fixture.
func record(t *testing.T, ref, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		file string
		args []string
	}{{"devinfo.txt", nil}, {"devinfo-v.txt", []string{"-v"}}} {
		out, exit, _ := runReference(t, ref, r.args)
		if exit != 0 {
			t.Fatalf("ibv_devinfo %v: exit %d", r.args, exit)
		}
		if err := os.WriteFile(filepath.Join(dir, r.file), []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var fix bytes.Buffer
	fmt.Fprintf(&fix, "# Recorded by TestDifferentialVM on kernel %s (%s), GOVERBS_TRANSPORT=%q.\n",
		vmenv.KernelName(), vmenv.KernelRelease(), os.Getenv("GOVERBS_TRANSPORT"))
	sys := newRealSystem()
	devs, _, err := sys.Devices()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range devs {
		dev, err := sys.Open(h)
		if err != nil {
			t.Fatal(err)
		}
		if err := writeFixtureDevice(&fix, h, dev); err != nil {
			t.Fatal(err)
		}
		dev.Close()
	}
	if err := os.WriteFile(filepath.Join(dir, "devices.fix"), fix.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded into %s", dir)
}

// writeFixtureDevice writes what ibinfo reads of a device in the fixture
// format of testdata/cref/mockverbs.c.
func writeFixtureDevice(w io.Writer, h hca, dev device) error {
	fmt.Fprintf(w, "device %s\nnode_type %d\n", h.name, h.nodeType)
	if h.boardID != nil {
		if len(h.boardID) == 0 {
			fmt.Fprintf(w, "board_id -\n")
		} else {
			fmt.Fprintf(w, "board_id %s\n", hex.EncodeToString(h.boardID))
		}
	}
	fmt.Fprintf(w, "num_comp_vectors %d\n", dev.NumCompVectors())
	attr, err := dev.QueryDevice()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "attr fw_ver %s\n", attr.FWVer)
	for _, f := range deviceAttrFields(&attr) {
		fmt.Fprintf(w, "attr %s %#x\n", f.name, f.get())
	}
	for port := 1; port <= int(attr.PhysPortCnt); port++ {
		pa, err := dev.QueryPort(uint8(port))
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "port %d\n", port)
		for _, f := range portAttrFields(&pa) {
			fmt.Fprintf(w, "pattr %s %#x\n", f.name, f.get())
		}
		for i := 0; i < int(int32(pa.GIDTblLen)); i++ {
			e, err := dev.QueryGID(uint8(port), i)
			if errors.Is(err, uverbs.ErrNoGID) {
				continue
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "gid %d %d %s %d\n", port, i, hex.EncodeToString(e.GID[:]), e.Type)
		}
	}
	return nil
}

// TestDifferentialVMNoCharDev removes rxe0's /dev/infiniband node in the
// VM: rdma-core then leaves the device out of its list, and so must
// ibinfo, which also says why on stderr.
func TestDifferentialVMNoCharDev(t *testing.T) {
	if !vmenv.InVM() {
		t.Skip("not in the goverbs test VM (GOVERBS_VM unset)")
	}
	vmenv.RequireDevice(t, vmenv.RXE0)
	ref, err := exec.LookPath("ibv_devinfo")
	if err != nil {
		t.Fatal(err)
	}
	d, err := newRealSystem().(*realSystem).fs.Device(vmenv.RXE0)
	if err != nil {
		t.Fatal(err)
	}
	node := d.Uverbs.CharDev
	if err := os.Rename(node, node+".hidden"); err != nil {
		t.Fatal(err)
	}
	defer os.Rename(node+".hidden", node)
	for _, args := range [][]string{{}, {"-l"}, {"-d", "rxe0"}, {"-d", "rxe1"}} {
		want, wantExit, _ := runReference(t, ref, args)
		var got, gotErr bytes.Buffer
		gotExit := run(append([]string{"ibv_devinfo"}, args...), &got, &gotErr, environment{sys: newRealSystem()})
		if diff := cmp.Diff(want, got.String()); diff != "" || gotExit != wantExit {
			t.Errorf("%q: exit %d, ibv_devinfo %d; stdout (-ibv_devinfo +ibinfo):\n%s", args, gotExit, wantExit, diff)
		}
		if len(args) == 2 && args[1] == "rxe0" && !strings.Contains(gotErr.String(), "rxe0 is present but not usable") {
			t.Errorf("%q: stderr does not say why rxe0 is unusable: %q", args, gotErr.String())
		}
		t.Logf("%q: ibinfo stderr: %s", args, gotErr.String())
	}
}

// TestDifferentialNoRDMA compares ibinfo with an installed ibv_devinfo on
// a machine without the RDMA subsystem (no /sys/class/infiniband): both
// fail to list devices, and usage errors behave the same.
func TestDifferentialNoRDMA(t *testing.T) {
	if _, err := os.Stat("/sys/class/infiniband"); err == nil {
		t.Skip("this machine has the RDMA subsystem loaded")
	}
	ref, err := exec.LookPath("ibv_devinfo")
	if err != nil {
		t.Skip("no ibv_devinfo installed to compare with")
	}
	for _, args := range [][]string{{}, {"-v"}, {"-l"}, {"-d", "rxe0"}, {"-x"}, {"-i", "0"}, {"--ib"}} {
		want, wantExit, _ := runReference(t, ref, args)
		var got, gotErr bytes.Buffer
		gotExit := run(append([]string{"ibv_devinfo"}, args...), &got, &gotErr, environment{sys: newRealSystem()})
		if diff := cmp.Diff(want, got.String()); diff != "" || gotExit != wantExit {
			t.Errorf("%q: exit %d, ibv_devinfo %d; stdout (-ibv_devinfo +ibinfo):\n%s", args, gotExit, wantExit, diff)
		}
		if len(args) == 0 && !strings.Contains(gotErr.String(), "RDMA modules are not loaded") {
			t.Errorf("stderr does not explain: %q", gotErr.String())
		}
	}
}
