package rdmanl

import (
	"errors"
	"fmt"

	"github.com/goverbs/goverbs/sysfs"
)

// HWCounters reads a port's counters from sysfs: the InfiniBand port
// counters (ports/N/counters, with the stable names sysfs.Counter*) and the
// driver's hardware counters (ports/N/hw_counters: on rxe the same 15 names
// as PortCounters gives over netlink). It sees only the caller's mount
// namespace's /sys; a device sysfs does not know gives ErrNotFound.
func HWCounters(device string, port int) (sysfs.PortCounters, error) {
	pc, err := sysfs.New("/").PortCounters(device, port)
	if errors.Is(err, sysfs.ErrNoDevice) {
		return pc, fmt.Errorf("rdmanl: hardware counters of %q: %w (%w)", device, ErrNotFound, err)
	}
	return pc, err
}
