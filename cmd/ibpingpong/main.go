// Command ibpingpong is rdma-core's four ping-pong examples in one static
// binary with no libibverbs: -t rc, uc, ud or srq runs the counterpart of
// ibv_rc_pingpong, ibv_uc_pingpong, ibv_ud_pingpong or ibv_srq_pingpong
// (v44), with their options and wire-compatible with them, so either side
// may be the C program:
//
//	ibpingpong -t rc -d rxe0 -g 1            # server: waits for one client
//	ibpingpong -t rc -d rxe0 -g 1 10.99.0.1  # client
//
// The same TCP exchange (the "LID:QPN:PSN:GID" address text in 52-byte
// messages, 256 of them each way for srq, the client's "done"), the same
// queue pairs and work requests, the same send/receive rhythm, random
// PSNs, and the same output, result lines included:
//
//	8192000 bytes in 0.52 seconds = 126.03 Mbit/sec
//	1000 iters in 0.52 seconds = 520.00 usec/iter
//
// Options (as the C programs; -m is not one of ud's, -q is srq's only):
//
//	-t, --transport=rc|uc|ud|srq  the example (default: from the program
//	                              name, e.g. a link named ibv_ud_pingpong,
//	                              else rc)
//	-p, --port=<port>     TCP port (default 18515)
//	-d, --ib-dev=<dev>    RDMA device (default: the first)
//	-i, --ib-port=<port>  device port (default 1)
//	-s, --size=<size>     message size (default 4096; ud 1024)
//	-m, --mtu=<size>      path MTU (default 1024)
//	-r, --rx-depth=<n>    receives posted at a time (default 500)
//	-n, --iters=<n>       exchanges (default 1000)
//	-l, --sl=<sl>         service level
//	-e, --events          wait for completion events instead of busy polling;
//	                      the wait parks on the Go netpoller, no thread blocks
//	-g, --gid-idx=<index> local GID index: RoCE needs one (a RoCE v2 GID)
//	-c, --chk             server checks the received buffer
//	-q, --num-qp=<n>      srq: QPs sharing the receive queue (default 16)
//	-h, --help            usage
//
// Differences from the C programs: a number that is not entirely a number
// or is out of range ("-n 12abc", "-l 16", "-r 0", "-n 0") is refused with
// the usage, where C would go on with what strtol made of it; the options
// of hardware features rxe lacks (--odp, --iodp, --prefetch, --ts, --dm) are
// recognized and refused; -N (new post-send API) is accepted and changes
// nothing, as the traffic is the same. Once connected, the TCP exchange
// gives up after a minute of silence from the peer.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run is the program: args[0] is the program name. It returns the exit
// status. SIGINT or SIGTERM stops it wherever it waits, and everything it
// opened is closed.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runContext(ctx, args, stdout, stderr, nil)
}

// runContext is run until ctx ends (tests give it a deadline); ready, if
// not nil, is called once a server listens.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer, ready func(net.Addr)) int {
	cfg, err := parseArgs(args)
	if errors.Is(err, errHelp) {
		usage(stdout, cfg.prog, cfg.kind)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cfg.prog, err)
		usage(stdout, cfg.prog, cfg.kind)
		return 1
	}
	p := &pingpong{cfg: &cfg, stdout: stdout, stderr: stderr, ready: ready}
	err = p.run(ctx)
	if cerr := p.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 1
	}
	return 0
}
