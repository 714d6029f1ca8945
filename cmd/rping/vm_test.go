package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/internal/testvm/vmproc"
)

// runTimeout bounds one side of a VM run.
const runTimeout = 120 * time.Second

func requireVM(t *testing.T) {
	t.Helper()
	if !vmenv.InVM() {
		t.Skip("not in the goverbs test VM: run go test -exec \"$PWD/bin/vmexec -kernel 6.1\" ./cmd/rping/")
	}
	vmenv.RequireCM(t)
	t.Logf("kernel %s (%s), GOVERBS_TRANSPORT=%q", vmenv.KernelName(), vmenv.KernelRelease(), os.Getenv("GOVERBS_TRANSPORT"))
}

type result struct {
	exit           int
	stdout, stderr string
}

// side is rping: this package's, in process, or rdma-core's.
type side struct{ goSide bool }

func (s side) String() string {
	if s.goSide {
		return "go"
	}
	return "c"
}

// start runs rping with args in the background; a Go server calls ready
// once it listens.
func (s side) start(ctx context.Context, t *testing.T, args []string, ready func()) <-chan result {
	t.Helper()
	done := make(chan result, 1)
	if s.goSide {
		go func() {
			var out, errb bytes.Buffer
			exit := runContext(ctx, append([]string{"rping"}, args...), &out, &errb, ready)
			done <- result{exit, out.String(), errb.String()}
		}()
		return done
	}
	go func() {
		r := <-vmproc.Start(ctx, t, "rping", args...)
		done <- result{r.Exit, r.Stdout, r.Stderr}
	}()
	return done
}

var nextPort = 7200

// pair runs a server and a client on a fresh port: the server listens on
// rxe0's address, the client connects to it, from rxe1's address when
// cross.
func pair(t *testing.T, server, client side, cross bool, args ...string) (srv, cli result) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	nextPort++
	portNum := nextPort
	port := strconv.Itoa(portNum)
	up := make(chan struct{})
	var ready func()
	if server.goSide {
		ready = func() { close(up) }
	}
	srvDone := server.start(ctx, t, append([]string{"-s", "-a", vmenv.AddrA, "-p", port}, args...), ready)
	if !server.goSide {
		go func() {
			for ctx.Err() == nil && !vmproc.CMListening("TCP", portNum) {
				time.Sleep(20 * time.Millisecond)
			}
			close(up)
		}()
	}
	select {
	case <-up:
	case srv = <-srvDone:
		t.Fatalf("server ended before listening: exit %d\nstdout:\n%s\nstderr:\n%s", srv.exit, srv.stdout, srv.stderr)
	}
	cargs := []string{"-c", "-a", vmenv.AddrA, "-p", port}
	if cross {
		cargs = append(cargs, "-I", vmenv.AddrB)
	}
	cli = <-client.start(ctx, t, append(cargs, args...), nil)
	srv = <-srvDone
	return srv, cli
}

// normalize drops the lines rping's cm thread prints, or not, as the
// process exits: the client's report of the disconnect it asked for, and
// the known race of rdma-core 44's rping (below), which can print its
// error and still exit 0 when the main thread's exit wins (seen in the
// reference C pair on 6.12/write, 2026-11-27, which then failed all three
// pairs against it).
func normalize(s string) string {
	s = strings.ReplaceAll(s, "client DISCONNECT EVENT...\n", "")
	return strings.ReplaceAll(s, "rdma_get_cm_event: Bad file descriptor\n", "")
}

// expectedPings is what a -v client (and, with prefix "server ", server)
// prints for count pings of size bytes.
func expectedPings(prefix string, count, size int) string {
	var b strings.Builder
	buf := make([]byte, size)
	for n := 0; n < count; n++ {
		fillPing(buf, n)
		fmt.Fprintf(&b, "%sping data: %s\n", prefix, cString(buf))
	}
	return b.String()
}

// TestInteropVM runs rping against rdma-core's in both roles and against
// itself, across the veth pair (rxe1 to rxe0) and on one device, with
// 100 validated pings: both must exit 0, and each side's output must be
// the C tool's in that role (a C pair runs first as the reference).
func TestInteropVM(t *testing.T) {
	requireVM(t)
	goSide, cSide := side{goSide: true}, side{}
	const count, size = 100, 64
	args := []string{"-C", strconv.Itoa(count), "-S", strconv.Itoa(size), "-v", "-V"}
	for _, cross := range []bool{true, false} {
		where := "rxe1-to-rxe0"
		if !cross {
			where = "rxe0"
		}
		t.Run(where, func(t *testing.T) {
			refSrv, refCli := pair(t, cSide, cSide, cross, args...)
			if refSrv.exit != 0 || refCli.exit != 0 {
				t.Fatalf("rdma-core's pair failed: server %d %q %q, client %d %q %q", refSrv.exit, refSrv.stdout, refSrv.stderr,
					refCli.exit, refCli.stdout, refCli.stderr)
			}
			// The reference is what this test expects of rping.
			if diff := cmp.Diff(expectedPings("server ", count, size), refSrv.stdout); diff != "" {
				t.Errorf("rdma-core's server output (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(expectedPings("", count, size), refCli.stdout); diff != "" {
				t.Errorf("rdma-core's client output (-want +got):\n%s", diff)
			}
			for _, p := range [][2]side{{goSide, cSide}, {cSide, goSide}, {goSide, goSide}} {
				t.Run(fmt.Sprintf("%v-server/%v-client", p[0], p[1]), func(t *testing.T) {
					srv, cli := pair(t, p[0], p[1], cross, args...)
					// Known race, not yet understood: a Go server has been
					// seen (once, on 6.12 under load) to report its end as
					// "wait for RDMA_READ_ADV state 11" and then "wait for
					// RDMA_READ_COMPLETE state 10" where rping prints only
					// "... state 10", with every ping verified and exit 0.
					// Such a run is repeated once and logged; a second
					// mismatch fails.
					stderrOnly := func() bool {
						return srv.exit == 0 && cli.exit == 0 && srv.stdout == refSrv.stdout && cli.stdout == refCli.stdout &&
							(normalize(srv.stderr) != normalize(refSrv.stderr) || normalize(cli.stderr) != normalize(refCli.stderr))
					}
					// Known race on the C side: rdma-core 44's rping destroys
					// its CM event channel while its CM thread may still be
					// about to ask for the next event, which then fails
					// with EBADF and exits 255 ("rdma_get_cm_event: Bad file
					// descriptor", after every ping was verified); fixed
					// upstream in rdma-core's f3ae6534a ("rping: terminate
					// CM event thread before exiting", 2025), after the
					// rdma-core Debian 12 ships. Seen once, on 6.12/write
					// with a Go server on rxe0. Such a run is repeated once
					// and logged; a second one fails.
					cGetEventRace := func(r result, ref result, other result) bool {
						return r.exit == 255 && other.exit == 0 && r.stdout == ref.stdout &&
							strings.HasSuffix(r.stderr, "rdma_get_cm_event: Bad file descriptor\n")
					}
					cRace := (!p[1].goSide && cGetEventRace(cli, refCli, srv)) || (!p[0].goSide && cGetEventRace(srv, refSrv, cli))
					if stderrOnly() || cRace {
						t.Logf("shutdown messages differ, running the pair again:\nserver exit %d, stderr:\n%s\nclient exit %d, stderr:\n%s",
							srv.exit, srv.stderr, cli.exit, cli.stderr)
						srv, cli = pair(t, p[0], p[1], cross, args...)
					}
					for _, r := range []struct {
						role     string
						got, ref result
					}{{"server", srv, refSrv}, {"client", cli, refCli}} {
						if r.got.exit != 0 {
							t.Errorf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", r.role, r.got.exit, r.got.stdout, r.got.stderr)
							continue
						}
						if diff := cmp.Diff(r.ref.stdout, r.got.stdout); diff != "" {
							t.Errorf("%s stdout differs from rdma-core's (-C +got):\n%s", r.role, diff)
						}
						if diff := cmp.Diff(normalize(r.ref.stderr), normalize(r.got.stderr)); diff != "" {
							t.Errorf("%s stderr differs from rdma-core's (-C +got):\n%s", r.role, diff)
						}
					}
				})
			}
		})
	}
}

// TestRefusedVM: a client of a port nobody listens on says what rping says
// and exits as it does (255).
func TestRefusedVM(t *testing.T) {
	requireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	args := []string{"-c", "-a", vmenv.AddrA, "-I", vmenv.AddrB, "-p", "7399", "-C", "1"}
	c := <-side{}.start(ctx, t, args, nil)
	g := <-side{goSide: true}.start(ctx, t, args, nil)
	// rping's cm thread exits the process as its main thread prints its
	// two lines about the failed connect: they come or not.
	racy := strings.NewReplacer("wait for CONNECTED state 4\n", "", "connect error -1\n", "")
	c.stderr, g.stderr = racy.Replace(c.stderr), racy.Replace(g.stderr)
	if diff := cmp.Diff(c, g, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("(-rping +go):\n%s", diff)
	}
	if g.stderr != "cma event RDMA_CM_EVENT_REJECTED, error 8\n" {
		t.Errorf("stderr %q, want rping's REJECTED line", g.stderr)
	}
	if g.exit != exitFailure {
		t.Errorf("exit %d, want %d", g.exit, exitFailure)
	}
}

// TestCommandLineVM compares the refusals of bad command lines with
// rping's: the same message, usage and status.
func TestCommandLineVM(t *testing.T) {
	requireVM(t)
	for _, args := range [][]string{
		{},
		{"-x"},
		{"-s", "-S", "5"},
		{"-s", "-S", "65536"},
		{"-c", "-C", "-1"},
		{"-s", "-t", "1"},
	} {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			c := <-side{}.start(ctx, t, args, nil)
			g := <-side{goSide: true}.start(ctx, t, args, nil)
			if diff := cmp.Diff(c, g, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("(-rping +go):\n%s", diff)
			}
		})
	}
}
