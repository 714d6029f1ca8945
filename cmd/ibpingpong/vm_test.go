package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/internal/testvm/vmproc"
)

// runTimeout bounds one side of a VM run: 500 iterations take a few
// seconds under TCG, the rest is set-up.
const runTimeout = 90 * time.Second

// side is one program of a pingpong pair: this package's run, in process,
// or one of rdma-core's examples.
type side struct {
	goSide bool
	tool   string // the C example's path
}

func (s side) String() string {
	if s.goSide {
		return "go"
	}
	return "c"
}

// result is what one side printed and returned.
type result struct {
	exit   int
	stdout string
	stderr string
}

// start runs the side with args in the background; ready (Go servers
// only) is called once it listens.
func (s side) start(ctx context.Context, t *testing.T, k kind, args []string, ready func(net.Addr)) <-chan result {
	t.Helper()
	done := make(chan result, 1)
	if s.goSide {
		go func() {
			var out, errb bytes.Buffer
			exit := runContext(ctx, append([]string{"ibpingpong", "-t", k.String()}, args...), &out, &errb, ready)
			done <- result{exit, out.String(), errb.String()}
		}()
		return done
	}
	cmd := exec.CommandContext(ctx, s.tool, args...)
	cmd.Env = append(os.Environ(), "IBV_DRIVERS=rxe") // no warnings about absent providers
	cmd.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", s.tool, err)
	}
	go func() {
		exit, note := vmproc.ExitCode(cmd.Wait())
		errb.WriteString(note)
		done <- result{exit, out.String(), errb.String()}
	}()
	return done
}

// output is a side's stdout, parsed.
type output struct {
	local, remote []string // "LID QPN PSN GID" of each address line
	bytes, iters  int
	invalid       []string // -c's "invalid data in page N" lines
	other         []string
}

var (
	localRE  = regexp.MustCompile(`^  local address:  LID 0x([0-9a-f]{4}), QPN 0x([0-9a-f]{6}), PSN 0x([0-9a-f]{6})[,:] GID (\S+)$`)
	remoteRE = regexp.MustCompile(`^  remote address: LID 0x([0-9a-f]{4}), QPN 0x([0-9a-f]{6}), PSN 0x([0-9a-f]{6}), GID (\S+)$`)
	bytesRE  = regexp.MustCompile(`^(\d+) bytes in \d+\.\d\d seconds = \d+\.\d\d Mbit/sec$`)
	itersRE  = regexp.MustCompile(`^(\d+) iters in \d+\.\d\d seconds = \d+\.\d\d usec/iter$`)
)

func parseOutput(s string) output {
	var o output
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := sc.Text()
		if m := localRE.FindStringSubmatch(line); m != nil {
			o.local = append(o.local, strings.Join(m[1:], " "))
		} else if m := remoteRE.FindStringSubmatch(line); m != nil {
			o.remote = append(o.remote, strings.Join(m[1:], " "))
		} else if m := bytesRE.FindStringSubmatch(line); m != nil {
			o.bytes, _ = strconv.Atoi(m[1])
		} else if m := itersRE.FindStringSubmatch(line); m != nil {
			o.iters, _ = strconv.Atoi(m[1])
		} else if strings.HasPrefix(line, "invalid data in page") {
			o.invalid = append(o.invalid, line)
		} else {
			o.other = append(o.other, line)
		}
	}
	return o
}

// interopCase is one pingpong run: a variant, who serves, who connects,
// with which options.
type interopCase struct {
	k              kind
	server, client side
	args           []string // both sides
	serverArgs     []string // the server only
	serverDev      string   // default rxe0
	connectTo      string   // default 127.0.0.1
	wantInvalid    []string // the server's -c complaints
}

func (tc interopCase) name() string {
	n := fmt.Sprintf("%v/%v-server/%v-client/%s", tc.k, tc.server, tc.client, strings.Join(tc.args, "_"))
	if tc.serverArgs != nil {
		n += "/server_" + strings.Join(tc.serverArgs, "_")
	}
	return n
}

func (tc interopCase) run(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	port := strconv.Itoa(vmproc.FreePort(t))
	serverDev := tc.serverDev
	if serverDev == "" {
		serverDev = vmenv.RXE0
	}
	host := tc.connectTo
	if host == "" {
		host = "127.0.0.1"
	}
	common := append([]string{"-p", port, "-g", strconv.Itoa(vmenv.GIDIndex)}, tc.args...)
	started := time.Now()

	up := make(chan struct{})
	var ready func(net.Addr)
	if tc.server.goSide {
		ready = func(net.Addr) { close(up) }
	}
	srvDone := tc.server.start(ctx, t, tc.k, append(append([]string{"-d", serverDev}, common...), tc.serverArgs...), ready)
	if !tc.server.goSide {
		go func() {
			for ctx.Err() == nil && !vmproc.Listening(mustAtoi(port)) {
				time.Sleep(20 * time.Millisecond)
			}
			close(up)
		}()
	}
	var srv, cli result
	select {
	case <-up:
	case srv = <-srvDone:
		t.Fatalf("server ended before listening: exit %d\nstdout:\n%s\nstderr:\n%s", srv.exit, srv.stdout, srv.stderr)
	}
	if ctx.Err() != nil {
		t.Fatalf("server not listening on port %s within %v", port, runTimeout)
	}
	cli = <-tc.client.start(ctx, t, tc.k, append([]string{"-d", vmenv.RXE0}, append(common, host)...), nil)
	srv = <-srvDone
	t.Logf("%v in %v; client: %s", tc.name(), time.Since(started).Round(time.Millisecond), strings.TrimSpace(lastLine(cli.stdout)))
	if ctx.Err() != nil {
		t.Errorf("the run did not end within %v", runTimeout)
	}
	for _, r := range []struct {
		role string
		res  result
	}{{"server", srv}, {"client", cli}} {
		if r.res.exit != 0 || r.res.stderr != "" {
			t.Errorf("%s (%v): exit %d\nstdout:\n%s\nstderr:\n%s", r.role, map[string]side{"server": tc.server, "client": tc.client}[r.role],
				r.res.exit, r.res.stdout, r.res.stderr)
		}
	}
	if t.Failed() {
		return
	}
	so, co := parseOutput(srv.stdout), parseOutput(cli.stdout)
	iters, size, nqp := 500, defaults(tc.k).size, defaults(tc.k).numQP
	for i, a := range tc.args {
		if a == "-n" {
			iters = mustAtoi(tc.args[i+1])
		}
		if a == "-s" {
			size = mustAtoi(tc.args[i+1])
		}
		if a == "-q" {
			nqp = mustAtoi(tc.args[i+1])
		}
	}
	for _, x := range []struct {
		role string
		o    output
	}{{"server", so}, {"client", co}} {
		if len(x.o.local) != nqp || len(x.o.remote) != nqp || x.o.iters != iters || x.o.bytes != 2*size*iters || len(x.o.other) != 0 {
			t.Errorf("%s output: %d local and %d remote addresses (want %d), %d iters (want %d), %d bytes (want %d), unexpected lines %q",
				x.role, len(x.o.local), len(x.o.remote), nqp, x.o.iters, iters, x.o.bytes, 2*size*iters, x.o.other)
		}
	}
	if diff := cmp.Diff(tc.wantInvalid, so.invalid); diff != "" {
		t.Errorf("server's buffer check (-want +got):\n%s", diff)
	}
	if len(co.invalid) != 0 {
		t.Errorf("the client checked its buffer: %q", co.invalid)
	}
	// What each side says it sent is what the other says it received.
	if diff := cmp.Diff(so.local, co.remote); diff != "" {
		t.Errorf("server's addresses as the client got them (-server +client):\n%s", diff)
	}
	if diff := cmp.Diff(co.local, so.remote); diff != "" {
		t.Errorf("client's addresses as the server got them (-client +server):\n%s", diff)
	}
	for _, l := range so.local {
		if !strings.HasSuffix(l, " ::ffff:"+vmenv.AddrA) && !strings.HasSuffix(l, " ::ffff:"+vmenv.AddrB) {
			t.Errorf("server address %q: not the IPv4-mapped RoCE v2 GID", l)
		}
	}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndexByte(s, '\n')+1:]
}

func mustAtoi(s string) int {
	v, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return v
}

// requireVM skips outside the test VM and returns the C examples by
// variant; inside the VM, a missing device or tool fails.
func requireVM(t *testing.T) map[kind]string {
	t.Helper()
	if !vmenv.InVM() {
		t.Skip("not in the goverbs test VM: run go test -exec \"$PWD/bin/vmexec -kernel 6.1\" ./cmd/ibpingpong/ (GOVERBS_VM unset)")
	}
	vmenv.RequireDevice(t, vmenv.RXE0)
	vmenv.RequireDevice(t, vmenv.RXE1)
	tools := map[kind]string{}
	for _, k := range []kind{kindRC, kindUC, kindUD, kindSRQ} {
		path, err := exec.LookPath("ibv_" + k.String() + "_pingpong")
		if err != nil {
			t.Fatalf("inside the test VM (kernel %s) without rdma-core's examples: %v", vmenv.KernelName(), err)
		}
		tools[k] = path
	}
	t.Logf("kernel %s (%s), GOVERBS_TRANSPORT=%q", vmenv.KernelName(), vmenv.KernelRelease(), os.Getenv("GOVERBS_TRANSPORT"))
	return tools
}

// TestInteropVM runs every variant against rdma-core's example in both
// roles and against itself, on rxe0 over the loopback (and once across the
// veth pair, rxe1 to rxe0), busy polling and with completion events.
func TestInteropVM(t *testing.T) {
	tools := requireVM(t)
	goSide := side{goSide: true}
	var cases []interopCase
	for _, k := range []kind{kindRC, kindUC, kindUD, kindSRQ} {
		c := side{tool: tools[k]}
		args := []string{"-n", "500"}
		if k == kindRC {
			args = append(args, "-c")
		}
		for _, pair := range [][2]side{{goSide, c}, {c, goSide}, {goSide, goSide}} {
			cases = append(cases, interopCase{k: k, server: pair[0], client: pair[1], args: args})
		}
	}
	c := side{tool: tools[kindRC]}
	for _, pair := range [][2]side{{goSide, c}, {c, goSide}, {goSide, goSide}} {
		cases = append(cases, interopCase{k: kindRC, server: pair[0], client: pair[1], args: []string{"-n", "500", "-c", "-e"}})
	}
	cases = append(cases,
		// Events in the other variants, a small srq, other sizes and MTUs.
		interopCase{k: kindUC, server: goSide, client: side{tool: tools[kindUC]}, args: []string{"-n", "500", "-e", "-s", "100"}},
		interopCase{k: kindUD, server: side{tool: tools[kindUD]}, client: goSide, args: []string{"-n", "500", "-e", "-c", "-s", "512"}},
		interopCase{k: kindSRQ, server: goSide, client: side{tool: tools[kindSRQ]}, args: []string{"-n", "500", "-e", "-q", "4", "-r", "8"}},
		interopCase{k: kindRC, server: side{tool: tools[kindRC]}, client: goSide, args: []string{"-n", "200", "-s", "10000", "-m", "512", "-r", "2"}},
		// -c on the server alone: the client sends the buffer as it
		// was filled (0x7b), not the page-start zeros -c writes, and the
		// check says so for each page.
		interopCase{k: kindRC, server: goSide, client: side{tool: tools[kindRC]}, args: []string{"-n", "50", "-s", "8192"},
			serverArgs: []string{"-c"}, wantInvalid: []string{"invalid data in page 0", "invalid data in page 1"}},
		interopCase{k: kindUD, server: side{tool: tools[kindUD]}, client: goSide, args: []string{"-n", "50"},
			serverArgs: []string{"-c"}, wantInvalid: []string{"invalid data in page 0"}},
		// Two devices: the server on rxe1, reached at its own address.
		interopCase{k: kindRC, server: goSide, client: side{tool: tools[kindRC]}, args: []string{"-n", "500", "-c"},
			serverDev: vmenv.RXE1, connectTo: vmenv.AddrB},
	)
	for _, tc := range cases {
		// In make vmtest's GOVERBS_TRANSPORT=write pass, only the pairs
		// of ibpingpong against itself: they make every verbs command of
		// each variant through that transport (vmenv.RepeatPass).
		if vmenv.RepeatPass() && !(tc.server.goSide && tc.client.goSide) {
			continue
		}
		t.Run(tc.name(), tc.run)
	}
	if n := deviceFDs(); n != 0 {
		t.Errorf("%d uverbs file descriptors open after the runs", n)
	}
}

// deviceFDs counts the process's open uverbs files: every run must close
// what it opened.
func deviceFDs() int {
	ents, _ := os.ReadDir("/proc/self/fd")
	n := 0
	for _, e := range ents {
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		if strings.HasPrefix(l, "/dev/infiniband/") || strings.Contains(l, "infinibandevent") {
			n++
		}
	}
	return n
}

// TestFailuresVM compares failing command lines with the C examples: the
// same exit status and the same first line on stderr (the C message; the
// Go side adds the cause on a later line).
func TestFailuresVM(t *testing.T) {
	tools := requireVM(t)
	closed := strconv.Itoa(vmproc.FreePort(t))
	for _, tc := range []struct {
		k    kind
		args []string
	}{
		{kindRC, []string{"-d", "nosuch"}},
		{kindRC, []string{"-d", "rxe0", "-p", closed, "127.0.0.1"}},
		{kindUD, []string{"-d", "rxe0", "-s", "2048", "-p", closed, "127.0.0.1"}},
		{kindSRQ, []string{"-d", "rxe0", "-g", "1", "-p", closed, "127.0.0.1"}},
		{kindRC, []string{"-d", "rxe0", "-g", "200", "-p", closed, "127.0.0.1"}}, // an empty entry: the zero GID
		{kindUC, []string{"-d", "rxe0", "-g", "255", "-p", closed, "127.0.0.1"}},
		{kindRC, []string{"-d", "rxe0", "-i", "2"}},
	} {
		t.Run(fmt.Sprintf("%v/%s", tc.k, strings.Join(tc.args, "_")), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			want := <-side{tool: tools[tc.k]}.start(ctx, t, tc.k, tc.args, nil)
			got := <-side{goSide: true}.start(ctx, t, tc.k, tc.args, nil)
			if got.exit != want.exit {
				t.Errorf("exit %d, C %d", got.exit, want.exit)
			}
			first := func(s string) string { return strings.SplitN(s, "\n", 2)[0] }
			if diff := cmp.Diff(first(want.stderr), first(got.stderr)); diff != "" {
				t.Errorf("first stderr line (-C +Go):\n%s\nC stderr:\n%s\nGo stderr:\n%s", diff, want.stderr, got.stderr)
			}
			if got.exit == 0 {
				t.Errorf("succeeded:\n%s", got.stdout)
			}
		})
	}
	if n := deviceFDs(); n != 0 {
		t.Errorf("%d uverbs file descriptors open after the failures", n)
	}
}

// TestAbortVM: a server nobody connects to, and a client whose server
// vanishes after the exchange, end when the run's context does, having
// closed everything.
func TestAbortVM(t *testing.T) {
	requireVM(t)
	for _, tc := range []struct {
		name string
		args []string
	}{{"busy", nil}, {"events", []string{"-e"}}} {
		t.Run(tc.name, func(t *testing.T) {
			port := strconv.Itoa(vmproc.FreePort(t))
			// A server that is never connected to.
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			res := <-side{goSide: true}.start(ctx, t, kindRC, append([]string{"-d", "rxe0", "-g", "1", "-p", port}, tc.args...), nil)
			if res.exit != 1 || !strings.Contains(res.stderr, "Couldn't listen to port") {
				t.Errorf("unconnected server: exit %d, stderr %q", res.exit, res.stderr)
			}
			// A client whose server exchanges addresses and never sends:
			// the client's first send is never answered.
			ln, err := net.Listen("tcp", "127.0.0.1:"+port)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				defer conn.Close()
				p := &cPeer{n: 1, local: []dest{{QPN: 0xfffffe, PSN: 1, GID: roceGID}}}
				if p.receive(conn) == nil && p.send(conn) == nil {
					conn.Read(make([]byte, 5))
				}
			}()
			ctx2, cancel2 := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel2()
			res = <-side{goSide: true}.start(ctx2, t, kindRC, append([]string{"-d", "rxe0", "-g", "1", "-p", port, "127.0.0.1"}, tc.args...), nil)
			// The send to a QP that does not exist either fails (retries
			// exhausted) or is still retrying when the run ends.
			if res.exit != 1 || (!strings.Contains(res.stderr, "Failed status") && !strings.Contains(res.stderr, "abort") &&
				!strings.Contains(res.stderr, "cq_event")) {
				t.Errorf("client of a silent server: exit %d, stderr %q", res.exit, res.stderr)
			}
		})
	}
	if n := deviceFDs(); n != 0 {
		t.Errorf("%d uverbs file descriptors open after the aborted runs", n)
	}
}
