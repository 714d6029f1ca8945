package abi_test

import (
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/goverbs/goverbs/internal/abi"
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
	for _, kernel := range offlineKernels {
		spec := loadOffline(t, kernel, "rdma_ucm")
		for name, values := range want {
			var e *btf.Enum
			if err := spec.TypeByName(name, &e); err != nil {
				t.Fatalf("%s: enum %s: %v", kernel, name, err)
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
}
