package main

import (
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"strconv"

	"github.com/goverbs/goverbs/internal/cli"
)

// rping's fixed values (librdmacm/examples/rping.c, rdma-core 44).
const (
	defaultPort = 7174
	defaultSize = 64
	// minSize is RPING_MIN_BUFSIZE: sizeof("INT_MAX") + sizeof("rdma-ping-%d: ")
	// (limits.h is not included, so the macro name itself is stringified).
	minSize = 23
	// bufSize is RPING_BUFSIZE: sizes up to one less are accepted, and the
	// message names bufSize as the top of the range.
	bufSize = 64 * 1024
	// sqDepth is RPING_SQ_DEPTH; the CQ has twice as many entries.
	sqDepth = 16
	// backlog is the server's listen backlog.
	backlog = 3
	// resolveTimeoutMS is the client's address resolution timeout, and
	// then its route resolution timeout (rping's 2000 to each).
	resolveTimeoutMS = 2000
	// exitUsage is EINVAL, what rping returns for a bad command line.
	exitUsage = 22
	// exitFailure is exit(-1).
	exitFailure = 255
)

// config is a parsed command line.
type config struct {
	prog       string
	server     bool       // -s (else -c)
	addr       netip.Addr // -a: server address to bind or to connect to
	source     netip.Addr // -I: client source address
	port       uint16     // -p
	persistent bool       // -P
	count      int        // -C: 0 = forever
	size       int        // -S
	verbose    bool       // -v
	validate   bool       // -V
	debug      bool       // -d
	selfQP     bool       // -q
}

var spec = cli.Spec{Short: "a:I:Pp:C:S:t:scvVdq"}

// badCommandLine is a command line rping refuses: msg goes to stderr
// (when not empty), the usage to stdout when usage is set, and the exit
// status is code.
type badCommandLine struct {
	msg   string
	usage bool
	code  int
}

func (e *badCommandLine) Error() string { return e.msg }

// parseArgs reads the command line as rping's getopt loop does. Where rping
// would go on with what atoi made of a malformed number ("-C 12abc", "-p x"),
// this refuses it with the usage.
func parseArgs(args []string) (config, error) {
	prog := "rping"
	if len(args) > 0 {
		args = append([]string{filepath.Base(args[0])}, args[1:]...)
		prog = args[0]
	} else {
		args = []string{prog}
	}
	c := config{prog: prog, port: defaultPort, size: defaultSize, addr: netip.IPv4Unspecified()}
	role := -1
	events, operands := cli.GetoptLong(args, spec)
	usageErr := func(msg string) error { return &badCommandLine{msg: msg, usage: true, code: exitUsage} }
	num := func(ev cli.Event) (int, error) {
		v, err := strconv.Atoi(ev.Arg)
		if err != nil {
			return 0, usageErr(fmt.Sprintf("%s: %s %q: not a decimal number", prog, ev.Name, ev.Arg))
		}
		return v, nil
	}
	for _, ev := range events {
		if ev.Err != nil {
			// rping sets opterr = 0: no message, only the usage.
			return c, usageErr("")
		}
		var err error
		switch ev.Opt {
		case 'a', 'I':
			var a netip.Addr
			if a, err = netip.ParseAddr(ev.Arg); err != nil {
				// getaddrinfo would resolve a host name; rping's
				// message, on stdout, then its status for EAI_NONAME.
				return c, &badCommandLine{msg: "getaddrinfo failed (Name or service not known) - invalid hostname or IP address", code: 254}
			}
			a = a.Unmap()
			if ev.Opt == 'a' {
				c.addr = a
			} else {
				c.source = a
			}
		case 'P':
			c.persistent = true
		case 'p':
			var v int
			if v, err = num(ev); err == nil {
				if v < 0 || v > 65535 {
					err = usageErr(fmt.Sprintf("%s: -p %d: not a port", prog, v))
				}
				c.port = uint16(v)
			}
		case 's':
			role = 1
		case 'c':
			role = 0
		case 'S':
			if c.size, err = num(ev); err == nil && (c.size < minSize || c.size > bufSize-1) {
				err = &badCommandLine{msg: fmt.Sprintf("Invalid size %d (valid range is %d to %d)", c.size, minSize, bufSize), code: exitUsage}
			}
		case 'C':
			if c.count, err = num(ev); err == nil && c.count < 0 {
				err = &badCommandLine{msg: fmt.Sprintf("Invalid count %d", c.count), code: exitUsage}
			}
		case 'v':
			c.verbose = true
		case 'V':
			c.validate = true
		case 'd':
			c.debug = true
		case 'q':
			c.selfQP = true
		default: // -t is in rping's optstring but has no case: the usage
			return c, usageErr("")
		}
		if err != nil {
			return c, err
		}
	}
	if len(operands) > 0 {
		return c, usageErr(fmt.Sprintf("%s: unexpected operand %q", prog, operands[0]))
	}
	if role < 0 {
		return c, usageErr("")
	}
	c.server = role == 1
	if c.source.IsValid() && c.source.Is4() != c.addr.Is4() {
		return c, usageErr(fmt.Sprintf("%s: -I %v and -a %v are of different address families", prog, c.source, c.addr))
	}
	return c, nil
}

// usage is rping's usage text.
func usage(w io.Writer, prog string) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("%s -s [-vVd] [-S size] [-C count] [-a addr] [-p port]\n", prog)
	p("%s -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]\n", prog)
	p("\t-c\t\tclient side\n")
	p("\t-I\t\tSource address to bind to for client.\n")
	p("\t-s\t\tserver side.  To bind to any address with IPv6 use -a ::0\n")
	p("\t-v\t\tdisplay ping data to stdout\n")
	p("\t-V\t\tvalidate ping data\n")
	p("\t-d\t\tdebug printfs\n")
	p("\t-S size \tping data size\n")
	p("\t-C count\tping count times\n")
	p("\t-a addr\t\taddress\n")
	p("\t-p port\t\tport\n")
	p("\t-P\t\tpersistent server mode allowing multiple connections\n")
	p("\t-q\t\tuse self-created, self-modified QP\n")
}
