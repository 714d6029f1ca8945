// Command rstream is rdma-core's rstream (librdmacm's rsocket stream test)
// in Go, over package rsocket: either side may be the C tool.
//
//	rstream -b 10.99.0.1 -T b            # server: serves one client run
//	rstream -s 10.99.0.1 -T b            # client
//	rstream -s 10.99.0.1 -S 4096 -C 100 -I 10 -T b -T v
//
// Options (rstream's): -s server address (client mode), -b bind address,
// -B buffer size (rings of twice it, as SO_SNDBUF/SO_RCVBUF), -i inline
// size of the latency tests, -I iterations, -C transfers, -S size|all,
// -p port (7471), -T s (kernel TCP instead), -T b / -T n (blocking or
// not: Go's calls always block, so both run the same), -T v (verify the
// data pattern), -T a / -T r (accepted, no effect), -f ip|ipv6 (numeric
// addresses only), -k seconds (keepalive on the listener and each
// connection, printed as rstream does; 0 off: rsocket.Config.KeepAlive,
// TCP keepalive under -T s).
//
// The output is rstream's table: name, bytes, xfers, iters, total, time,
// Gb/sec (both directions) and usec/xfer (one way).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/goverbs/goverbs/internal/cli"
	"github.com/goverbs/goverbs/rsocket"
)

func main() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) }

type options struct {
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
	buf           []byte
	connectTimout time.Duration
	keepalive     int // seconds; 0 off
}

const usage = `usage: rstream
	[-s server_address]
	[-b bind_address]
	[-f address_format]
	    name, ip, ipv6, or gid
	[-B buffer_size]
	[-i inline_size]
	[-I iterations]
	[-C transfer_count]
	[-S transfer_size or all]
	[-p port_number]
	[-k keepalive_time]
	[-T test_option]
	    s|sockets - use standard tcp/ip sockets
	    a|async - asynchronous operation (use poll)
	    b|blocking - use blocking calls
	    f|fork - fork server processing
	    n|nonblocking - use nonblocking calls
	    r|resolve - use rdma cm to resolve address
	    v|verify - verify data
`

// run runs rstream with args (args[0] the program name).
func run(args []string, stdout, stderr io.Writer) int {
	o := options{port: 7471, buffer: 1 << 19, inline: 64, iters: 1, count: 1000, size: 1000, stdout: stdout,
		connectTimout: 10 * time.Second}
	spec := cli.Spec{Short: "s:b:f:B:i:I:C:S:p:k:T:"}
	events, _ := cli.GetoptLong(args, spec)
	bad := func() int { fmt.Fprint(stdout, usage); return 1 }
	num := func(s string) (int, bool) {
		n, err := strconv.Atoi(s)
		return n, err == nil && n >= 0
	}
	var ok bool
	for _, e := range events {
		if e.Err != nil {
			return bad()
		}
		switch e.Opt {
		case 's':
			o.dst = e.Arg
		case 'b':
			o.src = e.Arg
		case 'f':
			if !strings.HasPrefix(e.Arg, "ip") && e.Arg != "name" {
				fmt.Fprintln(stdout, "Warning: unknown address format")
			}
		case 'B':
			if o.buffer, ok = num(e.Arg); !ok || o.buffer < 2048 {
				return bad()
			}
		case 'i':
			if o.inline, ok = num(e.Arg); !ok {
				return bad()
			}
		case 'I':
			o.custom = true
			if o.iters, ok = num(e.Arg); !ok || o.iters == 0 {
				return bad()
			}
		case 'C':
			o.custom = true
			if o.count, ok = num(e.Arg); !ok || o.count == 0 {
				return bad()
			}
		case 'S':
			if e.Arg == "all" {
				o.all = true
				break
			}
			o.custom = true
			if o.size, ok = num(e.Arg); !ok || o.size == 0 {
				return bad()
			}
		case 'p':
			if o.port, ok = num(e.Arg); !ok || o.port > 65535 {
				return bad()
			}
		case 'k':
			if o.keepalive, ok = num(e.Arg); !ok {
				return bad()
			}
		case 'T':
			switch e.Arg {
			case "s", "socket":
				o.tcp = true
			case "v", "verify":
				o.verify = true
			case "a", "async", "b", "block", "n", "nonblock", "r", "resolve":
			default:
				return bad()
			}
		}
	}
	if o.all {
		o.sizes = allSizes()
	} else {
		o.sizes = []int{64, 4096, 65536, 1 << 20}
	}
	if err := o.run(); err != nil {
		fmt.Fprintf(stderr, "rstream: %v\n", err)
		return 255
	}
	return 0
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
			if err := o.test(c, sizeStr(s)+"_lat", s, 1, sizeToCount(s)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	return o.session(l, func(c net.Conn) error {
		for _, s := range o.sizes {
			if err := o.test(c, sizeStr(s)+"_bw", s, sizeToCount(s), 1); err != nil {
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
	return rsocket.Config{SendBuffer: 2 * o.buffer, RecvBuffer: 2 * o.buffer, Inline: o.inline,
		KeepAlive: time.Duration(o.keepalive) * time.Second}
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
	if o.tcp {
		d := net.Dialer{KeepAlive: o.keepaliveTime()}
		return d.Dial("tcp", addr)
	}
	d := rsocket.Dialer{Config: o.config()}
	if o.src != "" {
		a, err := netip.ParseAddr(o.src)
		if err != nil {
			return nil, fmt.Errorf("-b %s: %w", o.src, err)
		}
		d.LocalAddr = netip.AddrPortFrom(a, 0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.connectTimout)
	defer cancel()
	return d.Dial(ctx, addr)
}

// test runs one rstream test: a 16-byte sync each way, then per
// iteration count transfers from the client and count back.
func (o *options) test(c net.Conn, name string, size, count, iters int) error {
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
	usec := float64(time.Since(start).Microseconds())
	if usec == 0 {
		usec = 1
	}
	total := int64(iters) * int64(count) * int64(size) * 2
	fmt.Fprintf(o.stdout, "%-10s%-8s%-8s%-8s%-8s%8.2fs%10.2f%11.2f\n", name, sizeStr(int64(size)), cntStr(int64(count)),
		cntStr(int64(iters)), sizeStr(total), usec/1e6, float64(total)*8/(1000*usec), usec/float64(iters)/float64(count*2))
	return nil
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
				fmt.Fprintf(o.stdout, "data verification failed byte %d\n", i)
				return errors.New("data verification failed")
			}
			o.rxSeq++
		}
	}
	return nil
}

// allSizes is rstream's -S all list: 64, then 2^k and 2^k + 2^(k-1) for
// k = 7..22 (128, 192 ... 4 MiB, 6 MiB).
func allSizes() []int {
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

// sizeStr prints bytes as rstream's size_str: binary units, truncated,
// one decimal below 10.
func sizeStr[T int | int64](v T) string {
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
