package main

import (
	"fmt"
	"strconv"
	"strings"
)

// A case is one comparison: a test and a message size, run by both tools
// with the same explicit settings (perftest's effective ones on rxe), and
// by ibperf with its own defaults where those differ.
type benchCase struct {
	Name   string // row label, e.g. "write_lat 2B"
	Test   string // write_lat, ...
	Size   int
	Iters  int
	Metric string // "lat" (t_typical µs, lower is better), "rate" (Mpps) or "bw" (MB/s), higher is better
	// Settings are the options given to both tools besides -s and -n:
	// perftest 4.5's effective settings on rxe, spelled out.
	Settings []string
	// GoDefaults: ibperf's own defaults differ from Settings for this
	// case, so ibperf also runs with -s and -n alone (a second column).
	GoDefaults bool
}

// Sizes and iterations of the comparison.
var (
	caseSizes = []int{2, 64, 4096, 65536}
	// perftest's limit for CQ moderation and ibperf's for batching
	// (MSG_SIZE_CQ_MOD_LIMIT); ibperf's inline default (bytes).
	cqModLimit, goInline = 8192, 220
)

// Iterations per run: enough for a stable median without making a pair
// take more than a few seconds under TCG.
const (
	itersLat     = 2000
	itersBWSmall = 6400 // a multiple of ibperf's default post list (32)
	itersBWLarge = 2000
)

// settings returns perftest 4.5's effective settings for test and size on
// rxe, as options that both tools take:
//
//   - inline 0: perftest disables inline data on devices it does not
//     recognize (ctx_set_max_inline), rxe among them; read and atomic
//     take no -I at all (both tools refuse it).
//   - TX depth 1 for latency, 128 for bandwidth (DEF_TX_LAT, DEF_TX_BW).
//   - bandwidth: one work request per post (post_list 1) and CQ
//     moderation 100 (DEF_CQ_MOD), or 1 above 8 KiB
//     (MSG_SIZE_CQ_MOD_LIMIT, when -Q is not given).
func settings(test string, size int) []string {
	var s []string
	if !strings.HasPrefix(test, "read") && !strings.HasPrefix(test, "atomic") {
		s = append(s, "-I", "0")
	}
	if strings.HasSuffix(test, "_lat") {
		return append(s, "-t", "1")
	}
	cqMod := 100
	if size > cqModLimit {
		cqMod = 1
	}
	return append(s, "-t", "128", "-l", "1", "-Q", strconv.Itoa(cqMod))
}

// goDefaultsDiffer reports whether ibperf given only -s and -n runs
// otherwise than with settings(test, size): it inlines writes and sends up
// to 220 B, and for bandwidth up to 8 KiB posts 32 messages per doorbell
// with one signaled per list (cmd/ibperf's package documentation).
func goDefaultsDiffer(test string, size int) bool {
	if strings.HasSuffix(test, "_bw") {
		return size <= cqModLimit
	}
	return (strings.HasPrefix(test, "write") || strings.HasPrefix(test, "send")) && size <= goInline
}

func sizeName(size int) string {
	switch {
	case size >= 1<<20 && size%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", size>>20)
	case size >= 1<<10 && size%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", size>>10)
	}
	return fmt.Sprintf("%dB", size)
}

// cases are the comparison's rows, in table order.
func cases() []benchCase {
	var cs []benchCase
	add := func(test string, size int) {
		c := benchCase{Name: test + " " + sizeName(size), Test: test, Size: size,
			Settings: settings(test, size), GoDefaults: goDefaultsDiffer(test, size)}
		switch {
		case strings.HasSuffix(test, "_lat"):
			c.Metric, c.Iters = "lat", itersLat
		case size > 4096:
			c.Metric, c.Iters = "bw", itersBWLarge
		default:
			c.Metric, c.Iters = "rate", itersBWSmall
		}
		cs = append(cs, c)
	}
	for _, verb := range []string{"write", "send", "read"} {
		for _, kind := range []string{"_lat", "_bw"} {
			for _, s := range caseSizes {
				add(verb+kind, s)
			}
		}
	}
	add("atomic_lat", 8)
	add("atomic_bw", 8)
	return cs
}

// selectCases returns the cases whose name contains one of the
// comma-separated items of only (all of them for "").
func selectCases(only string) []benchCase {
	items := splitList(only)
	var cs []benchCase
	for _, c := range cases() {
		keep := len(items) == 0
		for _, it := range items {
			keep = keep || strings.Contains(c.Name, it)
		}
		if keep {
			cs = append(cs, c)
		}
	}
	return cs
}

// sweepTests are the tests drawn against message size (-a).
var sweepTests = []string{"write_lat", "write_bw"}

// sweepArgs are the options of a -a run of test: perftest's settings as
// above (CQ moderation stays 100 at every size under -a in both tools).
func sweepArgs(test string, iters int) []string {
	return append([]string{"-a", "-n", strconv.Itoa(iters)}, settings(test, 0)...)
}
