package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/cli"
	"github.com/goverbs/goverbs/uverbs"
)

var roceGID = uverbs.GID{10: 0xff, 11: 0xff, 12: 10, 13: 99, 14: 0, 15: 1}

func TestDestMarshal(t *testing.T) {
	d := dest{LID: 0, OutReads: 0x80, QPN: 0x11, PSN: 0xabcdef, Rkey: 0x1234, VAddr: 0x7f0000001000, GID: roceGID}
	got := d.marshal(true)
	want := "0000:0080:000011:abcdef:00001234:00007f0000001000:" +
		"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:63:00:01:00000000:"
	if len(got) != keyMsgSizeGID || got[len(got)-1] != 0 {
		t.Fatalf("message of %d bytes, last %#x; want %d, NUL-terminated", len(got), got[len(got)-1], keyMsgSizeGID)
	}
	if diff := cmp.Diff(want, string(bytes.TrimRight(got, "\x00"))); diff != "" {
		t.Errorf("with GID (-want +got):\n%s", diff)
	}
	if len(want) != keyMsgSizeGID-1 {
		t.Errorf("KEY_PRINT_FMT_GID text is %d bytes, the C buffer holds %d and the NUL", len(want), keyMsgSizeGID-1)
	}
	got = d.marshal(false)
	want = "0000:0080:000011:abcdef:00001234:00007f0000001000:00000000"
	if diff := cmp.Diff(want, string(bytes.TrimRight(got, "\x00"))); diff != "" || len(got) != keyMsgSize {
		t.Errorf("without GID, %d bytes (-want +got):\n%s", len(got), diff)
	}
	for _, withGID := range []bool{false, true} {
		back, err := parseDest(d.marshal(withGID), withGID)
		if err != nil {
			t.Fatal(err)
		}
		wantBack := d
		if !withGID {
			wantBack.GID = uverbs.GID{}
		}
		if diff := cmp.Diff(wantBack, back); diff != "" {
			t.Errorf("round trip, GID %v (-want +got):\n%s", withGID, diff)
		}
	}
}

func TestParseDestBad(t *testing.T) {
	good := string(bytes.TrimRight(dest{QPN: 1, GID: roceGID}.marshal(true), "\x00"))
	for _, tc := range []struct {
		name string
		msg  string
		gid  bool
	}{
		{"empty", "", true},
		{"too few fields", "0000:0001:000011", false},
		{"not hex", strings.Replace(good, "000001", "00000g", 1), true},
		{"QPN over 24 bits", strings.Replace(good, ":000001:", ":1000000:", 1), true},
		{"GID byte over 8 bits", strings.Replace(good, ":ff:ff:", ":fff:ff:", 1), true},
		{"GID message read without GID", good, false},
		{"short message read with GID", "0000:0001:000011:abcdef:00001234:00007f0000001000:00000000", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parseDest([]byte(tc.msg), tc.gid); !errors.Is(err, ErrBadMessage) {
				t.Errorf("parseDest(%q) = %v, want ErrBadMessage", tc.msg, err)
			}
		})
	}
}

// pipePair is a connected client and server over loopback TCP (both sides
// write "done" at the end and nobody reads it: an unbuffered pipe would
// block).
func pipePair(t *testing.T) (client, server *comm) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return &comm{ch: tcpChannel{a}, client: true, withGID: true}, &comm{ch: tcpChannel{b}, withGID: true}
}

// TestExchange runs the prologue, handshakes, reports and the close
// between a client and a server, and checks the bytes the client sent.
func TestExchange(t *testing.T) {
	cl, sv := pipePair(t)
	// Record what the client writes.
	var sent bytes.Buffer
	cl.ch = tcpChannel{recordingConn{cl.ch.(tcpChannel).conn, &sent}}
	type out struct {
		cycle, line, mtu int
		peer             dest
		rep              bwReport
		err              error
	}
	run := func(c *comm, cycle, line, mtu int, me dest, rep bwReport, ch chan<- out) {
		var o out
		if o.cycle, o.line, o.mtu, o.err = c.prologue(cycle, line, mtu); o.err == nil {
			if o.peer, o.err = c.handshake(me); o.err == nil {
				if o.rep, o.err = c.reports(rep); o.err == nil {
					o.err = c.close(me)
				}
			}
		}
		ch <- o
	}
	cd := dest{QPN: 0x11, PSN: 0x22, Rkey: 0x33, VAddr: 0x44, OutReads: 1, GID: roceGID}
	sd := dest{QPN: 0x55, PSN: 0x66, Rkey: 0x77, VAddr: 0x88, OutReads: 1, GID: roceGID}
	crep := bwReport{Size: 65536, Iters: 5000, Peak: 70.5, Avg: 65.25, MsgRate: 0.001044}
	cch, sch := make(chan out, 1), make(chan out, 1)
	go run(cl, 4096, 64, 3, cd, crep, cch)
	go run(sv, 8192, 128, 5, sd, bwReport{}, sch)
	co, so := <-cch, <-sch
	if co.err != nil || so.err != nil {
		t.Fatalf("client: %v, server: %v", co.err, so.err)
	}
	if co.cycle != 8192 || co.line != 128 || so.cycle != 8192 || so.line != 128 {
		t.Errorf("cycle buffer and cache line: client %d %d, server %d %d; want the larger, 8192 128", co.cycle, co.line, so.cycle, so.line)
	}
	if co.mtu != 5 || so.mtu != 3 {
		t.Errorf("peer MTUs: client got %d, server got %d; want 5 and 3", co.mtu, so.mtu)
	}
	if diff := cmp.Diff(sd, co.peer); diff != "" {
		t.Errorf("client's view of the server (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(cd, so.peer); diff != "" {
		t.Errorf("server's view of the client (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(crep, so.rep); diff != "" {
		t.Errorf("server's view of the client's report (-want +got):\n%s", diff)
	}
	b := sent.Bytes()
	wantPrefix := append([]byte("6.06"), make([]byte, 12)...)
	wantPrefix = append(wantPrefix, 0, 0, 0x10, 0, 0, 0, 0, 64, '3', 0)
	if !bytes.HasPrefix(b, wantPrefix) {
		t.Errorf("client's prologue % x, want % x", b[:min(len(b), len(wantPrefix))], wantPrefix)
	}
	rest := b[len(wantPrefix):]
	if want := 2*keyMsgSizeGID + 5*8 + len(doneMsg); len(rest) != want {
		t.Errorf("client sent %d bytes after the prologue, want %d (2 handshakes, 5 report values, done)", len(rest), want)
	} else if got := rest[keyMsgSizeGID : keyMsgSizeGID+8]; !bytes.Equal(got, []byte{0, 0, 0, 0, 0, 1, 0, 0}) {
		t.Errorf("report size % x, want 65536 big endian", got)
	} else if string(rest[len(rest)-5:]) != doneMsg {
		t.Errorf("last bytes %q, want %q", rest[len(rest)-5:], doneMsg)
	}
}

type recordingConn struct {
	net.Conn
	w *bytes.Buffer
}

func (r recordingConn) Write(b []byte) (int, error) {
	r.w.Write(b)
	return r.Conn.Write(b)
}

func TestOldPeerRefused(t *testing.T) {
	cl, sv := pipePair(t)
	go func() {
		var v [versionSize]byte
		conn := sv.ch.(tcpChannel).conn
		conn.Read(v[:])
		copy(v[:], "5.60")
		conn.Write(v[:])
	}()
	if _, _, _, err := cl.prologue(4096, 64, 3); !errors.Is(err, ErrBadMessage) {
		t.Errorf("prologue with a 5.60 peer: %v, want ErrBadMessage", err)
	}
}

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want func(c *config)
	}{
		{[]string{"ibperf", "write_lat"}, func(c *config) {}},
		{[]string{"ib_write_bw", "-d", "rxe0", "-x", "1", "10.99.0.1"}, func(c *config) {
			c.ibDev, c.gidIdx, c.useGIDUser, c.server = "rxe0", 1, true, "10.99.0.1"
			c.cqMod = 1 // 64 KiB: every message signaled
		}},
		{[]string{"ibperf", "send_bw", "-s", "64", "--post_list", "16", "-n", "1600"}, func(c *config) {
			c.size, c.reqSize, c.postList, c.reqPost, c.iters, c.cqMod = 64, true, 16, true, 1600, 16
		}},
		{[]string{"ibperf", "send_bw", "-s", "64", "-l", "16", "-Q", "4", "-n", "1600"}, func(c *config) {
			c.size, c.reqSize, c.postList, c.reqPost, c.cqMod, c.reqCQMod, c.iters = 64, true, 16, true, 4, true, 1600
		}},
		{[]string{"ibperf", "send_lat", "-c", "UD", "-n", "5"}, func(c *config) {
			c.conn, c.iters, c.rxDepth = connUD, 5, 6 // min(iters, 16000), made even
		}},
		{[]string{"ibperf", "write_bw", "-s", "4K", "--report_gbits", "-q", "2", "-t", "64"}, func(c *config) {
			c.size, c.reqSize, c.gbits, c.numQPs, c.txDepth, c.cqMod = 4096, true, true, 2, 64, 64
		}},
		{[]string{"ibperf", "atomic_lat", "-A", "CMP_AND_SWAP", "--go-lock-thread"}, func(c *config) {
			c.atomic, c.lockThread = atomicCAS, true
		}},
		{[]string{"ibperf", "read_bw", "-o", "4", "-n", "30000"}, func(c *config) {
			c.outReads, c.iters, c.noPeak, c.inline, c.cqMod = 4, 30000, true, 0, 1
		}},
		// Duration runs: the margin defaults to a quarter (rounded down),
		// no peak, and -n sizes nothing (perftest accepts both, -D wins).
		{[]string{"ibperf", "write_bw", "-D", "2"}, func(c *config) {
			c.duration, c.margin, c.noPeak = 2, 0, true
		}},
		{[]string{"ibperf", "write_lat", "-D", "10", "-n", "100"}, func(c *config) {
			c.duration, c.margin, c.iters, c.noPeak = 10, 2, 100, true
		}},
		{[]string{"ibperf", "send_bw", "--duration", "8", "--margin", "1", "-n", "5", "-s", "64"}, func(c *config) {
			c.duration, c.margin, c.noPeak, c.iters, c.size, c.reqSize, c.cqMod = 8, 1, true, 5, 64, true, defCQMod
		}},
		{[]string{"ibperf", "read_lat", "-f", "2"}, func(c *config) { c.margin = 2 }},
		{[]string{"ibperf", "send_lat", "-D", "2"}, func(c *config) {
			c.duration, c.margin, c.noPeak = 2, 0, true
		}},
		// -b, -e, --run_infinitely.
		{[]string{"ibperf", "write_bw", "-b"}, func(c *config) { c.duplex, c.cqMod = true, 1 }},
		{[]string{"ibperf", "send_bw", "--bidirectional", "-D", "2"}, func(c *config) {
			c.duplex, c.duration, c.margin, c.noPeak, c.cqMod = true, 2, 0, true, 1
		}},
		// perftest keeps CQ moderation for large messages with events.
		{[]string{"ibperf", "send_bw", "-e"}, func(c *config) { c.events, c.cqMod = true, defCQMod }},
		{[]string{"ibperf", "read_lat", "--events"}, func(c *config) { c.events = true }},
		{[]string{"ibperf", "send_lat", "-e", "-n", "100"}, func(c *config) { c.events, c.iters, c.rxDepth = true, 100, 100 }},
		// A report every -D seconds, perftest's 5 without it; -a gives way.
		{[]string{"ibperf", "write_bw", "--run_infinitely", "-a"}, func(c *config) {
			c.infinite, c.duration, c.margin, c.noPeak, c.cqMod = true, defDuration, defDuration/4, true, 1
		}},
		{[]string{"ibperf", "send_bw", "--run_infinitely", "-D", "1", "-s", "64"}, func(c *config) {
			c.infinite, c.duration, c.margin, c.noPeak, c.size, c.reqSize, c.cqMod = true, 1, 0, true, 64, true, defCQMod
		}},
		{[]string{"ibperf", "write_bw", "-b", "--run_infinitely", "-D", "1"}, func(c *config) {
			c.duplex, c.infinite, c.duration, c.margin, c.noPeak, c.cqMod = true, true, 1, 0, true, 1
		}},
	} {
		t.Run(strings.Join(tc.args, "_"), func(t *testing.T) {
			got, _, err := parseArgs(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			tst, _ := findTest(tc.args[0])
			if tst.name == "" {
				tst, _ = findTest(tc.args[1])
			}
			want := defaults(tst)
			want.prog = tc.args[0]
			if tst.verb == verbRead || tst.verb == verbAtomic {
				want.inline = 0
			}
			if tst.kind == kindLat {
				want.cqMod = 1
			}
			if tst.kind == kindBW && want.size > msgSizeCQModLimit {
				want.cqMod = 1
			}
			tc.want(&want)
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(config{}, test{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseArgsBad(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		option string // the option the error names, "" for none
	}{
		{[]string{"ibperf"}, ""},
		{[]string{"ibperf", "nosuch_lat"}, ""},
		{[]string{"ibperf", "write_lat", "-n", "12abc"}, "-n"},
		{[]string{"ibperf", "write_lat", "-n", "4"}, "-n"},
		{[]string{"ibperf", "write_lat", "-x", "65"}, "-x"},
		{[]string{"ibperf", "write_lat", "-m", "1000"}, "-m"},
		{[]string{"ibperf", "write_lat", "-c", "XRC"}, "-c"},
		{[]string{"ibperf", "write_lat", "-q", "2"}, "-q"},
		{[]string{"ibperf", "write_lat", "-r", "2"}, "-r"},
		{[]string{"ibperf", "read_lat", "-I", "64"}, "-I"},
		{[]string{"ibperf", "write_bw", "-o", "4"}, "-o"},
		{[]string{"ibperf", "write_lat", "-A", "CMP_AND_SWAP"}, "-A"},
		{[]string{"ibperf", "atomic_lat", "-A", "SWAP"}, "-A"},
		{[]string{"ibperf", "atomic_bw", "-s", "16"}, "-s"},
		{[]string{"ibperf", "write_lat", "--post_list", "4"}, "--post_list"},
		{[]string{"ibperf", "write_bw", "--post_list", "3"}, "--post_list"}, // 5000 % 3
		{[]string{"ibperf", "write_bw", "-l", "8", "-Q", "3", "-n", "800"}, "--post_list"},
		{[]string{"ibperf", "write_bw", "-s", "0"}, "-s"},
		{[]string{"ibperf", "write_lat", "-e"}, "-e"},
		{[]string{"ibperf", "write_lat", "--use-srq"}, "--use-srq"},
		{[]string{"ibperf", "write_lat", "-D", "0"}, "-D"},
		{[]string{"ibperf", "write_lat", "-D", "4", "-f", "2"}, "-f"}, // DURATION > 2*MARGIN
		{[]string{"ibperf", "write_lat", "-f", "3"}, "-f"},            // against perftest's default 5 s
		{[]string{"ibperf", "write_lat", "-f", "-1"}, "-f"},
		{[]string{"ibperf", "write_bw", "-D", "2", "-a"}, "-D"},
		{[]string{"ibperf", "write_lat", "-N"}, "-N"},
		{[]string{"ibperf", "write_lat", "-c", "UD"}, ""},
		{[]string{"ibperf", "read_bw", "-c", "UC"}, ""},
		{[]string{"ibperf", "write_bw", "-R", "-c", "UC"}, "-R"},
		{[]string{"ibperf", "write_bw", "-z"}, "-z"},
		{[]string{"ibperf", "write_lat", "a", "b"}, ""},
	} {
		t.Run(strings.Join(tc.args, "_"), func(t *testing.T) {
			_, _, err := parseArgs(tc.args)
			var ue *UsageError
			if !errors.As(err, &ue) || !errors.Is(err, ErrUsage) {
				t.Fatalf("parseArgs = %v, want a *UsageError", err)
			}
			if ue.Option != tc.option {
				t.Errorf("error %q names option %q, want %q", err, ue.Option, tc.option)
			}
		})
	}
	// glibc's own complaints come through as *cli.OptionError.
	_, _, err := parseArgs([]string{"ibperf", "write_lat", "--ib"})
	if !errors.Is(err, cli.ErrBadOption) || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("--ib: %v, want glibc's ambiguity error", err)
	}
}

// TestParseArgsFlagsRefused: the combinations of -b, -e and
// --run_infinitely that perftest refuses, with its words.
func TestParseArgsFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		option string
		msg    string
	}{
		{[]string{"ibperf", "write_lat", "-b"}, "-b", "Bidirectional is only available in BW test"},
		{[]string{"ibperf", "send_lat", "--bidirectional"}, "--bidirectional", "Bidirectional is only available in BW test"},
		{[]string{"ibperf", "write_bw", "-e"}, "-e", "Events feature not available on WRITE verb"},
		{[]string{"ibperf", "write_lat", "-e"}, "-e", "Events feature not available on WRITE verb"},
		{[]string{"ibperf", "send_bw", "-e", "-D", "2"}, "-e", "Duration mode doesn't work with events"},
		{[]string{"ibperf", "send_lat", "-e", "--run_infinitely"}, "--run_infinitely", "run_infinitely does not support events feature yet"},
		{[]string{"ibperf", "read_lat", "--run_infinitely"}, "--run_infinitely", "run_infinitely exists only in BW tests for now"},
		{[]string{"ibperf", "send_bw", "-b", "--run_infinitely"}, "--run_infinitely", "run_infinitely mode is not supported in SEND Bidirectional BW test"},
	} {
		t.Run(strings.Join(tc.args, "_"), func(t *testing.T) {
			_, _, err := parseArgs(tc.args)
			var ue *UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("parseArgs = %v, want a *UsageError", err)
			}
			if diff := cmp.Diff([]string{tc.option, tc.msg}, []string{ue.Option, ue.Msg}); diff != "" {
				t.Errorf("error %q (-want +got):\n%s", err, diff)
			}
		})
	}
}

func TestPortStateName(t *testing.T) {
	for s, want := range map[uverbs.PortState]string{uverbs.PortNOP: "Nop", uverbs.PortDown: "Down",
		uverbs.PortInit: "Init", uverbs.PortArmed: "Armed", uverbs.PortActiveDefer: "Active Defer", 6: "PortState(6)"} {
		if got := portStateName(s); got != want {
			t.Errorf("portStateName(%d) = %q, want %q", s, got, want)
		}
	}
}

func TestCAltHex(t *testing.T) {
	for _, tc := range []struct {
		v     uint64
		width int
		want  string
	}{
		{0, 4, "0000"}, {0x11, 6, "0x0011"}, {0xabcdef, 6, "0xabcdef"}, {0x1234567, 6, "0x1234567"},
		{0x7f0000001000, 16, "0x007f0000001000"}, {1, 4, "0x01"},
	} {
		if got := cAltHex(tc.v, tc.width); got != tc.want {
			t.Errorf("cAltHex(%#x, %d) = %q, want %q (C's %%#0%dx)", tc.v, tc.width, got, tc.want, tc.width)
		}
	}
}

func TestLatencyStats(t *testing.T) {
	// 13 posts one cycle-per-µs apart by 10, 20, ..., 120 cycles: 12
	// round trips, the two largest left out, 10 measured.
	ts := []uint64{0}
	for i := 1; i <= 12; i++ {
		ts = append(ts, ts[len(ts)-1]+uint64(10*i))
	}
	got := latencyStats(ts, 1, 2)
	// Measured: 10..100 halved = 5..50. Even count: the integer mean of the
	// middle two round trips, (50+60)/2 = 55, halved 27.5.
	want := latStats{Min: 5, Max: 55, Typical: 27.5, Avg: 27.5, P99: 55, P999: 55}
	// stdev over integer-truncated differences: 22,17,12,7,2,-2,-7,-12,-17,-22.
	want.Stdev = sqrtMean([]int{22, 17, 12, 7, 2, -2, -7, -12, -17, -22})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func sqrtMean(d []int) float64 {
	s := 0
	for _, v := range d {
		s += v * v
	}
	return math.Sqrt(float64(s) / float64(len(d)))
}

func TestReportFormats(t *testing.T) {
	var b bytes.Buffer
	p := &perf{cfg: &config{}, stdout: &b}
	p.printBWReport(bwReport{Size: 65536, Iters: 5000, Peak: 70.123, Avg: 65.5, MsgRate: 0.001048})
	// Expected rows are what printf(1) makes of perftest's formats.
	want := " 65536      5000             70.12              65.50  \t\t   0.001048\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("bw row (-want +got):\n%s", diff)
	}
	b.Reset()
	p.cfg.gbits = true
	p.printBWReport(bwReport{Size: 64, Iters: 5000, Peak: 0.05, Avg: 0.04, MsgRate: 0.07})
	want = " 64         5000           0.050000            0.040000            0.070000\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("Gb/s row under 0.1 (REPORT_FMT_EXT) (-want +got):\n%s", diff)
	}
	lat, tps := latDuration(2e9, 1000, 1000, 2)
	if diff := cmp.Diff([2]float64{1000, 500}, [2]float64{lat, tps}); diff != "" {
		t.Errorf("latDuration (-want +got):\n%s", diff)
	}
	line := fmt.Sprintf(reportFmtLatDur, 2, 1234, 12.5, 40000.0)
	want = " 2" + strings.Repeat(" ", 13) + "1234" + strings.Repeat(" ", 12) + "12.50  " + strings.Repeat(" ", 8) + "40000.00\n"
	if diff := cmp.Diff(want, line); diff != "" {
		t.Errorf("lat duration row (-want +got):\n%s", diff)
	}
	line = fmt.Sprintf(reportFmtLat, 2, 1000, 30.5, 200.25, 33.5, 35.0, 4.2, 60.0, 190.0)
	want = " 2       1000          30.50          200.25       33.50    \t       35.00       \t4.20   \t\t60.00   \t\t190.00 \n"
	if diff := cmp.Diff(want, line); diff != "" {
		t.Errorf("lat row (-want +got):\n%s", diff)
	}
}

// msgPipe is one end of an in-memory message channel: what the rdma_cm
// control connection is to the exchange (one message per SEND).
type msgPipe struct {
	in, out chan []byte
	sent    *[][]byte
}

func (m msgPipe) write(b []byte) error {
	*m.sent = append(*m.sent, append([]byte(nil), b...))
	m.out <- append([]byte(nil), b...)
	return nil
}

func (m msgPipe) read(b []byte) error {
	got := <-m.in
	if len(got) != len(b) {
		return fmt.Errorf("%d-byte message, want %d", len(got), len(b))
	}
	copy(b, got)
	return nil
}

func (m msgPipe) close(bool) error { return nil }

// TestExchangeBinary runs the exchange as it goes over rdma_cm: addresses
// as the 56-byte big-endian struct pingpong_dest, no "done".
func TestExchangeBinary(t *testing.T) {
	a, b := make(chan []byte, 4), make(chan []byte, 4)
	var clSent, svSent [][]byte
	cl := &comm{ch: msgPipe{in: b, out: a, sent: &clSent}, client: true, withGID: true, binaryDest: true}
	sv := &comm{ch: msgPipe{in: a, out: b, sent: &svSent}, withGID: true, binaryDest: true}
	cd := dest{LID: 0, QPN: 0x11, PSN: 0x22, Rkey: 0x33, VAddr: 0x1122334455667788, OutReads: 1, GID: roceGID, GIDIndex: 1}
	sd := dest{QPN: 0xabcdef, PSN: 0x66, Rkey: 0x77, VAddr: 0x88, OutReads: 16, GID: roceGID, GIDIndex: 1}
	type out struct {
		peer dest
		err  error
	}
	run := func(c *comm, me dest, ch chan<- out) {
		var o out
		if _, _, _, o.err = c.prologue(4096, 64, 3); o.err == nil {
			if o.peer, o.err = c.handshake(me); o.err == nil {
				o.err = c.close(me)
			}
		}
		ch <- o
	}
	cch, sch := make(chan out, 1), make(chan out, 1)
	go run(cl, cd, cch)
	go run(sv, sd, sch)
	co, so := <-cch, <-sch
	if co.err != nil || so.err != nil {
		t.Fatalf("client: %v, server: %v", co.err, so.err)
	}
	if diff := cmp.Diff(sd, co.peer); diff != "" {
		t.Errorf("client's view of the server (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(cd, so.peer); diff != "" {
		t.Errorf("server's view of the client (-want +got):\n%s", diff)
	}
	// version, cycle buffer, cache line, MTU, two handshakes.
	var sizes []int
	for _, m := range clSent {
		sizes = append(sizes, len(m))
	}
	if diff := cmp.Diff([]int{16, 4, 4, 2, 56, 56}, sizes); diff != "" {
		t.Errorf("client's message sizes (-want +got):\n%s", diff)
	}
	want := []byte{
		0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0x11, 0, 0, 0, 0x22, 0, 0, 0, 0x33, 0, 0, 0, 0,
		0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}
	want = append(want, roceGID[:]...)
	want = append(want, 0, 0, 0, 0, 0, 0, 0, 1)
	if diff := cmp.Diff(want, clSent[4]); diff != "" {
		t.Errorf("client's address message (-want +got):\n%s", diff)
	}
}

func TestParseDestBinaryBad(t *testing.T) {
	good := dest{QPN: 1, PSN: 2, GID: roceGID}.marshalBinary(true)
	set := func(off int, v uint32) []byte {
		m := append([]byte(nil), good...)
		binary.BigEndian.PutUint32(m[off:], v)
		return m
	}
	for _, tc := range []struct {
		name string
		msg  []byte
	}{
		{"empty", nil},
		{"short", good[:55]},
		{"long", append(append([]byte(nil), good...), 0)},
		{"LID over 16 bits", set(0, 0x10000)},
		{"negative outstanding reads", set(4, 0xffffffff)},
		{"QPN over 24 bits", set(8, 0x1000000)},
		{"PSN over 24 bits", set(12, 0x1000000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parseDestBinary(tc.msg); !errors.Is(err, ErrBadMessage) {
				t.Errorf("parseDestBinary(% x) = %v, want ErrBadMessage", tc.msg, err)
			}
		})
	}
}

// FuzzParseDestBinary: any message either parses into an address that
// marshals back to the same fields or is refused.
func FuzzParseDestBinary(f *testing.F) {
	f.Add(dest{QPN: 0x11, PSN: 0x22, Rkey: 0x33, VAddr: 0x44, OutReads: 1, GID: roceGID, GIDIndex: 1}.marshalBinary(true))
	f.Fuzz(func(t *testing.T, m []byte) {
		d, err := parseDestBinary(m)
		if err != nil {
			if !errors.Is(err, ErrBadMessage) {
				t.Fatalf("error %v does not wrap ErrBadMessage", err)
			}
			return
		}
		back := d.marshalBinary(true)
		// The padding (20..24) is not read.
		copy(back[20:24], m[20:24])
		if !bytes.Equal(back, m) {
			t.Fatalf("round trip:\n% x\n% x", m, back)
		}
	})
}
