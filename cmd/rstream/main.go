// Command rstream is rdma-core's rstream (librdmacm's rsocket stream test)
// in Go, over package rsocket: either side may be the C tool.
//
//	rstream -b 10.99.0.1 -T b            # server: serves one client run
//	rstream -s 10.99.0.1 -T b            # client
//	rstream -s 10.99.0.1 -S 4096 -C 100 -I 10 -T b -T v
//
// Options (rstream's): -s server address (client mode), -b bind address
// (a client's source too, under -T s as well), -B buffer size (rings of
// twice it, as SO_SNDBUF/SO_RCVBUF; 0 the default 1<<19, under 2048 taken
// as 2048), -i inline size of the latency tests, -I iterations, -C
// transfers, -S size|all, -p port (7471), -T s (kernel TCP instead), -T b
// / -T n (blocking or not: Go's calls always block, so both run the
// same), -T v (verify the data pattern), -T a / -T r (accepted, no
// effect), -f ip|ipv6 (numeric addresses only; gid refused), -k seconds
// (keepalive on the listener and each connection, printed as rstream
// does; 0 off: rsocket.Config.KeepAlive, TCP keepalive under -T s). -T
// takes rstream's long names too, in any case (sockets, blocking,
// nonblocking, async, resolve, verify). -T f (fork server processing) is
// refused: Go cannot fork.
//
// The output is rstream's table: name, bytes, xfers, iters, total, time,
// Gb/sec (both directions) and usec/xfer (one way).
package main

import (
	"io"
	"os"

	"github.com/goverbs/goverbs/internal/streamtool"
)

func main() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	return streamtool.Run(streamtool.RStream, args, stdout, stderr)
}
