package sysfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
)

// Names of the InfiniBand port counters in ports/N/counters (the kernel's
// sysfs.c, from the PMA PortCounters and PortCountersExtended attributes).
// They are the same for every driver that has the directory, so programs
// can rely on them; the data counters count 32-bit words, not bytes (see
// ibv_devinfo's and perfquery's conventions).
const (
	CounterSymbolError          = "symbol_error"
	CounterLinkErrorRecovery    = "link_error_recovery"
	CounterLinkDowned           = "link_downed"
	CounterPortRcvErrors        = "port_rcv_errors"
	CounterPortRcvRemotePhysErr = "port_rcv_remote_physical_errors"
	CounterPortRcvSwitchRelay   = "port_rcv_switch_relay_errors"
	CounterPortXmitDiscards     = "port_xmit_discards"
	CounterPortXmitConstraint   = "port_xmit_constraint_errors"
	CounterPortRcvConstraint    = "port_rcv_constraint_errors"
	CounterLocalLinkIntegrity   = "local_link_integrity_errors"
	CounterExcessiveBufOverrun  = "excessive_buffer_overrun_errors"
	CounterVL15Dropped          = "VL15_dropped"
	CounterPortXmitData         = "port_xmit_data"
	CounterPortRcvData          = "port_rcv_data"
	CounterPortXmitPackets      = "port_xmit_packets"
	CounterPortRcvPackets       = "port_rcv_packets"
	CounterPortXmitWait         = "port_xmit_wait"
	CounterUnicastXmitPackets   = "unicast_xmit_packets"
	CounterUnicastRcvPackets    = "unicast_rcv_packets"
	CounterMulticastXmitPackets = "multicast_xmit_packets"
	CounterMulticastRcvPackets  = "multicast_rcv_packets"
)

// PortCounters are the counters of one port in sysfs.
type PortCounters struct {
	// IB is ports/N/counters by file name (the Counter* names above); nil
	// when the driver has no such directory (rxe, most RoCE drivers
	// without a PMA).
	IB map[string]uint64
	// HW is ports/N/hw_counters: the driver's own counters, named as the
	// driver names them (rxe: sent_pkts, rcvd_pkts, ...; the same names
	// rdma statistic shows). The lifespan file, a setting rather than a
	// counter, is left out. nil when the directory is absent.
	HW map[string]uint64
}

// PortCounters reads the counters of one port of the device called name.
// A name that is not an RDMA device gives an error matching ErrNoDevice, a
// port it does not have one matching fs.ErrNotExist.
func (f *FS) PortCounters(name string, port int) (PortCounters, error) {
	if err := f.checkDevice(name); err != nil {
		return PortCounters{}, err
	}
	pdir := path.Join(ibClassDir, name, "ports", strconv.Itoa(port))
	if _, err := fs.Stat(f.fsys, pdir); err != nil {
		return PortCounters{}, fmt.Errorf("sysfs: %s port %d: %w", name, port, err)
	}
	var pc PortCounters
	var err error
	if pc.IB, err = f.readCounterDir(path.Join(pdir, "counters")); err != nil {
		return PortCounters{}, err
	}
	if pc.HW, err = f.readCounterDir(path.Join(pdir, "hw_counters")); err != nil {
		return PortCounters{}, err
	}
	return pc, nil
}

// readCounterDir reads every counter file of dir; a missing dir gives nil.
func (f *FS) readCounterDir(dir string) (map[string]uint64, error) {
	ents, err := fs.ReadDir(f.fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make(map[string]uint64, len(ents))
	for _, e := range ents {
		if e.IsDir() || e.Name() == "lifespan" {
			continue
		}
		v, err := readParsed(f, path.Join(dir, e.Name()), decParser(64, "a decimal counter"))
		if err != nil {
			return nil, err
		}
		out[e.Name()] = v
	}
	return out, nil
}
