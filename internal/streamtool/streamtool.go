// Package streamtool is cmd/rstream and cmd/riostream: rdma-core's
// rstream and riostream (librdmacm's rsocket test tools) in Go, over
// package rsocket, so that either side of a run may be the C tool.
//
// Both take rstream's options: -s server address (client mode), -b bind
// address (the client's source too, under -T s as well), -B buffer size
// (rings of twice it, as SO_SNDBUF/SO_RCVBUF; 0 the default 1<<19, under
// 2048 refused: rsocket's least), -i inline size of the latency
// tests, -I iterations, -C transfers, -S size|all, -p port (7471), -T b /
// -T n (blocking or not: Go's calls always block, so both run the same),
// -T v (verify the data pattern), -T a (accepted, no effect), -f ip|ipv6
// (numeric addresses only; gid refused, others warn on stderr as the C
// tools do). A -T value is one letter or, as set_test_opt reads it, any
// case of a word that begins with the option's name (sockets, blocking,
// nonblocking, Verify). rstream also takes -T s (kernel TCP instead), -T
// r (accepted, no effect) and -k seconds (keepalive on the listener and
// each connection, printed as rstream does; 0 off:
// rsocket.Config.KeepAlive, TCP keepalive under -T s); it refuses -T f
// (fork server processing: Go cannot fork) with a message and exit 1.
//
// rstream moves each transfer as stream data (Write and Read). riostream
// moves it with rsockets' iomap: each side maps its buffer for the peer
// (rsocket.Conn.MapIO, riomap), the transfers are WriteIO (riowrite)
// into the peer's buffer, and the receiver of a transfer waits for the
// buffer's last byte to take the marker value the sender put there last,
// as riostream does; a 16-byte message each way starts every test.
//
// The output is rstream's table: name, bytes, xfers, iters, total, time,
// Gb/sec (both directions) and usec/xfer (one way).
package streamtool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/goverbs/goverbs/internal/cli"
	"github.com/goverbs/goverbs/rsocket"
)

// Tool is which of the two tools Run is.
type Tool int

const (
	// RStream is rdma-core's rstream: transfers as stream data.
	RStream Tool = iota
	// RIOStream is rdma-core's riostream: transfers by iomap writes.
	RIOStream
)

type options struct {
	tool          Tool
	dst, src      string
	port          int
	buffer        int
	inline        int
	iters, count  int
	size          int
	all, custom   bool
	tcp, verify   bool
	sizes         []int
	stdout        io.Writer
	txSeq, rxSeq  uint8
	rxTotal       int64 // bytes verified (verify_buf's total_bytes)
	buf           []byte
	connectTimout time.Duration
	keepalive     int // seconds; 0 off
}

// usageLines are the tools' usage text, as they print it; the lines with
// rstreamOnly set are rstream's alone.
var usageLines = []struct {
	text        string
	rstreamOnly bool
}{
	{"\t[-s server_address]", false},
	{"\t[-b bind_address]", false},
	{"\t[-f address_format]", false},
	{"\t    name, ip, ipv6, or gid", false},
	{"\t[-B buffer_size]", false},
	{"\t[-i inline_size]", false},
	{"\t[-I iterations]", false},
	{"\t[-C transfer_count]", false},
	{"\t[-S transfer_size or all]", false},
	{"\t[-p port_number]", false},
	{"\t[-k keepalive_time]", true},
	{"\t[-T test_option]", false},
	{"\t    s|sockets - use standard tcp/ip sockets", true},
	{"\t    a|async - asynchronous operation (use poll)", false},
	{"\t    b|blocking - use blocking calls", false},
	{"\t    f|fork - fork server processing", true},
	{"\t    n|nonblocking - use nonblocking calls", false},
	{"\t    r|resolve - use rdma cm to resolve address", true},
	{"\t    v|verify - verify data", false},
}

// usage is the tool's usage text, naming argv0 as the C tools' argv[0].
func usage(tool Tool, argv0 string) string {
	var b strings.Builder
	b.WriteString("usage: " + argv0 + "\n")
	for _, l := range usageLines {
		if !l.rstreamOnly || tool == RStream {
			b.WriteString(l.text + "\n")
		}
	}
	return b.String()
}

// Buffer sizes (-B): the tools' default and the least rsocket takes (its
// rings are twice it).
const (
	defaultBuffer = 1 << 19
	minBuffer     = 2048
)

// testOpts are set_test_opt's -T values: each one letter, or an argument
// of two or more characters that begins with the name, in any case
// (strncasecmp over the name's length).
var testOpts = []struct {
	letter      byte
	name        string
	rstreamOnly bool
}{
	{'s', "socket", true},
	{'a', "async", false},
	{'b', "block", false},
	{'n', "nonblock", false},
	{'r', "resolve", true},
	{'v', "verify", false},
	{'f', "fork", true},
}

// testOpt is the letter of the -T value arg names to tool, or 0 if none.
func testOpt(tool Tool, arg string) byte {
	for _, t := range testOpts {
		if t.rstreamOnly && tool == RIOStream {
			continue
		}
		if len(arg) == 1 && arg[0] == t.letter || len(arg) > 1 && hasPrefixFold(arg, t.name) {
			return t.letter
		}
	}
	return 0
}

// hasPrefixFold reports whether s begins with prefix in ASCII letters of
// either case: strncasecmp(prefix, s, len(prefix)) == 0.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// Run runs the tool with args (args[0] the program name) and returns its
// exit status.
func Run(tool Tool, args []string, stdout, stderr io.Writer) int {
	o, rc, ok := parse(tool, args, stdout, stderr)
	if !ok {
		return rc
	}
	if err := o.run(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", toolName(tool), err)
		return 255
	}
	return 0
}

// toolName is the tool's name, for messages.
func toolName(tool Tool) string {
	if tool == RIOStream {
		return "riostream"
	}
	return "rstream"
}

// parse reads the command line into options. When the tool ends there
// (a bad command line) it returns ok false and the exit status.
func parse(tool Tool, args []string, stdout, stderr io.Writer) (options, int, bool) {
	o := options{tool: tool, port: 7471, buffer: defaultBuffer, inline: 64, iters: 1, count: 1000, size: 1000, stdout: stdout,
		connectTimout: 10 * time.Second}
	name, spec := toolName(tool), cli.Spec{Short: "s:b:f:B:i:I:C:S:p:k:T:"}
	if tool == RIOStream {
		spec = cli.Spec{Short: "s:b:f:B:i:I:C:S:p:T:"}
	}
	events, _ := cli.GetoptLong(args, spec)
	argv0 := name
	if len(args) > 0 {
		argv0 = args[0]
	}
	bad := func() int { fmt.Fprint(stdout, usage(tool, argv0)); return 1 }
	// refuse ends the tool as a bad command line does, with why on stderr.
	refuse := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "%s: "+format+"\n", append([]any{name}, a...)...)
		return 1
	}
	num := func(s string) (int, bool) {
		n, err := strconv.Atoi(s)
		return n, err == nil && n >= 0
	}
	var ok bool
	for _, e := range events {
		if e.Err != nil {
			return o, bad(), false
		}
		switch e.Opt {
		case 's':
			o.dst = e.Arg
		case 'b':
			o.src = e.Arg
		case 'f':
			// The tools' strncasecmp checks: ip* takes numeric addresses
			// (as this always does), gid* AF_IB ones (which rsocket
			// cannot), anything else (name too) warns and goes on.
			switch {
			case hasPrefixFold(e.Arg, "ip"):
			case hasPrefixFold(e.Arg, "gid"):
				return o, refuse("-f %s: AF_IB (gid) addresses are not supported", e.Arg), false
			default:
				fmt.Fprintln(stderr, "Warning: unknown address format")
			}
		case 'B':
			if o.buffer, ok = num(e.Arg); !ok {
				return o, bad(), false
			}
			// 0 leaves rsockets' SO_SNDBUF/SO_RCVBUF at the tools' 1<<19.
			// Below minBuffer the Go rsocket's rings cannot be made
			// (rdma-core's raises the send ring to 4096 under -B 1024 and
			// takes a receive ring as small as asked): refused, not raised.
			switch {
			case o.buffer == 0:
				o.buffer = defaultBuffer
			case o.buffer < minBuffer:
				return o, refuse("-B %s: below the %d bytes the Go rsocket's rings need", e.Arg, minBuffer), false
			}
		case 'i':
			if o.inline, ok = num(e.Arg); !ok {
				return o, bad(), false
			}
		case 'I':
			o.custom = true
			if o.iters, ok = num(e.Arg); !ok || o.iters == 0 {
				return o, bad(), false
			}
		case 'C':
			o.custom = true
			if o.count, ok = num(e.Arg); !ok || o.count == 0 {
				return o, bad(), false
			}
		case 'S':
			if hasPrefixFold(e.Arg, "all") {
				o.all = true
				break
			}
			o.custom = true
			if o.size, ok = num(e.Arg); !ok || o.size == 0 {
				return o, bad(), false
			}
		case 'p':
			if o.port, ok = num(e.Arg); !ok || o.port > 65535 {
				return o, bad(), false
			}
		case 'k':
			if o.keepalive, ok = num(e.Arg); !ok {
				return o, bad(), false
			}
		case 'T':
			switch testOpt(tool, e.Arg) {
			case 0:
				return o, bad(), false
			case 's':
				o.tcp = true
			case 'v':
				o.verify = true
			case 'f':
				return o, refuse("-T %s: fork mode is not supported", e.Arg), false
			}
		}
	}
	if o.all {
		o.sizes = AllSizes()
	} else {
		o.sizes = []int{64, 4096, 65536, 1 << 20}
	}
	return o, 0, true
}

func (o *options) run() error {
	if o.dst != "" {
		o.header()
	}
	l, err := o.listen()
	if err != nil {
		return err
	}
	if l != nil {
		defer l.Close()
		o.header()
	}
	if o.custom {
		return o.session(l, func(c net.Conn) error { return o.test(c, "custom", o.size, o.count, o.iters) })
	}
	if err := o.session(l, func(c net.Conn) error {
		for _, s := range o.sizes {
			if err := o.test(c, SizeStr(s)+"_lat", s, 1, sizeToCount(s)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	return o.session(l, func(c net.Conn) error {
		for _, s := range o.sizes {
			if err := o.test(c, SizeStr(s)+"_bw", s, sizeToCount(s), 1); err != nil {
				return err
			}
		}
		return nil
	})
}

func (o *options) header() {
	fmt.Fprintf(o.stdout, "%-10s%-8s%-8s%-8s%-8s%8s %10s%13s\n", "name", "bytes", "xfers", "iters", "total", "time", "Gb/sec", "usec/xfer")
}

func (o *options) listen() (net.Listener, error) {
	if o.dst != "" {
		return nil, nil
	}
	addr := net.JoinHostPort(o.src, strconv.Itoa(o.port))
	if o.src == "" {
		addr = "0.0.0.0:" + strconv.Itoa(o.port)
	}
	if o.tcp {
		lc := net.ListenConfig{KeepAlive: o.keepaliveTime()}
		return lc.Listen(context.Background(), "tcp", addr)
	}
	lc := rsocket.ListenConfig{Config: o.config(), Backlog: 1}
	return lc.Listen(context.Background(), addr)
}

func (o *options) config() rsocket.Config {
	cfg := rsocket.Config{SendBuffer: 2 * o.buffer, RecvBuffer: 2 * o.buffer, Inline: o.inline,
		KeepAlive: time.Duration(o.keepalive) * time.Second}
	if o.tool == RIOStream {
		cfg.IOMapSize = 1 // riostream's RDMA_IOMAPSIZE
	}
	return cfg
}

// keepaliveTime is -k as a duration: -1 (off) for net's configs when 0.
func (o *options) keepaliveTime() time.Duration {
	if o.keepalive == 0 {
		return -1
	}
	return time.Duration(o.keepalive) * time.Second
}

// showKeepalive prints what rstream prints after setting -k on a socket.
func (o *options) showKeepalive() {
	if o.keepalive != 0 {
		fmt.Fprintf(o.stdout, "Keepalive: ON\n  time: %d\n", o.keepalive)
	}
}

// session makes one connection (accepts one, on the server) and runs f.
func (o *options) session(l net.Listener, f func(net.Conn) error) error {
	var c net.Conn
	var err error
	if l != nil {
		o.showKeepalive() // rstream sets it on the listener before each accept
		if c, err = l.Accept(); err == nil {
			o.showKeepalive()
		}
	} else {
		c, err = o.dial()
	}
	if err != nil {
		return err
	}
	defer c.Close()
	if err := f(c); err != nil {
		return err
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	return nil
}

func (o *options) dial() (net.Conn, error) {
	addr := net.JoinHostPort(o.dst, strconv.Itoa(o.port))
	o.showKeepalive()
	// Both bind -b, as rstream's client_connect does (C's bind takes the
	// port too; these take any).
	var src netip.AddrPort
	if o.src != "" {
		a, err := netip.ParseAddr(o.src)
		if err != nil {
			return nil, fmt.Errorf("-b %s: %w", o.src, err)
		}
		src = netip.AddrPortFrom(a, 0)
	}
	if o.tcp {
		d := net.Dialer{KeepAlive: o.keepaliveTime()}
		if src.IsValid() {
			d.LocalAddr = net.TCPAddrFromAddrPort(src)
		}
		return d.Dial("tcp", addr)
	}
	d := rsocket.Dialer{Config: o.config(), LocalAddr: src}
	ctx, cancel := context.WithTimeout(context.Background(), o.connectTimout)
	defer cancel()
	return d.Dial(ctx, addr)
}

// test runs one rstream test: a 16-byte sync each way, then per
// iteration count transfers from the client and count back.
func (o *options) test(c net.Conn, name string, size, count, iters int) error {
	if o.tool == RIOStream {
		return o.ioTest(c.(*rsocket.Conn), name, size, count, iters)
	}
	if len(o.buf) < max(size, 16) {
		o.buf = make([]byte, max(size, 16))
	}
	client := o.dst != ""
	order := []bool{client, !client}
	for _, send := range order {
		if err := o.xfer(c, send, 16); err != nil {
			return err
		}
	}
	start := time.Now()
	for i := 0; i < iters; i++ {
		for _, send := range order {
			for j := 0; j < count; j++ {
				if err := o.xfer(c, send, size); err != nil {
					return err
				}
			}
		}
	}
	o.show(name, time.Since(start), size, count, iters)
	return nil
}

// show prints a test's row.
func (o *options) show(name string, d time.Duration, size, count, iters int) {
	usec := float64(d.Microseconds())
	if usec == 0 {
		usec = 1
	}
	total := int64(iters) * int64(count) * int64(size) * 2
	fmt.Fprintf(o.stdout, "%-10s%-8s%-8s%-8s%-8s%8.2fs%10.2f%11.2f\n", name, SizeStr(int64(size)), cntStr(int64(count)),
		cntStr(int64(iters)), SizeStr(total), usec/1e6, float64(total)*8/(1000*usec), usec/float64(iters)/float64(count*2))
}

// xfer sends or receives size bytes, with rstream's pattern under -T v.
func (o *options) xfer(c net.Conn, send bool, size int) error {
	b := o.buf[:size]
	if send {
		if o.verify {
			for i := range b {
				b[i] = o.txSeq
				o.txSeq++
			}
		}
		_, err := c.Write(b)
		return err
	}
	if _, err := io.ReadFull(c, b); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("rrecv: %w", err)
		}
		return err
	}
	if o.verify {
		for i := range b {
			if b[i] != o.rxSeq {
				fmt.Fprintf(o.stdout, "data verification failed byte %d\n", o.rxTotal+int64(i))
				return errors.New("data verification failed")
			}
			o.rxSeq++
		}
		o.rxTotal += int64(len(b))
	}
	return nil
}

// AllSizes is rstream's -S all list: 64, then 2^k and 2^k + 2^(k-1) for
// k = 7..22 (128, 192 ... 4 MiB, 6 MiB).
func AllSizes() []int {
	s := []int{64}
	for k := 7; k <= 22; k++ {
		s = append(s, 1<<k, 1<<k+1<<(k-1))
	}
	return s
}

func sizeToCount(size int) int {
	switch {
	case size >= 1<<20:
		return 100
	case size >= 1<<16:
		return 1000
	case size >= 1<<10:
		return 10000
	}
	return 100000
}

// SizeStr prints bytes as rstream's size_str: binary units, truncated,
// one decimal below 10.
func SizeStr[T int | int64](v T) string {
	n := int64(v)
	base, unit := int64(1), ""
	switch {
	case n >= 1<<30:
		base, unit = 1<<30, "g"
	case n >= 1<<20:
		base, unit = 1<<20, "m"
	case n >= 1<<10:
		base, unit = 1<<10, "k"
	}
	if n/base < 10 {
		if frac := n % base * 10 / base; frac != 0 {
			return fmt.Sprintf("%d.%d%s", n/base, frac, unit)
		}
	}
	return fmt.Sprintf("%d%s", n/base, unit)
}

// cntStr prints a count as rstream's cnt_str: decimal units, truncated.
func cntStr(n int64) string {
	switch {
	case n >= 1000000000:
		return fmt.Sprintf("%db", n/1000000000)
	case n >= 1000000:
		return fmt.Sprintf("%dm", n/1000000)
	case n >= 1000:
		return fmt.Sprintf("%dk", n/1000)
	}
	return strconv.FormatInt(n, 10)
}
