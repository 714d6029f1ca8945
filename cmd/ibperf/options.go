package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/goverbs/goverbs/internal/cli"
)

// verb is what a test measures: perftest's VerbType.
type verb int

const (
	verbSend verb = iota
	verbWrite
	verbRead
	verbAtomic
)

// verbNames are perftest's testsStr, as the test header prints them.
var verbNames = [...]string{verbSend: "Send", verbWrite: "RDMA_Write", verbRead: "RDMA_Read", verbAtomic: "Atomic"}

// kind is latency or bandwidth: perftest's TestType (LAT, BW).
type kind int

const (
	kindLat kind = iota
	kindBW
)

// connType is the QP transport (-c).
type connType int

const (
	connRC connType = iota
	connUC
	connUD
)

var connNames = [...]string{connRC: "RC", connUC: "UC", connUD: "UD"}

func (c connType) String() string { return connNames[c] }

// atomicType is -A.
type atomicType int

const (
	atomicCAS atomicType = iota // CMP_AND_SWAP
	atomicFAA                   // FETCH_AND_ADD, the default
)

var atomicNames = [...]string{atomicCAS: "CMP_AND_SWAP", atomicFAA: "FETCH_AND_ADD"}

// test is one of the eight tests: ib_<name>.
type test struct {
	name string // "write_lat"
	verb verb
	kind kind
}

var tests = []test{
	{"write_lat", verbWrite, kindLat}, {"write_bw", verbWrite, kindBW},
	{"send_lat", verbSend, kindLat}, {"send_bw", verbSend, kindBW},
	{"read_lat", verbRead, kindLat}, {"read_bw", verbRead, kindBW},
	{"atomic_lat", verbAtomic, kindLat}, {"atomic_bw", verbAtomic, kindBW},
}

func findTest(name string) (test, bool) {
	name = strings.TrimPrefix(filepath.Base(name), "ib_")
	for _, t := range tests {
		if t.name == name {
			return t, true
		}
	}
	return test{}, false
}

// perftest's fixed values (perftest_parameters.h, perftest 4.5-0.17).
const (
	defaultTCPPort      = 18515
	defSizeBW           = 65536
	defSizeLat          = 2
	defSizeAtomic       = 8
	defIters            = 1000
	defItersWriteBW     = 5000
	defTxBW             = 128
	defTxLat            = 1
	defQPTimeout        = 14
	defRxRDMA           = 1
	defRxSend           = 512
	defCQMod            = 100
	minIters            = 5
	maxIters            = 100000000
	maxTx               = 15000
	maxRx               = 16384
	maxCQMod            = 1024
	maxInline           = 912
	maxGIDIndex         = 64
	maxQPs              = 16384
	maxSize             = 8388608 // -a runs up to 2^23
	ucMaxRx             = 16000
	msgSizeCQModLimit   = 8192 // above it perftest signals every message
	defInlineWrite      = 220
	defInlineSendRCUC   = 236
	defInlineSendUD     = 188
	defQkey             = 0x11111111
	udGRHBytes          = 40 // UD_ADDITION
	defCacheLine        = 64
	defPageSize         = 4096
	minRNRTimer         = 12
	defHopLimit         = 0xff // the GRH hop limit perftest sets on the path
	defDuration         = 5    // DEF_DURATION: the seconds that -f is checked against without -D
	defMargin           = -1   // DEF_INIT_MARGIN: a quarter of the duration
	perftestVersion     = "6.06"
	oldestPeerVersion   = 5.70
	defaultPostListGo   = 32 // ibperf's own bandwidth default: one doorbell per 32 messages
	defaultInlineGoSize = 220
)

// config is a parsed command line: perftest_parameters, the part that
// matters to the eight tests.
type config struct {
	prog   string
	test   test
	server string // the operand: a client connects to it; "" is the server

	tcpPort    int
	ibDev      string
	ibPort     uint8
	mtu        int // bytes; 0: the port's active MTU
	size       int
	reqSize    bool
	iters      int
	txDepth    int
	rxDepth    int
	qpTimeout  uint8
	sl         uint8
	gidIdx     int // -1: chosen (RoCE) or none (IB)
	useGIDUser bool
	all        bool // -a
	cpuFreqF   bool // -F: accepted, as the clock is calibrated anyway
	conn       connType
	numQPs     int
	inline     int // -1: the default
	reqInline  bool
	outReads   int
	atomic     atomicType
	postList   int
	reqPost    bool
	cqMod      int
	reqCQMod   bool
	duration   int // -D seconds; 0: iterations
	margin     int // -f seconds at each end of a duration run left out of the sample; -1: duration/4
	gbits      bool
	noPeak     bool
	duplex     bool // -b: both sides send (bw tests)
	events     bool // -e: wait for completions on a completion channel
	infinite   bool // --run_infinitely: a report every duration seconds, until killed
	rdmaCM     bool // -R: the QPs are connected by rdma_cm, over an rdma_cm control connection
	lockThread bool // ibperf only: lock the polling goroutine to its OS thread
	noYield    bool // ibperf only: busy-wait without yielding (for measuring what yielding is worth)
}

// defaults is init_perftest_params for t.
func defaults(t test) config {
	c := config{test: t, tcpPort: defaultTCPPort, ibPort: 1, size: defSizeLat, txDepth: defTxLat,
		qpTimeout: defQPTimeout, gidIdx: -1, numQPs: 1, inline: -1, rxDepth: defRxRDMA,
		cqMod: defCQMod, iters: defIters, postList: 1, atomic: atomicFAA, margin: defMargin}
	if t.kind == kindBW {
		c.size, c.txDepth = defSizeBW, defTxBW
	}
	if t.verb == verbSend {
		c.rxDepth = defRxSend
	}
	if t.kind == kindBW && t.verb == verbWrite {
		c.iters = defItersWriteBW
	}
	if t.verb == verbAtomic {
		c.size = defSizeAtomic
	}
	return c
}

// ErrUsage is wrapped by every command-line error.
var ErrUsage = cli.ErrUsage

// UsageError is a command line that cannot run: run prints it and the
// usage and exits 1, as the C tools do.
type UsageError = cli.UsageError

var (
	errHelp    = errors.New("help requested")
	errVersion = errors.New("version requested")
)

// Values of the long options that have no short letter (perftest sets a
// flag variable for each; distinct values keep glibc's ambiguity rules,
// which compare the flag pointer too).
const (
	optReportGbits byte = 0x80 + iota
	optRunInfinitely
	optLockThread
	optNoYield
	optFirstOtherFlag // the rest, refused
)

// flagOnly are perftest's flag-style long options, all recognized so that
// abbreviations resolve as they do in perftest; those ibperf does not
// implement are refused by name.
var flagOnly = []struct {
	name string
	arg  cli.ArgKind
}{
	{"force-link", 1}, {"remote_mac", 1}, {"local_mac", 1}, {"remote_ip", 1}, {"local_ip", 1},
	{"remote_port", 1}, {"local_port", 1}, {"use-srq", 0}, {"report-both", 0}, {"reversed", 0},
	{"pkey_index", 1}, {"inline_recv", 1}, {"tcp", 0}, {"burst_size", 1}, {"typical_pkt_size", 1},
	{"rate_limit", 1}, {"rate_limit_type", 1}, {"rate_units", 1}, {"output", 1}, {"cpu_util", 0},
	{"out_json", 0}, {"out_json_file", 1}, {"latency_gap", 1}, {"flow_label", 1}, {"retry_count", 1},
	{"dont_xchg_versions", 0}, {"use_cuda", 1}, {"use_cuda_bus_id", 1}, {"use_rocm", 1}, {"mmap", 1},
	{"mmap-offset", 1}, {"ipv6", 0}, {"raw_ipv6", 0}, {"report-per-port", 0}, {"odp", 0},
	{"use_hugepages", 0}, {"use_old_post_send", 0}, {"promiscuous", 0}, {"sniffer", 0}, {"raw_mcast", 0},
	{"mr_per_qp", 0}, {"dlid", 1}, {"tclass", 1}, {"wait_destroy", 1}, {"flows", 1}, {"flows_burst", 1},
	{"reply_every", 1}, {"perform_warm_up", 0}, {"vlan_en", 0}, {"vlan_pcp", 1}, {"recv_post_list", 1},
	{"aes_xts", 0}, {"encrypt_on_tx", 0}, {"sig_before", 0}, {"aes_block_size", 1}, {"kek_path", 1},
	{"credentials_path", 1}, {"data_enc_keys_number", 1}, {"data_enc_key_app_path", 1},
	{"log_dci_streams", 1}, {"log_active_dci_streams", 1}, {"disable_pcie_relaxed", 0}, {"use_ooo", 0},
	{"source_ip", 1},
}

// spec is perftest's option table (perftest_parameters.c parser()).
var spec = func() cli.Spec {
	s := cli.Spec{Short: "w:y:p:d:i:m:s:n:t:u:S:x:c:q:I:o:M:r:Q:A:l:D:f:B:T:L:E:J:j:K:k:X:W:aFegzRvhbNVCHUOZP"}
	for _, o := range []struct {
		name string
		arg  cli.ArgKind
		val  byte
	}{
		{"port", 1, 'p'}, {"ib-dev", 1, 'd'}, {"ib-port", 1, 'i'}, {"mtu", 1, 'm'}, {"size", 1, 's'},
		{"iters", 1, 'n'}, {"tx-depth", 1, 't'}, {"qp-timeout", 1, 'u'}, {"sl", 1, 'S'},
		{"gid-index", 1, 'x'}, {"all", 0, 'a'}, {"CPU-freq", 0, 'F'}, {"connection", 1, 'c'},
		{"qp", 1, 'q'}, {"events", 0, 'e'}, {"vector", 1, 'X'}, {"inline_size", 1, 'I'},
		{"outs", 1, 'o'}, {"mcg", 0, 'g'}, {"comm_rdma_cm", 0, 'z'}, {"rdma_cm", 0, 'R'},
		{"tos", 1, 'T'}, {"hop_limit", 1, 'L'}, {"help", 0, 'h'}, {"MGID", 1, 'M'},
		{"rx-depth", 1, 'r'}, {"bidirectional", 0, 'b'}, {"cq-mod", 1, 'Q'}, {"noPeak", 0, 'N'},
		{"version", 0, 'V'}, {"report-cycles", 0, 'C'}, {"report-histogrm", 0, 'H'},
		{"report-unsorted", 0, 'U'}, {"atomic_type", 1, 'A'}, {"dualport", 0, 'O'},
		{"post_list", 1, 'l'}, {"duration", 1, 'D'}, {"margin", 1, 'f'}, {"source_mac", 1, 'B'},
		{"dest_mac", 1, 'E'}, {"dest_ip", 1, 'J'}, {"source_ip", 1, 'j'}, {"dest_port", 1, 'K'},
		{"source_port", 1, 'k'}, {"ethertype", 1, 'Y'}, {"limit_bw", 1, 'w'},
		{"limit_msgrate", 1, 'y'}, {"server", 0, 'Z'}, {"client", 0, 'P'}, {"mac_fwd", 0, 'v'},
		{"use_rss", 0, 'G'}, {"report-counters", 1, 'W'},
		{"run_infinitely", 0, optRunInfinitely}, {"report_gbits", 0, optReportGbits},
		{"go-lock-thread", 0, optLockThread}, {"go-no-yield", 0, optNoYield},
	} {
		s.Long = append(s.Long, cli.LongOption{Name: o.name, Arg: o.arg, Val: o.val})
	}
	for i, o := range flagOnly {
		s.Long = append(s.Long, cli.LongOption{Name: o.name, Arg: o.arg, Val: optFirstOtherFlag + byte(i)})
	}
	return s
}()

// unsupportedShort names the perftest options ibperf recognizes but does
// not implement.
var unsupportedShort = map[byte]string{
	'X': "completion event vectors", 'g': "multicast", 'z': "rdma_cm address exchange with QPs connected by hand (-R connects them by rdma_cm)",
	'T': "type of service", 'L': "hop limit", 'M': "multicast GIDs",
	'C': "cycle reports", 'H': "histograms", 'U': "unsorted reports", 'O': "dual-port tests",
	'B': "raw Ethernet", 'E': "raw Ethernet", 'J': "raw Ethernet", 'j': "raw Ethernet", 'K': "raw Ethernet",
	'k': "raw Ethernet", 'Y': "raw Ethernet", 'w': "bandwidth limits", 'y': "message rate limits",
	'Z': "raw Ethernet", 'P': "raw Ethernet", 'v': "MAC forwarding", 'G': "RSS", 'W': "performance counters",
}

// parseArgs is perftest's parser() and force_dependecies() for the options
// ibperf implements. args[0] is the program; the first operand names the
// test unless the program is called ib_<test>.
func parseArgs(args []string) (config, []string, error) {
	prog := "ibperf"
	if len(args) > 0 {
		prog = args[0]
	} else {
		args = []string{prog}
	}
	events, operands := cli.GetoptLong(args, spec)
	t, byName := findTest(prog)
	if !byName {
		if len(operands) == 0 {
			for _, ev := range events {
				if ev.Opt == 'h' {
					return config{prog: prog}, nil, errHelp
				}
			}
			return config{prog: prog}, nil, &UsageError{Msg: "no test named: want one of " + testNames()}
		}
		var ok bool
		if t, ok = findTest(operands[0]); !ok {
			return config{prog: prog}, nil, &UsageError{Msg: fmt.Sprintf("%q is not a test: want one of %s", operands[0], testNames())}
		}
		operands = operands[1:]
	}
	c := defaults(t)
	c.prog = prog
	var notes []string // what perftest prints while adjusting the parameters
	for _, ev := range events {
		if ev.Err != nil {
			return c, nil, &UsageError{Err: ev.Err}
		}
		num := func(min, max int64) (int, error) {
			v, err := cli.ParseInt(ev.Arg, min, max)
			if err != nil {
				return 0, &UsageError{Option: ev.Name, Err: err}
			}
			return int(v), nil
		}
		refuse := func(format string, a ...any) error {
			return &UsageError{Option: ev.Name, Msg: fmt.Sprintf(format, a...)}
		}
		var err error
		switch ev.Opt {
		case 'h':
			return c, nil, errHelp
		case 'V':
			return c, nil, errVersion
		case 'p':
			c.tcpPort, err = num(0, 65535)
		case 'd':
			c.ibDev = ev.Arg
		case 'i':
			var v int
			v, err = num(1, 255)
			c.ibPort = uint8(v)
		case 'm':
			if c.mtu, err = num(0, 4096); err == nil && mtuEnum(c.mtu) == 0 {
				err = refuse("%d is not an MTU: choose from {256,512,1024,2048,4096}", c.mtu)
			}
		case 's':
			c.size, err = parseSize(ev.Arg)
			if err != nil {
				err = &UsageError{Option: ev.Name, Err: err}
			}
			c.reqSize = true
		case 'n':
			c.iters, err = num(minIters, maxIters)
		case 't':
			c.txDepth, err = num(1, maxTx)
		case 'u':
			var v int
			v, err = num(0, 31)
			c.qpTimeout = uint8(v)
		case 'S':
			var v int
			v, err = num(0, 15)
			c.sl = uint8(v)
		case 'x':
			c.gidIdx, err = num(0, maxGIDIndex)
			c.useGIDUser = true
		case 'a':
			c.all = true
		case 'F':
			c.cpuFreqF = true
		case 'c':
			switch strings.ToUpper(ev.Arg) {
			case "RC":
				c.conn = connRC
			case "UC":
				c.conn = connUC
			case "UD":
				c.conn = connUD
			default:
				err = refuse("%q: ibperf runs RC, UC or UD", ev.Arg)
			}
		case 'q':
			if t.kind != kindBW {
				err = refuse("multiple QPs only available on bw tests")
			} else {
				c.numQPs, err = num(1, maxQPs)
			}
		case 'I':
			if t.verb == verbRead || t.verb == verbAtomic {
				err = refuse("inline feature not available on READ/Atomic verbs")
			} else {
				c.inline, err = num(0, maxInline)
				c.reqInline = true
			}
		case 'o':
			if t.verb != verbRead && t.verb != verbAtomic {
				err = refuse("setting outstanding reads only available on READ verb")
			} else {
				c.outReads, err = num(1, 1<<16)
			}
		case 'r':
			if c.rxDepth, err = num(1, maxRx); err == nil && t.verb != verbSend && c.rxDepth > defRxRDMA {
				err = refuse("on RDMA verbs rx depth can be only 1")
			}
		case 'Q':
			c.cqMod, err = num(1, maxCQMod)
			c.reqCQMod = true
		case 'A':
			switch {
			case t.verb != verbAtomic:
				err = refuse("you are not running the atomic_lat/bw test")
			case ev.Arg == atomicNames[atomicCAS]:
				c.atomic = atomicCAS
			case ev.Arg == atomicNames[atomicFAA]:
				c.atomic = atomicFAA
			default:
				err = refuse("invalid atomic type: choose from {CMP_AND_SWAP,FETCH_AND_ADD}")
			}
		case 'l':
			c.postList, err = num(1, maxTx)
			c.reqPost = true
		case 'D':
			c.duration, err = num(1, 1<<20)
		case 'f':
			c.margin, err = num(0, 1<<20)
		case 'R':
			c.rdmaCM = true
		case 'N':
			if t.kind == kindLat {
				err = refuse("NoPeak only valid for BW tests")
			}
			c.noPeak = true
		case 'b':
			if t.kind == kindLat {
				err = refuse("Bidirectional is only available in BW test")
			}
			c.duplex = true
		case 'e':
			if t.verb == verbWrite {
				err = refuse("Events feature not available on WRITE verb")
			}
			c.events = true
		case optRunInfinitely:
			c.infinite = true
		case optReportGbits:
			c.gbits = true
		case optLockThread:
			c.lockThread = true
		case optNoYield:
			c.noYield = true
		default:
			what, ok := unsupportedShort[ev.Opt]
			if !ok {
				what = ev.Name
			}
			err = refuse("%s: not supported by ibperf", what)
		}
		if err != nil {
			return c, nil, err
		}
	}
	switch {
	case len(operands) == 1:
		c.server = operands[0]
	case len(operands) > 1:
		return c, nil, &UsageError{Msg: fmt.Sprintf("one server name at most, got %q", operands)}
	}
	if c.conn == connUD && c.test.verb != verbSend {
		return c, nil, &UsageError{Msg: fmt.Sprintf("UD connection only possible in SEND verb, not %s", c.test.name)}
	}
	if c.infinite {
		// perftest's run_infinitely replaces -a's test method.
		c.all = false
	}
	if c.rdmaCM && c.conn == connUC {
		return c, nil, &UsageError{Option: "-R", Msg: "UC is not supported in librdmacm"}
	}
	if c.conn == connUC && (c.test.verb == verbRead || c.test.verb == verbAtomic) {
		return c, nil, &UsageError{Msg: fmt.Sprintf("UC connection not possible in %s", c.test.name)}
	}
	n, err := c.forceDependencies()
	return c, append(notes, n...), err
}

func testNames() string {
	var names []string
	for _, t := range tests {
		names = append(names, t.name)
	}
	return strings.Join(names, ", ")
}

// parseSize reads -s as perftest does (a K or M suffix multiplies), but
// refuses what strtol would half-read.
func parseSize(s string) (int, error) {
	factor := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		factor, s = 1024, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		factor, s = 1024*1024, strings.TrimSuffix(s, "M")
	}
	v, err := cli.ParseInt(s, 1, (1<<32-1)/2/factor)
	if err != nil {
		return 0, err
	}
	return int(v * factor), nil
}

// forceDependencies is perftest's force_dependecies for these tests: it
// adjusts what perftest adjusts (returning the lines perftest prints) and
// refuses what perftest refuses. Where the user left -l, -Q and -I unset,
// ibperf's bandwidth tests pick their own (doorbell batching, selective
// signaling, inline data); given them, ibperf does exactly what perftest
// does.
func (c *config) forceDependencies() ([]string, error) {
	var notes []string
	if c.all {
		if c.test.verb == verbAtomic {
			return nil, &UsageError{Option: "-a", Msg: "message size cannot be changed for Atomic tests"}
		}
	}
	// A duration run has no iteration count: perftest sizes nothing by
	// it, and -D overrides -n.
	if c.duration == 0 {
		if c.tx() > c.iters {
			c.txDepth = c.iters
		}
		if c.test.verb == verbSend && c.rxDepth > c.iters {
			c.rxDepth = c.iters
		}
		if (c.conn == connUD || c.conn == connUC) && c.rxDepth == defRxSend {
			c.rxDepth = min(c.iters, ucMaxRx)
		}
	} else {
		if c.events {
			return nil, &UsageError{Option: "-e", Msg: "Duration mode doesn't work with events"}
		}
		if c.all {
			return nil, &UsageError{Option: "-D", Msg: "duration mode currently doesn't support running on all sizes"}
		}
		c.noPeak = true
	}
	if c.infinite {
		switch {
		case c.events:
			return nil, &UsageError{Option: "--run_infinitely", Msg: "run_infinitely does not support events feature yet"}
		case c.test.kind == kindLat:
			return nil, &UsageError{Option: "--run_infinitely", Msg: "run_infinitely exists only in BW tests for now"}
		case c.duplex && c.test.verb == verbSend:
			return nil, &UsageError{Option: "--run_infinitely", Msg: "run_infinitely mode is not supported in SEND Bidirectional BW test"}
		}
		// A report every -D seconds (perftest's default duration without
		// it).
		c.noPeak = true
		if c.duration == 0 {
			c.duration = defDuration
		}
	}
	// perftest checks the margin against its default duration when -D is
	// not given.
	duration := c.duration
	if duration == 0 {
		duration = defDuration
	}
	if c.duration > 0 && c.margin == defMargin {
		c.margin = c.duration / 4
	}
	if !(duration > 2*c.margin) {
		return nil, &UsageError{Option: "-f", Msg: "please check that DURATION > 2*MARGIN"}
	}
	// perftest's work-around for odd receive depths in send tests.
	if c.test.verb == verbSend && c.rxDepth%2 == 1 && !c.all {
		c.rxDepth++
	}
	if c.test.kind == kindBW && c.duration == 0 && c.iters > 20000 {
		c.noPeak = true
	}
	// perftest keeps CQ moderation with events.
	if c.size > msgSizeCQModLimit && c.conn != connUD && !c.all && !c.events {
		if !c.reqCQMod {
			c.cqMod = 1
		} else if c.cqMod > 1 {
			notes = append(notes, "Warning: Large message requested and CQ moderation enabled", "Warning: It can lead to inaccurate results")
		}
	}
	if c.cqMod > c.txDepth {
		c.cqMod = c.txDepth
	}
	if c.test.verb == verbRead || c.test.verb == verbAtomic {
		c.inline = 0
	}
	if c.test.verb == verbAtomic && c.size != defSizeAtomic {
		return nil, &UsageError{Option: "-s", Msg: "message size cannot be changed for Atomic tests"}
	}
	if c.postList > 1 {
		if c.test.kind != kindBW {
			return nil, &UsageError{Option: "--post_list", Msg: "post list is supported in BW tests only"}
		}
		if c.duration == 0 && c.iters%c.postList != 0 {
			return nil, &UsageError{Option: "--post_list", Msg: "number of iterations must be a multiple of post list size"}
		}
		if !c.reqCQMod {
			c.cqMod = c.postList
			notes = append(notes, "Post List requested - CQ moderation will be the size of the post list")
		} else if c.postList%c.cqMod != 0 {
			return nil, &UsageError{Option: "--post_list", Msg: "post list size must be a multiple of CQ moderation"}
		}
	}
	if c.postList > c.txDepth {
		return nil, &UsageError{Option: "--post_list", Msg: fmt.Sprintf("post list %d is larger than the tx depth %d", c.postList, c.txDepth)}
	}
	return notes, nil
}

// tx is the send queue depth.
func (c *config) tx() int { return c.txDepth }

// goBatching reports whether ibperf picks its own post list and signaling
// (bandwidth tests where the user left both -l and -Q unset): perftest's
// defaults post one message per doorbell, and on rxe every doorbell is a
// system call.
//
// Only for messages up to perftest's CQ moderation limit (8 KiB): a list of
// 32 64 KiB writes is 2048 MTU packets in one doorbell, a burst that on
// rxe lowered the bandwidth (docs/performance.md).
func (c *config) goBatching() bool {
	return c.test.kind == kindBW && !c.reqPost && !c.reqCQMod && c.size <= msgSizeCQModLimit && !c.all
}

// batch returns the post list and CQ moderation the run uses.
func (c *config) batch() (postList, cqMod int) {
	if !c.goBatching() {
		return c.postList, c.cqMod
	}
	pl := min(defaultPostListGo, c.txDepth/2)
	if pl < 1 {
		pl = 1
	}
	return pl, pl
}

// mtuEnum is the enum ibv_mtu of a size in bytes (1..5), 0 for none.
func mtuEnum(bytes int) int {
	for e, b := 1, 256; b <= 4096; e, b = e+1, b*2 {
		if b == bytes {
			return e
		}
	}
	return 0
}

// mtuBytes is the size of an enum ibv_mtu.
func mtuBytes(e int) int {
	if e < 1 || e > 5 {
		return 0
	}
	return 128 << e
}

func usage(w io.Writer, prog string) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("Usage:\n")
	p("  %s <test> [options]          start a server and wait for a connection\n", prog)
	p("  %s <test> [options] <host>   connect to the server at <host>\n", prog)
	p("\nTests (each wire-compatible with perftest 4.5's ib_<test>): %s\n", testNames())
	p("\nOptions (perftest's):\n")
	p("  -p, --port=<port>         listen on/connect to TCP port <port> (default %d)\n", defaultTCPPort)
	p("  -d, --ib-dev=<dev>        use RDMA device <dev> (default: the first one found)\n")
	p("  -i, --ib-port=<port>      use port <port> of the device (default 1)\n")
	p("  -m, --mtu=<mtu>           path MTU (default: the port's active MTU)\n")
	p("  -s, --size=<size>         message size (default 2, bw 65536, atomic 8; K and M suffixes)\n")
	p("  -n, --iters=<n>           iterations (default 1000, write_bw 5000)\n")
	p("  -a, --all                 run sizes 2 to 2^23 (UD: to the MTU)\n")
	p("  -t, --tx-depth=<dep>      send queue depth (default 128, lat 1)\n")
	p("  -r, --rx-depth=<dep>      receive queue depth (send tests; default 512)\n")
	p("  -c, --connection=<RC|UC|UD> transport (default RC)\n")
	p("  -q, --qp=<n>              QPs (bw tests; default 1)\n")
	p("  -x, --gid-index=<idx>     local GID index (RoCE: default the best RoCE v2 GID)\n")
	p("  -S, --sl=<sl>             service level\n")
	p("  -u, --qp-timeout=<t>      QP timeout exponent (default 14)\n")
	p("  -R, --rdma_cm             connect the QPs with rdma_cm (the peer's address is its RDMA netdev's IP)\n")
	p("  -I, --inline_size=<size>  max inline size (ibperf default: 220 for write/send up to 220 B)\n")
	p("  -o, --outs=<n>            outstanding reads/atomics (default: the device maximum)\n")
	p("  -A, --atomic_type=<type>  CMP_AND_SWAP or FETCH_AND_ADD (default)\n")
	p("  -l, --post_list=<n>       messages per doorbell (ibperf bw default: %d)\n", defaultPostListGo)
	p("  -Q, --cq-mod=<n>          one completion per <n> messages (ibperf bw default: the post list)\n")
	p("  -D, --duration=<sec>      run for <sec> seconds instead of -n iterations\n")
	p("  -f, --margin=<sec>        seconds at each end of a -D run left out of the result (default: a quarter)\n")
	p("  -N, --noPeak              skip the peak bandwidth\n")
	p("  -b, --bidirectional       both sides send (bw tests); the result is the sum of both directions\n")
	p("  -e, --events              wait for completions on a completion channel instead of polling (not write tests)\n")
	p("      --run_infinitely      (bw tests) run until killed, printing the bandwidth every -D seconds (default %d)\n", defDuration)
	p("  -F, --CPU-freq            accepted; the clock is always calibrated\n")
	p("      --report_gbits        bandwidth in Gb/s\n")
	p("      --go-lock-thread      (ibperf) poll on a goroutine locked to its OS thread (slower: see docs/performance.md)\n")
	p("      --go-no-yield         (ibperf) busy-wait without yielding: the scheduler preempts the poller every 10 ms\n")
	p("  -V, --version             print the perftest version ibperf speaks\n")
	p("  -h, --help                print this help\n")
}
