package main

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// perftest's report text (perftest_parameters.h).
const (
	resultLine      = "---------------------------------------------------------------------------------------\n"
	resultFmt       = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
	resultFmtG      = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
	resultFmtLatDur = " #bytes        #iterations       t_avg[usec]    tps average"
	resultFmtLat    = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
	// REPORT_FMT, REPORT_FMT_EXT and REPORT_FMT_LAT with Go verbs for C's.
	reportFmt       = " %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f\n"
	reportFmtExt    = " %-7d    %d           %-7.6f            %-7.6f            %-7.6f\n"
	reportFmtLatDur = " %-7d       %d            %-7.2f        %-7.2f\n"
	reportFmtLat    = " %-7d %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f\n"
	// latMeasureTail is LAT_MEASURE_TAIL: the largest samples left out.
	latMeasureTail = 2
)

// cAltHex is C's printf("%#0<width>x", v): "0x" and zero padding to width
// in all, except that zero prints as zeros alone.
func cAltHex(v uint64, width int) string {
	if v == 0 {
		return fmt.Sprintf("%0*d", width, 0)
	}
	h := strconv.FormatUint(v, 16)
	if pad := width - 2 - len(h); pad > 0 {
		h = strings.Repeat("0", pad) + h
	}
	return "0x" + h
}

// printDest is ctx_print_pingpong_data.
func (p *perf) printDest(side string, d dest) {
	var b strings.Builder
	fmt.Fprintf(&b, " %s address: LID %s QPN %s PSN %s", side, cAltHex(uint64(d.LID), 4), cAltHex(uint64(d.QPN), 6), cAltHex(uint64(d.PSN), 6))
	switch p.cfg.test.verb {
	case verbRead:
		fmt.Fprintf(&b, " OUT %s", cAltHex(uint64(d.OutReads), 4))
		fallthrough
	case verbWrite:
		fmt.Fprintf(&b, " RKey %s VAddr %s", cAltHex(uint64(d.Rkey), 8), cAltHex(d.VAddr, 16))
	}
	b.WriteByte('\n')
	if p.gidIdx > -1 {
		b.WriteString(" GID: ")
		for i, g := range d.GID {
			if i > 0 {
				b.WriteByte(':')
			}
			fmt.Fprintf(&b, "%02d", g)
		}
		b.WriteByte('\n')
	}
	fmt.Fprint(p.stdout, b.String())
}

// printTestInfo is ctx_print_test_info, with ibperf's own lines marked.
func (p *perf) printTestInfo() {
	c := p.cfg
	w := p.stdout
	fmt.Fprint(w, resultLine)
	fmt.Fprintf(w, "                    %s ", verbNames[c.test.verb])
	if c.test.verb == verbAtomic {
		fmt.Fprintf(w, "%s ", atomicNames[c.atomic])
	}
	if c.test.kind == kindBW {
		if c.duplex {
			fmt.Fprint(w, "Bidirectional ")
		}
		if p.postList > 1 {
			fmt.Fprint(w, "Post List ")
		}
		fmt.Fprint(w, "BW ")
	} else {
		fmt.Fprint(w, "Latency ")
	}
	fmt.Fprint(w, "Test\n")
	if c.events {
		fmt.Fprintf(w, " Test with events. Using %s_comp0\n", c.ibDev)
	}
	fmt.Fprintf(w, " Dual-port       : OFF\t\tDevice         : %s\n", c.ibDev)
	fmt.Fprintf(w, " Number of qps   : %d\t\tTransport type : IB\n", c.numQPs)
	fmt.Fprintf(w, " Connection type : %s\t\tUsing SRQ      : OFF\n", c.conn)
	fmt.Fprintf(w, " PCIe relax order: Unsupported\n")
	fmt.Fprintf(w, " ibv_wr* API     : OFF\n")
	if p.isClient() || c.duplex {
		fmt.Fprintf(w, " TX depth        : %d\n", c.txDepth)
	}
	if p.postList > 1 {
		fmt.Fprintf(w, " Post List       : %d\n", p.postList)
	}
	if c.test.verb == verbSend && (!p.isClient() || c.duplex) {
		fmt.Fprintf(w, " RX depth        : %d\n", c.rxDepth)
	}
	if c.test.kind == kindBW {
		fmt.Fprintf(w, " CQ Moderation   : %d\n", p.cqMod)
	}
	fmt.Fprintf(w, " Mtu             : %d[B]\n", mtuBytes(p.mtu))
	link := "IB"
	if p.port.LinkLayer == 2 {
		link = "Ethernet"
	}
	fmt.Fprintf(w, " Link type       : %s\n", link)
	if p.gidIdx != -1 {
		fmt.Fprintf(w, " GID index       : %d\n", p.gidIdx)
	}
	if c.test.verb != verbRead && c.test.verb != verbAtomic {
		fmt.Fprintf(w, " Max inline data : %d[B]\n", p.inline)
	} else {
		fmt.Fprintf(w, " Outstand reads  : %d\n", p.outReads)
	}
	if c.rdmaCM {
		fmt.Fprintf(w, " rdma_cm QPs\t : ON\n")
		fmt.Fprintf(w, " Data ex. method : rdma_cm")
		if !p.isClient() {
			fmt.Fprintf(w, "\n%s Waiting for client rdma_cm QP to connect\n Please run the same command with the IB/RoCE interface IP", resultLine)
		}
		fmt.Fprintln(w)
	} else {
		fmt.Fprintf(w, " rdma_cm QPs\t : OFF\n")
		fmt.Fprintf(w, " Data ex. method : Ethernet\n")
	}
	if c.goBatching() {
		fmt.Fprintf(w, " ibperf batching : %d messages per doorbell, one completion per %d\n", p.postList, p.cqMod)
	}
	fmt.Fprint(w, resultLine)
}

func (p *perf) printLatHeader() {
	if p.cfg.duration > 0 {
		fmt.Fprint(p.stdout, resultLine, resultFmtLatDur, "\n")
		return
	}
	fmt.Fprint(p.stdout, resultLine, resultFmtLat, "\n")
}

func (p *perf) printBWHeader() {
	f := resultFmt
	if p.cfg.gbits {
		f = resultFmtG
	}
	fmt.Fprint(p.stdout, resultLine, f, "\n")
}

// latStats is print_report_lat's arithmetic over the round trips: every
// value in microseconds, one way (a round trip halved) for write and send.
type latStats struct {
	Min, Max, Typical, Avg, Stdev, P99, P999 float64
}

// latencyStats computes the report from the post timestamps (cycles), as
// perftest does: the deltas between consecutive posts, sorted, the two
// largest left out; the median of an even count is the integer mean of the
// middle two; the deviation sums squares of integer-truncated differences.
func latencyStats(tposted []uint64, mhz float64, rttFactor int) latStats {
	n := len(tposted) - 1
	delta := make([]uint64, n)
	for i := range delta {
		delta[i] = tposted[i+1] - tposted[i]
	}
	sort.Slice(delta, func(i, j int) bool { return delta[i] < delta[j] })
	q := mhz * float64(rttFactor)
	m := n - latMeasureTail
	var median uint64
	if (m-1)%2 != 0 {
		median = (delta[m/2] + delta[m/2-1]) / 2
	} else {
		median = delta[m/2]
	}
	sum := 0.0
	for i := 0; i < m; i++ {
		sum += float64(delta[i]) / q
	}
	avg := sum / float64(m)
	var sq float64
	for i := 0; i < m; i++ {
		d := int(avg - float64(delta[i])/q)
		sq += float64(d * d)
	}
	i99 := int(math.Ceil(float64(m) * 0.99))
	i999 := int(math.Ceil(float64(m) * 0.999))
	return latStats{
		Min: float64(delta[0]) / q, Max: float64(delta[m]) / q, Typical: float64(median) / q,
		Avg: avg, Stdev: math.Sqrt(sq / float64(m)), P99: float64(delta[i99]) / q, P999: float64(delta[i999]) / q,
	}
}

func (p *perf) printLatReport(size int) {
	rtt := 2
	if p.cfg.test.verb == verbRead || p.cfg.test.verb == verbAtomic {
		rtt = 1
	}
	s := latencyStats(p.tposted, p.mhz, rtt)
	fmt.Fprintf(p.stdout, reportFmtLat, size, p.cfg.iters, s.Min, s.Max, s.Typical, s.Avg, s.Stdev, s.P99, s.P999)
}

// latDuration is print_report_lat_duration's arithmetic: the mean one-way
// latency (a round trip halved for write and send) and the transactions
// per second over the sample.
func latDuration(sampleCycles uint64, iters int, mhz float64, rttFactor int) (latency, tps float64) {
	t := float64(sampleCycles)
	return t / mhz / float64(rttFactor) / float64(iters), float64(iters) / (t / (mhz * 1e6))
}

func (p *perf) printLatDurationReport(size, iters int) {
	rtt := 2
	if p.cfg.test.verb == verbRead || p.cfg.test.verb == verbAtomic {
		rtt = 1
	}
	lat, tps := latDuration(p.tcompleted[0]-p.tposted[0], iters, p.mhz, rtt)
	fmt.Fprintf(p.stdout, reportFmtLatDur, size, iters, lat, tps)
}

// bwResult is print_report_bw's arithmetic: the average over the whole
// run and, with per-message timestamps, the peak, the best rate from any
// post to any later completion.
func (p *perf) bwResult(size, n int, peak bool, postList, cqMod int) bwReport {
	factor := 1048576.0
	if p.cfg.gbits {
		factor = 125000000
	}
	last := 0
	if peak {
		last = n - 1
	}
	cyclesPerSec := p.mhz * 1e6
	sum := float64(p.tcompleted[last] - p.tposted[0])
	r := bwReport{Size: uint64(size), Iters: uint64(n)}
	r.Avg = float64(size) * float64(n) * cyclesPerSec / (sum * factor)
	r.MsgRate = float64(n) * cyclesPerSec / (sum * 1e6)
	if peak {
		best := p.tcompleted[n-1] - p.tposted[0]
		for i := 0; i < n; i += postList {
			for j := (i+1+cqMod-1)/cqMod*cqMod - 1; j < n; j += cqMod {
				if t := (p.tcompleted[j] - p.tposted[i]) / uint64(j-i+1); t < best {
					best = t
				}
			}
			if n%cqMod != 0 {
				j := n - 1
				if t := (p.tcompleted[j] - p.tposted[i]) / uint64(j-i+1); t < best {
					best = t
				}
			}
		}
		if best > 0 {
			r.Peak = float64(size) * cyclesPerSec / (float64(best) * factor)
		}
	}
	return r
}

func (p *perf) printBWReport(r bwReport) {
	if p.cfg.gbits && r.Avg < 0.1 {
		fmt.Fprintf(p.stdout, reportFmtExt, r.Size, r.Iters, r.Peak, r.Avg, r.MsgRate)
		return
	}
	fmt.Fprintf(p.stdout, reportFmt, r.Size, r.Iters, r.Peak, r.Avg, r.MsgRate)
}
