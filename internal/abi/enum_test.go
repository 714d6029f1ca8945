package abi_test

import (
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// TestUCMEnumsOffline checks the connection manager's event and port-space
// numbers against the enums of the rdma_ucm module's BTF on 6.1 and 6.12.
func TestUCMEnumsOffline(t *testing.T) {
	want := map[string]map[string]uint64{
		"rdma_cm_event_type": {
			"RDMA_CM_EVENT_ADDR_RESOLVED": abi.CMEventAddrResolved, "RDMA_CM_EVENT_ADDR_ERROR": abi.CMEventAddrError,
			"RDMA_CM_EVENT_ROUTE_RESOLVED": abi.CMEventRouteResolved, "RDMA_CM_EVENT_ROUTE_ERROR": abi.CMEventRouteError,
			"RDMA_CM_EVENT_CONNECT_REQUEST": abi.CMEventConnectRequest, "RDMA_CM_EVENT_CONNECT_RESPONSE": abi.CMEventConnectResponse,
			"RDMA_CM_EVENT_CONNECT_ERROR": abi.CMEventConnectError, "RDMA_CM_EVENT_UNREACHABLE": abi.CMEventUnreachable,
			"RDMA_CM_EVENT_REJECTED": abi.CMEventRejected, "RDMA_CM_EVENT_ESTABLISHED": abi.CMEventEstablished,
			"RDMA_CM_EVENT_DISCONNECTED": abi.CMEventDisconnected, "RDMA_CM_EVENT_DEVICE_REMOVAL": abi.CMEventDeviceRemoval,
			"RDMA_CM_EVENT_MULTICAST_JOIN": abi.CMEventMulticastJoin, "RDMA_CM_EVENT_MULTICAST_ERROR": abi.CMEventMulticastError,
			"RDMA_CM_EVENT_ADDR_CHANGE": abi.CMEventAddrChange, "RDMA_CM_EVENT_TIMEWAIT_EXIT": abi.CMEventTimewaitExit,
		},
		"rdma_ucm_port_space": {
			"RDMA_PS_IPOIB": abi.RDMAPSIPoIB, "RDMA_PS_IB": abi.RDMAPSIB, "RDMA_PS_TCP": abi.RDMAPSTCP, "RDMA_PS_UDP": abi.RDMAPSUDP,
		},
	}
	checkEnumsOffline(t, "rdma_ucm", want)
}

// TestCoreEnumsOffline checks the GID type numbers against ib_core's enum
// ib_gid_type on 6.1 and 6.12: the kernel hands that enum's value out
// unchanged as ib_uverbs_gid_entry.gid_type.
func TestCoreEnumsOffline(t *testing.T) {
	checkEnumsOffline(t, "ib_core", map[string]map[string]uint64{
		"ib_gid_type": gidTypeEnum,
	})
}

// gidTypeEnum is enum ib_gid_type as Go mirrors it.
var gidTypeEnum = map[string]uint64{
	"IB_GID_TYPE_IB":             abi.GIDTypeIB,
	"IB_GID_TYPE_ROCE":           abi.GIDTypeRoCEv1,
	"IB_GID_TYPE_ROCE_UDP_ENCAP": abi.GIDTypeRoCEv2,
	"IB_GID_TYPE_SIZE":           3, // the count of types, not a type
}

// checkEnumsOffline checks that each enum of module's BTF has exactly the
// values of want, on every offline kernel.
func checkEnumsOffline(t *testing.T, module string, want map[string]map[string]uint64) {
	t.Helper()
	for _, kernel := range offlineKernels {
		checkEnums(t, kernel, []*btf.Spec{loadOffline(t, kernel, module)}, want)
	}
}

// checkEnums checks that each enum of the specs (the first that has it)
// has exactly the values of want.
func checkEnums(t *testing.T, kernel string, specs []*btf.Spec, want map[string]map[string]uint64) {
	t.Helper()
	for name, values := range want {
		var e *btf.Enum
		var err error
		for _, spec := range specs {
			if err = spec.TypeByName(name, &e); err == nil {
				break
			}
		}
		if err != nil {
			t.Errorf("%s: enum %s: %v", kernel, name, err)
			continue
		}
		got := make(map[string]uint64)
		for _, v := range e.Values {
			got[v.Name] = v.Value
		}
		for n, w := range values {
			if g, ok := got[n]; !ok || g != w {
				t.Errorf("%s: %s.%s = %d (present %v), Go has %d", kernel, name, n, g, ok, w)
			}
		}
		if len(got) != len(values) {
			t.Errorf("%s: %s has %d values, Go mirrors %d: %v", kernel, name, len(got), len(values), got)
		}
	}
}

// TestCoreEnumsLive checks the port state, physical state and link layer
// numbers against the running kernel's ib_core, whose full BTF has the
// enums (the trimmed offline BTF keeps only what the ABI's structs reach,
// and they carry these as u8).
func TestCoreEnumsLive(t *testing.T) {
	if !vmenv.InVM() {
		t.Skip(`not in the goverbs test VM (GOVERBS_VM unset): go test -exec "$PWD/bin/vmexec -kernel 6.1" ./internal/abi/`)
	}
	// An enum that code built into the kernel also uses is in vmlinux's
	// BTF, not repeated in the module's.
	cache := btf.NewCache()
	core, err := cache.Module("ib_core")
	if err != nil {
		t.Fatalf("BTF of ib_core: %v", err)
	}
	vmlinux, err := cache.Kernel()
	if err != nil {
		t.Fatalf("BTF of vmlinux: %v", err)
	}
	checkEnums(t, vmenv.KernelName(), []*btf.Spec{core, vmlinux}, map[string]map[string]uint64{
		"ib_port_state": {
			"IB_PORT_NOP": abi.PortNOP, "IB_PORT_DOWN": abi.PortDown, "IB_PORT_INIT": abi.PortInit,
			"IB_PORT_ARMED": abi.PortArmed, "IB_PORT_ACTIVE": abi.PortActive, "IB_PORT_ACTIVE_DEFER": abi.PortActiveDefer,
		},
		"ib_port_phys_state": {
			"IB_PORT_PHYS_STATE_SLEEP":                       abi.PhysSleep,
			"IB_PORT_PHYS_STATE_POLLING":                     abi.PhysPolling,
			"IB_PORT_PHYS_STATE_DISABLED":                    abi.PhysDisabled,
			"IB_PORT_PHYS_STATE_PORT_CONFIGURATION_TRAINING": abi.PhysPortConfigurationTraining,
			"IB_PORT_PHYS_STATE_LINK_UP":                     abi.PhysLinkUp,
			"IB_PORT_PHYS_STATE_LINK_ERROR_RECOVERY":         abi.PhysLinkErrorRecovery,
			"IB_PORT_PHYS_STATE_PHY_TEST":                    abi.PhysPhyTest,
		},
		"rdma_link_layer": {
			"IB_LINK_LAYER_UNSPECIFIED": abi.LinkLayerUnspecified, "IB_LINK_LAYER_INFINIBAND": abi.LinkLayerInfiniBand,
			"IB_LINK_LAYER_ETHERNET": abi.LinkLayerEthernet,
		},
		"ib_gid_type": gidTypeEnum,
	})
}
