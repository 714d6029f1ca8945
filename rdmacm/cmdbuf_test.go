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
