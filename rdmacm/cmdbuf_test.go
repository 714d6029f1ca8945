package rdmacm

import (
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/internal/abi"
)

// TestCmdBufFits: every ucma request goes out of a pooled cmdBuf and every
// response writeResp reads comes back in one, with no allocation: none is
// larger than the buffer (a larger one would still work, allocated).
func TestCmdBufFits(t *testing.T) {
	var c cmdBuf
	for name, size := range map[string]uintptr{
		"UCMAccept": unsafe.Sizeof(abi.UCMAccept{}), "UCMBind": unsafe.Sizeof(abi.UCMBind{}),
		"UCMConnect": unsafe.Sizeof(abi.UCMConnect{}), "UCMCreateID": unsafe.Sizeof(abi.UCMCreateID{}),
		"UCMDestroyID": unsafe.Sizeof(abi.UCMDestroyID{}), "UCMDisconnect": unsafe.Sizeof(abi.UCMDisconnect{}),
		"UCMInitQPAttr": unsafe.Sizeof(abi.UCMInitQPAttr{}), "UCMJoinMcast": unsafe.Sizeof(abi.UCMJoinMcast{}),
		"UCMListen": unsafe.Sizeof(abi.UCMListen{}), "UCMMigrateID": unsafe.Sizeof(abi.UCMMigrateID{}),
		"UCMNotify": unsafe.Sizeof(abi.UCMNotify{}), "UCMQuery": unsafe.Sizeof(abi.UCMQuery{}),
		"UCMReject": unsafe.Sizeof(abi.UCMReject{}), "UCMResolveAddr": unsafe.Sizeof(abi.UCMResolveAddr{}),
		"UCMResolveRoute": unsafe.Sizeof(abi.UCMResolveRoute{}), "UCMSetOption": unsafe.Sizeof(abi.UCMSetOption{}),
	} {
		if 8+size > uintptr(len(c.buf)) {
			t.Errorf("request %s: 8 + %d bytes, the buffer has %d", name, size, len(c.buf))
		}
	}
	for name, size := range map[string]uintptr{
		"QPAttr": unsafe.Sizeof(abi.QPAttr{}), "UCMCreateIDResp": unsafe.Sizeof(abi.UCMCreateIDResp{}),
		"UCMDestroyIDResp": unsafe.Sizeof(abi.UCMDestroyIDResp{}), "UCMQueryAddrResp": unsafe.Sizeof(abi.UCMQueryAddrResp{}),
		"UCMQueryRouteResp": unsafe.Sizeof(abi.UCMQueryRouteResp{}),
	} {
		if size > unsafe.Sizeof(c.resp) {
			t.Errorf("response %s: %d bytes, the buffer has %d", name, size, unsafe.Sizeof(c.resp))
		}
	}
}

// TestQuickCmd: the commands that can wait go by Syscall, every other by
// RawSyscall.
func TestQuickCmd(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cmd   uint32
		quick bool
	}{
		{"CREATE_ID", abi.UCMCmdCreateID, true},
		{"DESTROY_ID", abi.UCMCmdDestroyID, false},
		{"RESOLVE_ADDR", abi.UCMCmdResolveAddr, true},
		{"RESOLVE_ROUTE", abi.UCMCmdResolveRoute, true},
		{"CONNECT", abi.UCMCmdConnect, true},
		{"ACCEPT", abi.UCMCmdAccept, true},
		{"DISCONNECT", abi.UCMCmdDisconnect, true},
		{"INIT_QP_ATTR", abi.UCMCmdInitQPAttr, true},
		{"GET_EVENT", abi.UCMCmdGetEvent, true},
		{"JOIN_MCAST", abi.UCMCmdJoinMcast, true},
		{"LEAVE_MCAST", abi.UCMCmdLeaveMcast, false},
		{"MIGRATE_ID", abi.UCMCmdMigrateID, false},
	} {
		if got := quickCmd(tc.cmd); got != tc.quick {
			t.Errorf("quickCmd(%s) = %v, want %v", tc.name, got, tc.quick)
		}
	}
}
