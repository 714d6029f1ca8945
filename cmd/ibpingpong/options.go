package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"

	"github.com/goverbs/goverbs/internal/cli"
	"github.com/goverbs/goverbs/uverbs"
)

// kind is the pingpong variant: which of rdma-core's four examples the run
// is wire-compatible with.
type kind int

const (
	kindRC  kind = iota // ibv_rc_pingpong
	kindUC              // ibv_uc_pingpong
	kindUD              // ibv_ud_pingpong
	kindSRQ             // ibv_srq_pingpong: RC QPs receiving from one SRQ
)

var kindNames = [...]string{kindRC: "rc", kindUC: "uc", kindUD: "ud", kindSRQ: "srq"}

func (k kind) String() string { return kindNames[k] }

// The C examples' fixed values.
const (
	defaultTCPPort = 18515
	maxQP          = 256 // srq_pingpong always exchanges this many addresses
	udGRHBytes     = 40  // UD receives start with the 40-byte GRH
	udQkey         = 0x11111111
	wridRecv       = 1 // PINGPONG_RECV_WRID
	wridSend       = 2 // PINGPONG_SEND_WRID
)

// config is a parsed command line.
type config struct {
	kind    kind
	prog    string // argv[0], for messages
	tcpPort int    // -p
	ibDev   string // -d; "" is the first device
	ibPort  uint8  // -i
	size    int    // -s
	mtu     uverbs.MTU
	rxDepth int // -r
	iters   int // -n
	sl      uint8
	events  bool // -e
	gidIdx  int  // -g; -1 sends without a GRH
	check   bool // -c
	numQP   int  // -q (srq)
	server  string
}

// defaults returns the C example's defaults for k.
func defaults(k kind) config {
	c := config{kind: k, tcpPort: defaultTCPPort, ibPort: 1, size: 4096, mtu: uverbs.MTU1024,
		rxDepth: 500, iters: 1000, gidIdx: -1, numQP: 1}
	switch k {
	case kindUD:
		c.size = 1024
	case kindSRQ:
		c.numQP = 16
	}
	return c
}

// spec is the union of the four examples' options. -t picks the example;
// in ibv_rc_pingpong it meant --ts (completion timestamps), which rxe
// cannot give, so --ts stays a long option only.
var spec = cli.Spec{
	Short: "t:p:d:i:s:m:r:n:l:eg:cq:oOPjNh",
	Long: []cli.LongOption{
		{Name: "transport", Arg: cli.RequiredArgument, Val: 't'},
		{Name: "port", Arg: cli.RequiredArgument, Val: 'p'},
		{Name: "ib-dev", Arg: cli.RequiredArgument, Val: 'd'},
		{Name: "ib-port", Arg: cli.RequiredArgument, Val: 'i'},
		{Name: "size", Arg: cli.RequiredArgument, Val: 's'},
		{Name: "mtu", Arg: cli.RequiredArgument, Val: 'm'},
		{Name: "rx-depth", Arg: cli.RequiredArgument, Val: 'r'},
		{Name: "iters", Arg: cli.RequiredArgument, Val: 'n'},
		{Name: "sl", Arg: cli.RequiredArgument, Val: 'l'},
		{Name: "events", Arg: cli.NoArgument, Val: 'e'},
		{Name: "gid-idx", Arg: cli.RequiredArgument, Val: 'g'},
		{Name: "chk", Arg: cli.NoArgument, Val: 'c'},
		{Name: "num-qp", Arg: cli.RequiredArgument, Val: 'q'},
		{Name: "odp", Arg: cli.NoArgument, Val: 'o'},
		{Name: "iodp", Arg: cli.NoArgument, Val: 'O'},
		{Name: "prefetch", Arg: cli.NoArgument, Val: 'P'},
		{Name: "ts", Arg: cli.NoArgument, Val: 'T'},
		{Name: "dm", Arg: cli.NoArgument, Val: 'j'},
		{Name: "new_send", Arg: cli.NoArgument, Val: 'N'},
		{Name: "help", Arg: cli.NoArgument, Val: 'h'},
	},
}

// ErrUsage is wrapped by every command-line error.
var ErrUsage = cli.ErrUsage

// UsageError is a command line that cannot run: run prints it and the
// usage and exits 1, as the C tools do.
type UsageError = cli.UsageError

// errHelp is returned for -h/--help: usage on stdout, exit 0.
var errHelp = errors.New("help requested")

// kindFromProg guesses the variant from the program name, so that a link
// named ibv_ud_pingpong behaves as ud without -t.
func kindFromProg(prog string) kind {
	base := filepath.Base(prog)
	for k, n := range kindNames {
		if base == "ibv_"+n+"_pingpong" || base == n+"_pingpong" {
			return kind(k)
		}
	}
	return kindRC
}

func parseKind(s string) (kind, bool) {
	for k, n := range kindNames {
		if strings.EqualFold(s, n) {
			return kind(k), true
		}
	}
	return 0, false
}

// options valid per variant (the C examples' optstrings, less -t).
var validFor = map[kind]string{
	kindRC:  "pdismrnlegcoOPTjN",
	kindUC:  "pdismrnlegc",
	kindUD:  "pdisrnlegc",
	kindSRQ: "pdismqrnlegco",
}

// unsupported are the C options this program recognizes but does not
// implement, with the reason.
var unsupported = map[byte]string{
	'o': "on-demand paging is not supported",
	'O': "implicit on-demand paging is not supported",
	'P': "MR prefetch (on-demand paging) is not supported",
	'T': "completion timestamps are not supported",
	'j': "device memory is not supported",
}

// parseArgs turns a command line into a config, checking what the C
// examples check (and saying so as they do) and, beyond them, that every
// number is well formed and in range. With an error, the config still has
// the program name and the variant, for the usage.
func parseArgs(args []string) (config, error) {
	prog := "ibpingpong"
	if len(args) > 0 {
		prog = args[0]
	} else {
		args = []string{prog}
	}
	events, operands := cli.GetoptLong(args, spec)
	k := kindFromProg(prog)
	for _, ev := range events {
		if ev.Opt == 't' {
			var ok bool
			if k, ok = parseKind(ev.Arg); !ok {
				return config{prog: prog, kind: k}, &UsageError{Option: ev.Name, Msg: fmt.Sprintf("%q is not one of rc, uc, ud, srq", ev.Arg)}
			}
		}
	}
	c := defaults(k)
	c.prog = prog
	for _, ev := range events {
		if ev.Err != nil {
			// glibc's message names the option itself.
			return c, &UsageError{Err: ev.Err}
		}
		if ev.Opt == 'h' {
			return c, errHelp
		}
		if ev.Opt == 't' {
			continue
		}
		if !strings.ContainsRune(validFor[k], rune(ev.Opt)) {
			return c, &UsageError{Option: ev.Name, Msg: fmt.Sprintf("not an option of ibv_%s_pingpong", k)}
		}
		if why, ok := unsupported[ev.Opt]; ok {
			return c, &UsageError{Option: ev.Name, Msg: why}
		}
		num := func(min, max int64) (int, error) {
			v, err := cli.ParseInt(ev.Arg, min, max)
			if err != nil {
				return 0, &UsageError{Option: ev.Name, Err: err}
			}
			return int(v), nil
		}
		var err error
		switch ev.Opt {
		case 'p':
			c.tcpPort, err = num(0, 65535)
		case 'd':
			c.ibDev = ev.Arg
		case 'i':
			var v int
			v, err = num(1, 255)
			c.ibPort = uint8(v)
		case 's':
			// The buffer is sized in int, UD's with 40 bytes more.
			c.size, err = num(1, math.MaxInt32-udGRHBytes)
		case 'm':
			var v int
			if v, err = num(256, 4096); err == nil {
				if c.mtu = mtuEnum(v); c.mtu == 0 {
					err = &UsageError{Option: ev.Name, Msg: fmt.Sprintf("%d is not a path MTU (256, 512, 1024, 2048 or 4096)", v)}
				}
			}
		case 'r':
			c.rxDepth, err = num(1, math.MaxInt32-maxQP)
		case 'n':
			c.iters, err = num(1, math.MaxInt32)
		case 'l':
			var v int
			v, err = num(0, 15)
			c.sl = uint8(v)
		case 'e':
			c.events = true
		case 'g':
			c.gidIdx, err = num(-1, 255)
		case 'c':
			c.check = true
		case 'q':
			c.numQP, err = num(1, math.MaxInt32)
		case 'N':
			// The new post-send API posts the same work request: the
			// traffic does not change, so there is nothing to do.
		}
		if err != nil {
			return c, err
		}
	}
	switch {
	case len(operands) == 1:
		c.server = operands[0]
	case len(operands) > 1:
		return c, &UsageError{Msg: fmt.Sprintf("one server name at most, got %q", operands)}
	}
	if k == kindSRQ {
		if c.numQP > c.rxDepth {
			return c, &UsageError{Msg: fmt.Sprintf("rx_depth %d is too small for %d QPs -- must have at least one receive per QP.", c.rxDepth, c.numQP)}
		}
		if c.numQP >= maxQP {
			return c, &UsageError{Msg: fmt.Sprintf("num_qp %d must be less than %d", c.numQP, maxQP-1)}
		}
	}
	return c, nil
}

// mtuEnum is pp_mtu_to_enum: the enum ibv_mtu of a size in bytes, 0 for
// none.
func mtuEnum(bytes int) uverbs.MTU {
	switch bytes {
	case 256:
		return uverbs.MTU256
	case 512:
		return uverbs.MTU512
	case 1024:
		return uverbs.MTU1024
	case 2048:
		return uverbs.MTU2048
	case 4096:
		return uverbs.MTU4096
	}
	return 0
}

// usage prints the options of the variant (the C example's list, with -t
// added).
func usage(w io.Writer, prog string, k kind) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("Usage:\n")
	p("  %s [-t %s] [options]          start a server and wait for a connection\n", prog, k)
	p("  %s [-t %s] [options] <host>   connect to the server at <host>\n", prog, k)
	p("\nOptions:\n")
	p("  -t, --transport=<t>    rc, uc, ud or srq: as ibv_<t>_pingpong, and wire-compatible (default %s)\n", kindFromProg(prog))
	p("  -p, --port=<port>      listen on/connect to TCP port <port> (default %d)\n", defaultTCPPort)
	p("  -d, --ib-dev=<dev>     use RDMA device <dev> (default: the first one found)\n")
	p("  -i, --ib-port=<port>   use port <port> of the device (default 1)\n")
	p("  -s, --size=<size>      size of the messages exchanged (default %d)\n", defaults(k).size)
	if k != kindUD {
		p("  -m, --mtu=<size>       path MTU (default 1024)\n")
	}
	if k == kindSRQ {
		p("  -q, --num-qp=<num>     number of QPs to use (default 16)\n")
	}
	p("  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)\n")
	if k == kindSRQ {
		p("  -n, --iters=<iters>    number of exchanges, all QPs together (default 1000)\n")
	} else {
		p("  -n, --iters=<iters>    number of exchanges (default 1000)\n")
	}
	p("  -l, --sl=<sl>          service level (default 0)\n")
	p("  -e, --events           wait for completion events (default: busy polling)\n")
	p("  -g, --gid-idx=<index>  local port GID index (RoCE needs one)\n")
	p("  -c, --chk              validate the received buffer\n")
	p("  -h, --help             print this help\n")
}
