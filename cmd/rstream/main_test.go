package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/internal/testvm/vmproc"
)

// TestTCPSuite runs the default suite (latency phase, reconnection,
// bandwidth phase) over kernel TCP on loopback. It touches no RDMA device:
// the host's go test runs it (seconds), the test VM does not (over a
// minute under TCG, in each of make vmtest's four passes).
func TestTCPSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("the suite takes seconds")
	}
	if vmenv.InVM() {
		t.Skip("kernel TCP only: runs on the host, not in the test VM")
	}
	cout := loopback(t, "-T", "s", "-T", "v")
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(cout), "\n")[1:] {
		names = append(names, strings.Fields(l)[0])
	}
	want := []string{"64_lat", "4k_lat", "64k_lat", "1m_lat", "64_bw", "4k_bw", "64k_bw", "1m_bw"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("tests (-want +got):\n%s", diff)
	}
	t.Log(cout)
}

// TestTCP runs a custom test over kernel TCP (-T s) on loopback: both
// sides print rstream's table.
func TestTCP(t *testing.T) {
	cout := loopback(t, "-T", "s", "-T", "v", "-S", "3000", "-C", "5", "-I", "3")
	lines := strings.Split(cout, "\n")
	if diff := cmp.Diff("name      bytes   xfers   iters   total       time     Gb/sec    usec/xfer", lines[0]); diff != "" {
		t.Errorf("header (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(lines[1], "custom    2.9k    5       3       87k     ") {
		t.Errorf("row %q", lines[1])
	}
	t.Log(cout)
}

// TestTCPKeepalive: -k prints what rstream prints when it sets
// keepalive, on the client after its header.
func TestTCPKeepalive(t *testing.T) {
	cout := loopback(t, "-T", "s", "-k", "7", "-S", "100", "-C", "2", "-I", "1")
	lines := strings.Split(cout, "\n")
	if diff := cmp.Diff([]string{"Keepalive: ON", "  time: 7"}, lines[1:3]); diff != "" {
		t.Errorf("client output (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(lines[3], "custom ") {
		t.Errorf("row %q", lines[3])
	}
}

// loopback runs a server and a client with args over kernel TCP on
// 127.0.0.1, on a port free when the test starts, and returns the
// client's output. The client starts once the server listens.
func loopback(t *testing.T, args ...string) string {
	t.Helper()
	port := vmproc.FreePort(t)
	args = append([]string{"-p", strconv.Itoa(port)}, args...)
	var sout, serr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run(append([]string{"rstream", "-b", "127.0.0.1"}, args...), &sout, &serr) }()
	deadline := time.Now().Add(time.Minute)
	for !vmproc.Listening(port) {
		select {
		case rc := <-done:
			t.Fatalf("server ended (exit %d) before listening: %s %s", rc, sout.String(), serr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on port %d a minute after the server started: %s %s", port, sout.String(), serr.String())
		}
	}
	var cout, cerr bytes.Buffer
	rc := run(append([]string{"rstream", "-s", "127.0.0.1"}, args...), &cout, &cerr)
	if src := <-done; rc != 0 || src != 0 {
		t.Fatalf("client %d %s %s; server %d %s %s", rc, cout.String(), cerr.String(), src, sout.String(), serr.String())
	}
	return cout.String()
}
