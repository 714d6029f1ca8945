package vmenv

import (
	"os/exec"
	"strings"
	"testing"
)

// ipTool is iproute2's ip in the guest (busybox's applet has no rule
// command).
const ipTool = "/usr/sbin/ip"

// crossRouteTable is the routing table RouteAcross fills.
const crossRouteTable = "100"

// RouteAcross makes the connection manager reach AddrA from rxe1 across
// the veth pair, for programs that cannot choose their source address
// (perftest's -R client resolves AddrA with no source, and the kernel
// answers an address of its own through the loopback device, so rdma_cm
// puts both ends on rxe0).
//
// It moves the local routing table's rule behind a rule for locally
// generated packets to AddrA, which leave through vb with source AddrB;
// packets arriving on va still find AddrA local. Cleanup restores the
// rules. The test must not run in parallel with other VM tests.
func RouteAcross(t testing.TB) {
	t.Helper()
	RequireDevice(t, RXE0)
	RequireDevice(t, RXE1)
	ip := func(args ...string) error {
		out, err := exec.Command(ipTool, args...).CombinedOutput()
		if err != nil {
			t.Logf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return err
	}
	steps := [][]string{
		{"rule", "add", "pref", "100", "lookup", "local"},
		{"rule", "del", "pref", "0", "lookup", "local"},
		{"route", "add", AddrA, "dev", NetdevB, "src", AddrB, "table", crossRouteTable},
		{"rule", "add", "pref", "10", "iif", "lo", "to", AddrA, "lookup", crossRouteTable},
	}
	undo := [][]string{
		{"rule", "add", "pref", "0", "lookup", "local"},
		{"rule", "del", "pref", "100", "lookup", "local"},
		{"route", "flush", "table", crossRouteTable},
		{"rule", "del", "pref", "10"},
	}
	for i, args := range steps {
		if err := ip(args...); err != nil {
			// Undo what was done, in reverse, before failing.
			for j := i - 1; j >= 0; j-- {
				_ = ip(undo[j]...)
			}
			t.Fatalf("RouteAcross: ip %s: %v", strings.Join(args, " "), err)
		}
	}
	t.Cleanup(func() {
		// The local rule first, so the host is never without it; then
		// the rest, each tried even if one before failed.
		failed := false
		for _, args := range [][]string{undo[0], undo[3], undo[2], undo[1]} {
			if ip(args...) != nil {
				failed = true
			}
		}
		if failed {
			t.Error("RouteAcross: restoring the routing rules failed")
		}
	})
	out, err := exec.Command(ipTool, "route", "get", AddrA).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "dev "+NetdevB) {
		t.Fatalf("RouteAcross: route to %s is %q (%v), want it through %s", AddrA, out, err, NetdevB)
	}
}
