package rdmanl

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"github.com/goverbs/goverbs/sysfs"
	"github.com/goverbs/goverbs/uverbs"
)

// JSON: every result type marshals to the object iproute2's rdma -j
// prints for it (Debian 12's iproute2 6.1: rdma -j dev, link, res, res
// show qp|cq|mr|pd|cm_id, statistic, statistic qp), key for key, so
// programs that parsed rdma's output read the same JSON. The VM tests
// compare the two field by field.

type jsonObj = map[string]any

func marshal(o jsonObj) ([]byte, error) { return json.Marshal(o) }

// MarshalJSON gives rdma -j dev's object.
func (d Device) MarshalJSON() ([]byte, error) { return marshal(deviceJSON(d)) }

// MarshalJSON gives rdma -j link's object.
func (p Port) MarshalJSON() ([]byte, error) { return marshal(portJSON(p)) }

// MarshalJSON gives rdma -j res's object.
func (s Summary) MarshalJSON() ([]byte, error) { return marshal(summaryJSON(s)) }

// MarshalJSON gives rdma -j res show qp's object.
func (q QP) MarshalJSON() ([]byte, error) { return marshal(qpJSON(q)) }

// MarshalJSON gives rdma -j res show cq's object.
func (q CQ) MarshalJSON() ([]byte, error) { return marshal(cqJSON(q)) }

// MarshalJSON gives rdma -j res show mr's object.
func (m MR) MarshalJSON() ([]byte, error) { return marshal(mrJSON(m)) }

// MarshalJSON gives rdma -j res show pd's object.
func (p PD) MarshalJSON() ([]byte, error) { return marshal(pdJSON(p)) }

// MarshalJSON gives rdma -j res show cm_id's object.
func (m CMID) MarshalJSON() ([]byte, error) { return marshal(cmidJSON(m)) }

// MarshalJSON gives rdma -j res show ctx's object.
func (x Ctx) MarshalJSON() ([]byte, error) {
	o := jsonObj{"ifindex": num(x.DevIndex), "ifname": x.DevName, "ctxn": num(x.CtxN)}
	ownerJSON(o, x.Owner)
	return marshal(o)
}

// MarshalJSON gives rdma -j statistic's object for one port.
func (p PortCounters) MarshalJSON() ([]byte, error) { return marshal(countersJSON(p)) }

// MarshalJSON gives rdma -j statistic qp show's object.
func (q QPCounter) MarshalJSON() ([]byte, error) { return marshal(qpCounterJSON(q)) }

func num[T ~uint8 | ~uint32 | ~uint64 | ~int](v T) float64 { return float64(v) }

// nodeTypeJSON is iproute2's node_type2str.
func nodeTypeJSON(t sysfs.NodeType) string {
	names := map[sysfs.NodeType]string{sysfs.NodeCA: "ca", sysfs.NodeSwitch: "switch", sysfs.NodeRouter: "router",
		sysfs.NodeRNIC: "rnic", sysfs.NodeUSNIC: "usnic", sysfs.NodeUSNICUDP: "usnic_udp", sysfs.NodeUnspecified: "unspecified"}
	if n, ok := names[t]; ok {
		return n
	}
	return "unknown"
}

func deviceJSON(d Device) jsonObj {
	o := jsonObj{"ifindex": num(d.Index), "ifname": d.Name, "node_type": nodeTypeJSON(d.NodeType),
		"node_guid": d.NodeGUID.String(), "sys_image_guid": d.SysImageGUID.String()}
	if d.FWVersion != "" {
		o["fw"] = d.FWVersion
	}
	return o
}

// nameOf names value i from iproute2's table, "UNKNOWN" past its end, as
// iproute2 does.
func nameOf(names []string, i int) string {
	if i >= 0 && i < len(names) {
		return names[i]
	}
	return "UNKNOWN"
}

func portJSON(p Port) jsonObj {
	o := jsonObj{"ifindex": num(p.DevIndex), "ifname": p.DevName, "port": num(p.Port),
		"state": p.State.String(), "physical_state": p.PhysState.RDMALinkName()}
	if p.Netdev != "" {
		o["netdev"], o["netdev_index"] = p.Netdev, num(p.NetdevIndex)
	}
	return o
}

func summaryJSON(s Summary) jsonObj {
	o := jsonObj{"ifindex": num(s.DevIndex), "ifname": s.DevName}
	for k, v := range s.Counts {
		o[k] = num(v)
	}
	return o
}

// ownerJSON writes what rdma's JSON writes of an owner: pid and comm for a
// process, comm for the kernel, neither where the kernel named none.
func ownerJSON(o jsonObj, w Owner) {
	switch {
	case w.Kernel:
		o["comm"] = w.Comm
	case w.PID != 0:
		o["pid"] = num(w.PID)
		o["comm"] = w.Comm
	}
}

var pathMigJSON = []string{"MIGRATED", "REARM", "ARMED"}

func qpJSON(q QP) jsonObj {
	o := jsonObj{"ifindex": num(q.DevIndex), "ifname": q.DevName, "lqpn": num(q.LQPN), "type": q.Type.String(),
		"state": q.State.String(), "sq-psn": num(q.SQPSN)}
	if q.Port != 0 {
		o["port"] = num(q.Port)
	}
	switch q.Type {
	case uverbs.QPTypeRC, uverbs.QPTypeUC:
		o["rqpn"], o["rq-psn"] = num(q.RQPN), num(q.RQPSN)
		o["path-mig-state"] = nameOf(pathMigJSON, int(q.PathMigState))
	case uverbs.QPTypeXRCSend, uverbs.QPTypeXRCRecv:
		o["path-mig-state"] = nameOf(pathMigJSON, int(q.PathMigState))
	}
	if !q.Owner.Kernel {
		o["pdn"] = num(q.PDN)
	}
	ownerJSON(o, q.Owner)
	return o
}

var pollCtxJSON = []string{"DIRECT", "SOFTIRQ", "WORKQUEUE", "UNBOUND_WORKQUEUE"}

func cqJSON(q CQ) jsonObj {
	o := jsonObj{"ifindex": num(q.DevIndex), "ifname": q.DevName, "cqn": num(q.CQN), "cqe": num(q.CQE),
		"users": num(q.Users), "adaptive-moderation": q.AdaptiveModeration}
	if q.HavePollCtx {
		o["poll-ctx"] = nameOf(pollCtxJSON, int(q.PollCtx))
	}
	if !q.Owner.Kernel {
		o["ctxn"] = num(q.CtxN)
	}
	ownerJSON(o, q.Owner)
	return o
}

func hex[T ~uint32 | ~uint64](v T) string { return fmt.Sprintf("%x", uint64(v)) }

func mrJSON(m MR) jsonObj {
	o := jsonObj{"ifindex": num(m.DevIndex), "ifname": m.DevName, "mrn": num(m.MRN), "rkey": hex(m.RKey),
		"lkey": hex(m.LKey), "mrlen": num(m.Length), "pdn": num(m.PDN)}
	if m.IOVA != 0 {
		o["iova"] = hex(m.IOVA)
	}
	ownerJSON(o, m.Owner)
	return o
}

func pdJSON(p PD) jsonObj {
	o := jsonObj{"ifindex": num(p.DevIndex), "ifname": p.DevName, "pdn": num(p.PDN),
		"local_dma_lkey": hex(p.LocalDMALKey), "users": num(p.Users)}
	if p.HaveUnsafeGlobalRKey {
		o["unsafe_global_rkey"] = hex(p.UnsafeGlobalRKey)
	}
	if !p.Owner.Kernel {
		o["ctxn"] = num(p.CtxN)
	}
	ownerJSON(o, p.Owner)
	return o
}

func addrJSON(a netip.AddrPort) string {
	if !a.IsValid() {
		return ""
	}
	return fmt.Sprintf("%s:%d", a.Addr().Unmap(), a.Port())
}

func cmidJSON(m CMID) jsonObj {
	o := jsonObj{"ifindex": num(m.DevIndex), "ifname": m.DevName, "cm-idn": num(m.CMIDN),
		"state": m.State.String(), "ps": m.PS.String()}
	if m.Port != 0 {
		o["port"] = num(m.Port)
	}
	if m.HaveQP {
		o["lqpn"], o["qp-type"] = num(m.LQPN), m.QPType.String()
	}
	if s := addrJSON(m.Src); s != "" {
		o["src-addr"] = s
	}
	if s := addrJSON(m.Dst); s != "" {
		o["dst-addr"] = s
	}
	ownerJSON(o, m.Owner)
	return o
}

func countersJSON(p PortCounters) jsonObj {
	o := jsonObj{"ifname": p.DevName, "port": num(p.Port)}
	for _, c := range p.Counters {
		o[c.Name] = num(c.Value)
	}
	return o
}

// String is what rdma system prints ("netns shared copy-on-fork on";
// Debian's rdma 6.1 prints it for rdma -j system too).
func (s System) String() string {
	cof := "off"
	if s.CopyOnFork {
		cof = "on"
	}
	return strings.TrimSpace(fmt.Sprintf("netns %s copy-on-fork %s", s.NetnsMode, cof))
}

// CounterModeString is the mode text of rdma statistic qp mode ("qp auto
// type on", "qp auto off").
func CounterModeString(mode CounterMode, mask CounterMask) string {
	if mode != CounterModeAuto || mask == 0 {
		return "qp auto off"
	}
	var on []string
	if mask&CounterByQPType != 0 {
		on = append(on, "type")
	}
	if mask&CounterByPID != 0 {
		on = append(on, "pid")
	}
	return "qp auto " + strings.Join(on, ",") + " on"
}

func qpCounterJSON(q QPCounter) jsonObj {
	o := jsonObj{"ifindex": num(q.DevIndex), "ifname": q.DevName, "port": num(q.Port), "cntn": num(q.ID)}
	if q.HaveQPType {
		o["qp-type"] = q.QPType.String()
	}
	ownerJSON(o, q.Owner)
	for _, c := range q.Counters {
		o[c.Name] = num(c.Value)
	}
	lqpn := []any{}
	for _, n := range q.LQPNs {
		lqpn = append(lqpn, num(n))
	}
	o["lqpn"] = lqpn
	return o
}
