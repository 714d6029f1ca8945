// Command rping is rdma-core's rping (librdmacm/examples/rping.c, v44) in
// one static binary with no librdmacm or libibverbs: it connects through
// the kernel's RDMA connection manager with goverbs' rdmacm package and is
// wire-compatible with rping, so either side may be the C program:
//
//	rping -s -a 10.99.0.1 -v -C 10                 # server
//	rping -c -a 10.99.0.1 -I 10.99.0.2 -v -V -C 10 # client (from rxe1)
//
// The protocol is rping's: the client advertises its ping buffer (address,
// rkey, size: a 16-byte SEND), the server RDMA-READs it, says go ahead
// (SEND), the client advertises its sink, the server RDMA-WRITEs the ping
// back and says go ahead; the client checks the echo (-V) and goes on.
// The ping data is rping's ("rdma-ping-<n>: " and rotating letters), and so
// are the output lines ("ping data: ...", "server ping data: ...",
// "server DISCONNECT EVENT...", "wait for RDMA_READ_ADV state 10", "cma
// event RDMA_CM_EVENT_REJECTED, error 8", ...) and the exit status: 0, 255
// for a connection manager error event (rping's exit(-1)), 22 for a bad
// command line.
//
// Options (rping's):
//
//	-s          server
//	-c          client
//	-a addr     address to listen on (server; default any) or to connect to
//	-I addr     source address of the client
//	-p port     port (default 7174)
//	-C count    pings (default 0: for ever)
//	-S size     ping size, 23 to 65535 (default 64)
//	-v          print the ping data
//	-V          validate the echo
//	-d          debug lines
//	-P          persistent server: serve every client, concurrently
//	-q          the QP is created by the program and moved with the
//	            attributes the kernel gives (rdma_init_qp_attr)
//
// Differences from rping: numbers must be decimal numbers ("-C 12abc" is
// refused, where atoi reads 12); -a and -I take IP addresses, not host
// names; debug lines (-d) do not print pointers.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/goverbs/goverbs/rdmacm"
)

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run is the program: args[0] is the program name. SIGINT or SIGTERM ends
// it wherever it waits, and everything it opened is closed.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runContext(ctx, args, stdout, stderr, nil)
}

// runContext is run until ctx ends; ready, if not nil, is called once a
// server listens.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer, ready func()) int {
	cfg, err := parseArgs(args)
	if err != nil {
		var bad *badCommandLine
		if !errors.As(err, &bad) {
			fmt.Fprintln(stderr, err)
			return exitUsage
		}
		if bad.msg != "" {
			w := stderr
			if bad.code != exitUsage { // getaddrinfo's message goes to stdout
				w = stdout
			}
			fmt.Fprintln(w, bad.msg)
		}
		if bad.usage {
			usage(stdout, cfg.prog)
		}
		return bad.code
	}
	r := &pinger{cfg: &cfg, stdout: stdout, stderr: stderr, ready: ready}
	ch, err := rdmacm.NewEventChannel()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cfg.prog, err)
		return exitFailure
	}
	defer ch.Close()
	r.debugf("created cm_id\n")
	if cfg.server {
		err = r.runServer(ctx, ch)
	} else {
		err = r.runClient(ctx, ch)
	}
	if err != nil {
		return exitFailure
	}
	return 0
}
