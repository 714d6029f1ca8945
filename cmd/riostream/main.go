// Command riostream is rdma-core's riostream (librdmacm's rsocket iomap
// test) in Go, over package rsocket: either side may be the C tool.
//
//	riostream -b 10.99.0.1 -T b          # server: serves one client run
//	riostream -s 10.99.0.1 -T b          # client
//	riostream -s 10.99.0.1 -S 4096 -C 100 -I 10 -T b -T v
//
// Each side maps its buffer for the peer (rsocket.Conn.MapIO, riomap with
// one slot offered, as riostream's RDMA_IOMAPSIZE of 1) and each transfer
// is a WriteIO (riowrite) of the whole buffer into the peer's; the
// receiver of a transfer waits for the buffer's last byte to take the
// marker the sender put there, as riostream spins on it. Between tests a
// 16-byte message each way carries the mappings.
//
// On rxe that marker can come before the rest of its packet (rxe copies a
// packet's payload with the kernel's memcpy, backwards at times: read from
// the kernel's code, and it fits the failures seen, each at the first
// byte of a transfer), so -T v
// can fail now and then where the transfer's last packet carries 32 bytes
// or more, for rdma-core's riostream as for this one; when rdma-core's
// riostream fails a test it then hangs in rclose (librdmacm's rs_free
// removes the socket before rs_free_iomappings looks it up to unmap, and
// that loop never ends).
//
// Options (riostream's): -s server address (client mode), -b bind address
// (the server's; a client binds to it too, where rdma-core's riostream
// ignores it), -B buffer size (rings of twice it, as
// SO_SNDBUF/SO_RCVBUF; 0 the default 1<<19, under 2048 taken as 2048), -i
// inline size of the latency tests, -I iterations, -C transfers, -S
// size|all, -p port (7471), -T b / -T n (blocking or not: Go's calls
// always block, so both run the same), -T v (verify the data pattern), -T
// a (accepted, no effect), -f ip|ipv6 (numeric addresses only; gid
// refused). -T takes riostream's long names too, in any case (async,
// blocking, nonblocking, verify); like riostream it takes no s, r or f.
//
// The output is riostream's table, rstream's: name, bytes, xfers, iters,
// total, time, Gb/sec (both directions) and usec/xfer (one way).
package main

import (
	"io"
	"os"

	"github.com/goverbs/goverbs/internal/streamtool"
)

func main() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	return streamtool.Run(streamtool.RIOStream, args, stdout, stderr)
}
