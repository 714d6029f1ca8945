package rdmanl

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// TestVMLive asks the VM's kernel (two rxe devices) what rdma-core asks.
func TestVMLive(t *testing.T) {
	if !vmenv.InVM() {
		t.Skip(`needs the goverbs test VM (GOVERBS_VM unset): go test -exec "$PWD/bin/vmexec -kernel 6.1" ./internal/rdmanl/`)
	}
	devs, err := Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 2 || devs[0].Name != vmenv.RXE0 || devs[1].Name != vmenv.RXE1 || devs[0].Index >= devs[1].Index {
		t.Fatalf("devices %+v, want rxe0 and rxe1 in index order", devs)
	}
	for _, d := range devs {
		id, err := DriverID(d.Name)
		if err != nil || id != 14 {
			t.Errorf("DriverID(%s) = %d, %v; want 14 (RDMA_DRIVER_RXE)", d.Name, id, err)
		}
		if d.NodeType != 1 || d.Ports != 1 || d.NodeGUID == 0 || d.Protocol != "roce" {
			t.Errorf("device %+v", d)
		}
	}
	if _, err := DriverID("nosuchdev"); !errors.Is(err, ErrNotFound) {
		t.Errorf("DriverID(nosuchdev): err = %v, want ErrNotFound", err)
	}
	c, err := Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CharDev(1<<20, "uverbs"); !errors.Is(err, unix.EINVAL) {
		t.Errorf("CharDev of a missing index: err = %v, want EINVAL", err)
	}
	// The connection stays usable after an error.
	if _, err := c.CharDev(devs[0].Index, "uverbs"); err != nil {
		t.Errorf("CharDev after an error: %v", err)
	}
	cof, err := CopyOnFork()
	if err != nil || !cof {
		t.Errorf("CopyOnFork() = %v, %v; want true (5.13+ kernels)", cof, err)
	}
}
