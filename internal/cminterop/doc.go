// Package cminterop holds the tests that run goverbs' rdmacm against
// librdmacm's example programs inside the test VM: Go peers written with
// rdmacm for ucmatose (RC, several connections, messages both ways),
// udaddy (UD through SIDR, replies addressed from the received header)
// and mckey (multicast, Go sender and Go receiver), each in both roles;
// and the connection setup benchmark, Dial+Accept of 100 connections
// against librdmacm doing the same (testdata/cmrate, built by the host's
// C compiler: make cmrate).
//
// Run them in the VM:
//
//	go test -exec "$PWD/bin/vmexec -kernel 6.12" -run Interop -v ./internal/cminterop/
//	make cmrate
package cminterop
