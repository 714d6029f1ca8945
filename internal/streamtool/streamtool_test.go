package streamtool

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSizeStr(t *testing.T) {
	for in, want := range map[int64]string{64: "64", 1536: "1.5k", 100000: "97k", 1048576000: "1000m",
		1258291200: "1.1g", 4096: "4k", 12 << 20: "12m"} {
		if got := SizeStr(in); got != want {
			t.Errorf("SizeStr(%d) = %q, want %q", in, got, want)
		}
	}
	if got := cntStr(100000); got != "100k" {
		t.Errorf("cntStr(100000) = %q", got)
	}
}

// parsed is what TestParse compares of parse's result.
type parsed struct {
	OK             bool
	RC             int
	Usage          bool // stdout is the tool's usage text
	TCP, Verify    bool
	All            bool
	Buffer         int
	Stdout, Stderr string
}

func parseSummary(tool Tool, args []string) parsed {
	name := toolName(tool)
	var out, errb bytes.Buffer
	o, rc, ok := parse(tool, append([]string{name}, args...), &out, &errb)
	p := parsed{OK: ok, RC: rc, Stderr: errb.String()}
	if ok {
		p.TCP, p.Verify, p.All, p.Buffer = o.tcp, o.verify, o.all, o.buffer
	}
	if out.String() == usage(tool, name) {
		p.Usage = true
	} else {
		p.Stdout = out.String()
	}
	return p
}

// TestParse: -T as set_test_opt reads it (one letter, or a case-blind
// prefix of C's length), -f warning as rstream.c and riostream.c do (on
// stderr, for neither ip* nor gid*), -S all case-blind, -B 0 the default.
func TestParse(t *testing.T) {
	def := parsed{OK: true, Buffer: 1 << 19}
	with := func(f func(*parsed)) parsed { p := def; f(&p); return p }
	tcp := with(func(p *parsed) { p.TCP = true })
	verify := with(func(p *parsed) { p.Verify = true })
	bad := parsed{RC: 1, Usage: true}
	fork := func(arg string) parsed {
		return parsed{RC: 1, Stderr: "rstream: -T " + arg + ": fork mode is not supported\n"}
	}
	warn := with(func(p *parsed) { p.Stderr = "Warning: unknown address format\n" })
	for _, tc := range []struct {
		tool Tool
		args []string
		want parsed
	}{
		{RStream, nil, def},
		{RStream, []string{"-T", "s"}, tcp},
		{RStream, []string{"-T", "socket"}, tcp},
		{RStream, []string{"-T", "sockets"}, tcp},
		{RStream, []string{"-T", "SOCKETS"}, tcp},
		{RStream, []string{"-T", "sock"}, bad},
		{RStream, []string{"-T", "S"}, bad},
		{RStream, []string{"-T", "blocking"}, def},
		{RStream, []string{"-T", "Block"}, def},
		{RStream, []string{"-T", "bl"}, bad},
		{RStream, []string{"-T", "nonblocking"}, def},
		{RStream, []string{"-T", "nonblock"}, def},
		{RStream, []string{"-T", "asynchronous"}, def},
		{RStream, []string{"-T", "r"}, def},
		{RStream, []string{"-T", "resolver"}, def},
		{RStream, []string{"-T", "v"}, verify},
		{RStream, []string{"-T", "Verify"}, verify},
		{RStream, []string{"-T", "verifying"}, verify},
		{RStream, []string{"-T", "vv"}, bad},
		{RStream, []string{"-T", ""}, bad},
		{RStream, []string{"-T", "x"}, bad},
		{RStream, []string{"-T", "f"}, fork("f")},
		{RStream, []string{"-T", "fork"}, fork("fork")},
		{RStream, []string{"-T", "Forked"}, fork("Forked")},
		{RIOStream, []string{"-T", "a"}, def},
		{RIOStream, []string{"-T", "Async"}, def},
		{RIOStream, []string{"-T", "b"}, def},
		{RIOStream, []string{"-T", "blocking"}, def},
		{RIOStream, []string{"-T", "n"}, def},
		{RIOStream, []string{"-T", "nonblocking"}, def},
		{RIOStream, []string{"-T", "v"}, verify},
		{RIOStream, []string{"-T", "VERIFY"}, verify},
		{RIOStream, []string{"-T", "s"}, bad},
		{RIOStream, []string{"-T", "sockets"}, bad},
		{RIOStream, []string{"-T", "r"}, bad},
		{RIOStream, []string{"-T", "resolve"}, bad},
		{RIOStream, []string{"-T", "f"}, bad},
		{RIOStream, []string{"-T", "fork"}, bad},
		{RStream, []string{"-f", "ip"}, def},
		{RStream, []string{"-f", "ipv6"}, def},
		{RStream, []string{"-f", "IPv4"}, def},
		{RStream, []string{"-f", "name"}, warn},
		{RStream, []string{"-f", "i"}, warn},
		{RStream, []string{"-f", "dns"}, warn},
		{RIOStream, []string{"-f", "name"}, warn},
		{RStream, []string{"-f", "gid"}, parsed{RC: 1, Stderr: "rstream: -f gid: AF_IB (gid) addresses are not supported\n"}},
		{RIOStream, []string{"-f", "GID"}, parsed{RC: 1, Stderr: "riostream: -f GID: AF_IB (gid) addresses are not supported\n"}},
		{RStream, []string{"-S", "all"}, with(func(p *parsed) { p.All = true })},
		{RStream, []string{"-S", "ALL"}, with(func(p *parsed) { p.All = true })},
		{RIOStream, []string{"-S", "Alles"}, with(func(p *parsed) { p.All = true })},
		{RStream, []string{"-B", "0"}, def},
		{RStream, []string{"-B", "1"}, parsed{RC: 1, Stderr: "rstream: -B 1: below the 2048 bytes the Go rsocket's rings need\n"}},
		{RStream, []string{"-B", "2047"}, parsed{RC: 1, Stderr: "rstream: -B 2047: below the 2048 bytes the Go rsocket's rings need\n"}},
		{RStream, []string{"-B", "2048"}, with(func(p *parsed) { p.Buffer = 2048 })},
		{RStream, []string{"-B", "4097"}, with(func(p *parsed) { p.Buffer = 4097 })},
		{RStream, []string{"-B", "-1"}, bad},
	} {
		t.Run(toolName(tc.tool)+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			if diff := cmp.Diff(tc.want, parseSummary(tc.tool, tc.args)); diff != "" {
				t.Errorf("parse (-want +got):\n%s", diff)
			}
		})
	}
}

// TestUsageProgramName: the usage line names argv[0], as printf("usage:
// %s\n", argv[0]) does.
func TestUsageProgramName(t *testing.T) {
	for _, tc := range []struct {
		tool Tool
		argv string
		want string
	}{
		{RStream, "/usr/bin/rstream", "usage: /usr/bin/rstream\n\t[-s server_address]\n\t[-b bind_address]\n\t[-f address_format]\n" +
			"\t    name, ip, ipv6, or gid\n\t[-B buffer_size]\n\t[-i inline_size]\n\t[-I iterations]\n\t[-C transfer_count]\n" +
			"\t[-S transfer_size or all]\n\t[-p port_number]\n\t[-k keepalive_time]\n\t[-T test_option]\n" +
			"\t    s|sockets - use standard tcp/ip sockets\n\t    a|async - asynchronous operation (use poll)\n" +
			"\t    b|blocking - use blocking calls\n\t    f|fork - fork server processing\n" +
			"\t    n|nonblocking - use nonblocking calls\n\t    r|resolve - use rdma cm to resolve address\n" +
			"\t    v|verify - verify data\n"},
		{RIOStream, "./riostream", "usage: ./riostream\n\t[-s server_address]\n\t[-b bind_address]\n\t[-f address_format]\n" +
			"\t    name, ip, ipv6, or gid\n\t[-B buffer_size]\n\t[-i inline_size]\n\t[-I iterations]\n\t[-C transfer_count]\n" +
			"\t[-S transfer_size or all]\n\t[-p port_number]\n\t[-T test_option]\n" +
			"\t    a|async - asynchronous operation (use poll)\n\t    b|blocking - use blocking calls\n" +
			"\t    n|nonblocking - use nonblocking calls\n\t    v|verify - verify data\n"},
	} {
		var out, errb bytes.Buffer
		if rc := Run(tc.tool, []string{tc.argv, "-T", "x"}, &out, &errb); rc != 1 {
			t.Errorf("%s: exit %d, want 1", tc.argv, rc)
		}
		if diff := cmp.Diff(tc.want, out.String()); diff != "" {
			t.Errorf("%s usage (-want +got):\n%s", tc.argv, diff)
		}
	}
}

// TestVerifyByteCount: a verification failure names the byte's place in
// all the data received so far, as verify_buf's static total_bytes does.
func TestVerifyByteCount(t *testing.T) {
	var out bytes.Buffer
	o := options{verify: true, stdout: &out, buf: make([]byte, 64)}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		p := make([]byte, 16+32)
		for i := range p {
			p[i] = byte(i)
		}
		p[16+5] = 0xEE // the sixth byte of the second transfer
		a.Write(p)
	}()
	if err := o.xfer(b, false, 16); err != nil {
		t.Fatalf("first transfer: %v", err)
	}
	if err := o.xfer(b, false, 32); err == nil {
		t.Fatal("second transfer verified")
	}
	if diff := cmp.Diff("data verification failed byte 21\n", out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

// TestDialTCPBindsSource: under -T s the client binds -b, as rstream's
// client_connect does before it connects.
func TestDialTCPBindsSource(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	accepted := make(chan net.Addr, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c.RemoteAddr()
		c.Close()
	}()
	o := options{tcp: true, dst: "127.0.0.1", src: "127.0.0.2", port: port, stdout: io.Discard}
	c, err := o.dial()
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	if got, want := c.LocalAddr().(*net.TCPAddr).IP.String(), "127.0.0.2"; got != want {
		t.Errorf("client's address %s, want %s", got, want)
	}
	if ra := <-accepted; ra == nil || ra.(*net.TCPAddr).IP.String() != "127.0.0.2" {
		t.Errorf("server saw the client at %v, want 127.0.0.2", ra)
	}
}
