package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/goverbs/goverbs/internal/benchstat"
	"github.com/goverbs/goverbs/internal/svgplot"
)

// stat is one tool's samples of a case.
type stat struct {
	All           []float64
	Med, Min, Max float64
}

func newStat(v []float64) stat {
	s := stat{All: v, Med: benchstat.Median(v)}
	s.Min, s.Max = minMax(v)
	return s
}

// row is one case's summary on one kernel.
type row struct {
	benchCase
	C, Go, GoDef stat
	Interop      string // "ok", or what failed
	Failures     []string
}

// ratio is Go/C of the medians, 0 where either has no sample.
func ratio(g, c stat) float64 {
	if len(g.All) == 0 || len(c.All) == 0 || c.Med == 0 {
		return 0
	}
	return g.Med / c.Med
}

// Verdicts on two tools' min–max ranges.
const (
	verdictOverlap = "overlap"
	verdictBetter  = "separate: ibperf better"
	verdictWorse   = "separate: ibperf worse"
	verdictNone    = "n/a"
)

// verdict says whether g's and c's min–max ranges overlap, and if not
// which side is better (lower latency, higher rate or bandwidth).
func verdict(metric string, g, c stat) string {
	switch {
	case len(g.All) == 0 || len(c.All) == 0:
		return verdictNone
	case !benchstat.Separate(g.All, c.All):
		return verdictOverlap
	case (g.Max < c.Min) == (metric == "lat"):
		return verdictBetter
	}
	return verdictWorse
}

func minMax(v []float64) (float64, float64) {
	if len(v) == 0 {
		return 0, 0
	}
	return slices.Min(v), slices.Max(v)
}

// summarize groups measurements by case, in the order cases() gives;
// cases that cases() does not know (an older file) come last.
func summarize(ms []measurement) []row {
	known := map[string]int{}
	all := cases()
	for i, c := range all {
		known[c.Name] = i
	}
	rows := map[string]*row{}
	samples := map[string]map[string][]float64{}
	var order []string
	for _, m := range ms {
		r := rows[m.Case]
		if r == nil {
			r = &row{Interop: "ok"}
			if i, ok := known[m.Case]; ok {
				r.benchCase = all[i]
			} else {
				r.Name = m.Case
			}
			rows[m.Case], samples[m.Case] = r, map[string][]float64{}
			order = append(order, m.Case)
		}
		switch {
		case !m.OK:
			when := fmt.Sprintf("rep %d", m.Rep)
			if m.Rep == 0 {
				when = "cross-tool run"
			}
			r.Failures = append(r.Failures, fmt.Sprintf("%s, %s: %s", toolName(m.Tool), when, m.Detail))
			if m.Tool == "go-c" || m.Tool == "c-go" {
				r.Interop = "FAIL " + m.Tool
			}
		case m.Tool == "go" || m.Tool == "c" || m.Tool == "godef":
			samples[m.Case][m.Tool] = append(samples[m.Case][m.Tool], m.Value)
		}
	}
	pos := func(name string) int {
		if i, ok := known[name]; ok {
			return i
		}
		return len(all)
	}
	sort.SliceStable(order, func(i, j int) bool { return pos(order[i]) < pos(order[j]) })
	var out []row
	for _, name := range order {
		r, s := rows[name], samples[name]
		r.C, r.Go, r.GoDef = newStat(s["c"]), newStat(s["go"]), newStat(s["godef"])
		out = append(out, *r)
	}
	return out
}

func toolName(t string) string {
	switch t {
	case "c":
		return "perftest"
	case "go":
		return "ibperf"
	case "godef":
		return "ibperf (own defaults)"
	case "go-c":
		return "ibperf server, perftest client"
	case "c-go":
		return "perftest server, ibperf client"
	}
	return t
}

var units = map[string]string{"lat": "t_typical µs", "bw": "MB/s", "rate": "Mpps"}

func (r row) format(v float64) string {
	if r.Metric == "rate" {
		return fmt.Sprintf("%.4g", v) // 0.03912, 0.0009641: perftest prints 6 decimals
	}
	return fmt.Sprintf("%.2f", v)
}

func (r row) cell(s stat) string {
	if len(s.All) == 0 {
		return "no figure"
	}
	return fmt.Sprintf("%s (%s–%s)", r.format(s.Med), r.format(s.Min), r.format(s.Max))
}

func ratioCell(x float64) string {
	if x == 0 {
		return "–"
	}
	return fmt.Sprintf("%.3f", x)
}

// settingsText is how a case's shared settings read in a table.
func (c benchCase) settingsText() string {
	if c.Settings == nil {
		return ""
	}
	return fmt.Sprintf("`%s -n %d`", strings.Join(c.Settings, " "), c.Iters)
}

// printTable writes one kernel's table in Markdown.
func printTable(w io.Writer, rows []row) {
	fmt.Fprintln(w, "| case | settings (both tools) | unit | perftest median (min–max) | ibperf median (min–max) | Go/C | ranges | ibperf, own defaults: median (min–max) | Go/C | ranges | runs C/Go/own | interop |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		def, defRatio, defVerdict := "same settings", "", ""
		if r.GoDefaults {
			def, defRatio, defVerdict = r.cell(r.GoDef), ratioCell(ratio(r.GoDef, r.C)), verdict(r.Metric, r.GoDef, r.C)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d/%d/%d | %s |\n", r.Name, r.settingsText(), units[r.Metric],
			r.cell(r.C), r.cell(r.Go), ratioCell(ratio(r.Go, r.C)), verdict(r.Metric, r.Go, r.C),
			def, defRatio, defVerdict, len(r.C.All), len(r.Go.All), len(r.GoDef.All), r.Interop)
	}
	var fails []string
	for _, r := range rows {
		for _, f := range r.Failures {
			fails = append(fails, fmt.Sprintf("- %s, %s", r.Name, shorten(f, 400)))
		}
	}
	if len(fails) > 0 {
		fmt.Fprintf(w, "\nFailed runs (%d):\n\n%s\n", len(fails), strings.Join(fails, "\n"))
	}
}

// shorten puts s on one line of at most n bytes.
func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + " …"
	}
	return s
}

// renderTables writes the heading facts and one table per kernel.
func renderTables(w io.Writer, run *rawRun) {
	fmt.Fprintf(w, "Run %s at commit %s: `%s`.\n", run.Date, run.Commit, run.Command)
	fmt.Fprintf(w, "Host load (/proc/loadavg) before: `%s`, after: `%s`. %d repetitions per tool and case; devices: %s.\n", run.LoadBefore, run.LoadAfter, run.Reps, run.Devices)
	for _, k := range run.Kernels {
		fmt.Fprintf(w, "\n#### Kernel %s (%s), %s\n\n", k.Kernel, k.Release, durationText(k.Seconds))
		printTable(w, summarize(k.Measurements))
	}
}

func durationText(s float64) string {
	return fmt.Sprintf("%dh%02dm", int(s)/3600, int(s)/60%60)
}

// Markers around the generated text.
const (
	docsBegin   = "<!-- perfcompare:begin (generated by internal/perfcompare; edits between these markers are overwritten) -->"
	docsEnd     = "<!-- perfcompare:end -->"
	readmeBegin = "<!-- perfcompare-summary:begin (generated by internal/perfcompare) -->"
	readmeEnd   = "<!-- perfcompare-summary:end -->"
)

// settingsProse describes perftest's effective settings on rxe, which
// both tools are given.
const settingsProse = "no inline data (`-I 0`: perftest disables inline on devices it does not recognize, rxe among them; " +
	"read and atomic take no -I), TX depth 1 for latency and 128 for bandwidth (`-t`), one work request per post (`-l 1`), " +
	"and CQ moderation 100 for bandwidth up to 8 KiB and 1 above (`-Q`)"

// ownDefaultsProse describes where ibperf's defaults differ.
const ownDefaultsProse = "writes and sends up to 220 B inline; bandwidth up to 8 KiB posts 32 messages per doorbell with one " +
	"signaled per list"

// renderDocs is the generated section of docs/performance.md.
func renderDocs(run *rawRun, haveCharts bool) string {
	var b bytes.Buffer
	fmt.Fprintln(&b, "## Results: ibperf against perftest (generated)")
	fmt.Fprintln(&b)
	var ks []string
	for _, k := range run.Kernels {
		ks = append(ks, fmt.Sprintf("%s (%s)", k.Kernel, k.Release))
	}
	fmt.Fprintf(&b, "Kernels %s. Both tools run on rxe0, the client connecting to 127.0.0.1, alternating: perftest first on odd "+
		"repetitions, ibperf first on even ones. **Settings**: every case runs both tools with perftest 4.5's effective settings on "+
		"rxe, given explicitly to both (the settings column): %s. Where ibperf's own defaults differ (%s), ibperf also runs "+
		"with `-s` and `-n` alone, compared with the same perftest samples (\"own defaults\"). The figure taken is the "+
		"client's: t_typical for latency (lower is better), the message rate up to 4 KiB and the average bandwidth at 64 KiB "+
		"(higher is better). Go/C is ibperf's median over perftest's; *ranges* says whether the two tools' min–max ranges "+
		"overlap or separate (and then which side is better).\n\n", strings.Join(ks, " and "), settingsProse, ownDefaultsProse)
	renderTables(&b, run)
	if haveCharts {
		fmt.Fprintf(&b, "\n#### Message size sweeps\n\nwrite_lat and write_bw with `-a` (2 B to 8 MiB), `-n %d`, perftest's settings "+
			"as above, %d sweeps per tool and kernel, the tools alternating (a failed sweep runs once more); each point is the median of the sweeps that completed (the legend says how many). Bandwidth is perftest's average in MB/s (2^20 bytes), computed from the message rate where it is under 1 MB/s (perftest prints two decimals).\n\n"+
			"![write_lat against message size](perf-write_lat.svg)\n\n![write_bw against message size](perf-write_bw.svg)\n",
			run.SweepIters, run.SweepReps)
	}
	return b.String()
}

// tally gathers the ratios of one test's rows, every kernel's, for one
// ibperf column.
type tally struct {
	ratios            []float64
	rows              int
	separate, missing []string // e.g. "4KiB on 6.12 ibperf worse"
}

func (t *tally) add(where, metric string, g, c stat) {
	t.rows++
	if x := ratio(g, c); x != 0 {
		t.ratios = append(t.ratios, x)
	} else {
		t.missing = append(t.missing, where)
	}
	if v := verdict(metric, g, c); strings.HasPrefix(v, "separate") {
		t.separate = append(t.separate, where+" "+strings.TrimPrefix(v, "separate: "))
	}
}

func (t *tally) String() string { return rangeText(t.ratios, t.rows, t.separate, t.missing) }

// renderReadme is the generated summary in README.md: per test, the
// lowest and highest ratio over every row, with the rows whose ranges
// separate and those without a figure named.
func renderReadme(run *rawRun) string {
	var order []string
	prim, def := map[string]*tally{}, map[string]*tally{}
	var kernels []string
	for _, k := range run.Kernels {
		kernels = append(kernels, k.Kernel)
		for _, r := range summarize(k.Measurements) {
			if prim[r.Test] == nil {
				prim[r.Test], def[r.Test] = new(tally), new(tally)
				order = append(order, r.Test)
			}
			where := sizeName(r.Size) + " on " + k.Kernel
			prim[r.Test].add(where, r.Metric, r.Go, r.C)
			if r.GoDefaults {
				def[r.Test].add(where, r.Metric, r.GoDef, r.C)
			}
		}
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "- **ibperf against perftest** (`make perfcompare`, %s, commit %s, %d repetitions per tool and case, "+
		"kernels %s): ibperf/perftest of the medians, lowest–highest over every row of "+
		"[docs/performance.md](docs/performance.md) (all sizes, all kernels), naming the rows where the two tools' min–max ranges separate, for t_typical (latency: below 1 is ibperf faster) "+
		"and message rate or bandwidth (above 1 is ibperf faster). Both tools with perftest's settings on rxe: %s.\n",
		dateOnly(run.Date), run.Commit, run.Reps, strings.Join(kernels, " and "), settingsProse)
	for _, name := range order {
		fmt.Fprintf(&b, "  - %s: %s\n", name, prim[name])
	}
	fmt.Fprintf(&b, "  - ibperf with its own defaults (%s) against the same perftest samples:", ownDefaultsProse)
	first := true
	for _, name := range order {
		if def[name].rows == 0 {
			continue
		}
		if !first {
			b.WriteString(";")
		}
		first = false
		fmt.Fprintf(&b, " %s %s", name, def[name])
	}
	if first {
		b.WriteString(" not run")
	}
	b.WriteString(".\n")
	return b.String()
}

func dateOnly(d string) string {
	if len(d) >= 10 {
		return d[:10]
	}
	return d
}

// rangeText is "0.93–1.21 over 8 rows (ranges overlap in all; ...)".
func rangeText(ratios []float64, rows int, separate, missing []string) string {
	var s string
	switch len(ratios) {
	case 0:
		s = "no figure"
	case 1:
		s = fmt.Sprintf("%.2f", ratios[0])
	default:
		lo, hi := minMax(ratios)
		s = fmt.Sprintf("%.2f–%.2f", lo, hi)
	}
	unit := "rows"
	if rows == 1 {
		unit = "row"
	}
	s += fmt.Sprintf(" over %d %s", rows, unit)
	switch {
	case len(ratios) == 0:
	case len(separate) == 0:
		s += ", ranges overlapping in every row"
	default:
		s += fmt.Sprintf(", ranges separate in %d (%s)", len(separate), strings.Join(separate, ", "))
	}
	if len(missing) > 0 {
		s += fmt.Sprintf(", %d without a figure (%s)", len(missing), strings.Join(missing, ", "))
	}
	return s
}

// charts draws the sweeps: one chart per test, a line per tool and
// kernel, each point the median of that size's sweeps.
func charts(run *rawRun) map[string]*svgplot.Chart {
	out := map[string]*svgplot.Chart{}
	for _, test := range sweepTests {
		c := &svgplot.Chart{Title: test + ": perftest 4.5 and ibperf on rxe (QEMU TCG), median of the sweeps",
			XLabel: "message size (bytes)", LogY: true, Width: 820, Height: 520}
		if strings.HasSuffix(test, "_lat") {
			c.YLabel = "t_typical (µs)"
		} else {
			c.YLabel = "average bandwidth (MB/s)"
		}
		for _, k := range run.Kernels {
			for _, tool := range []string{"c", "go"} {
				per := map[int][]float64{}
				for _, s := range k.Sweeps {
					if s.Test != test || s.Tool != tool || !s.OK {
						continue
					}
					for _, p := range s.Points {
						per[p.Size] = append(per[p.Size], p.Value)
					}
				}
				if len(per) == 0 {
					continue
				}
				var sizes []int
				for sz := range per {
					sizes = append(sizes, sz)
				}
				sort.Ints(sizes)
				ser := svgplot.Series{Name: fmt.Sprintf("%s, kernel %s (%d sweeps)", toolName(tool), k.Kernel, len(per[sizes[0]])), Dashed: tool == "go"}
				for _, sz := range sizes {
					ser.Points = append(ser.Points, svgplot.Point{X: float64(sz), Y: benchstat.Median(per[sz])})
				}
				c.Series = append(c.Series, ser)
			}
		}
		if len(c.Series) > 0 {
			out[test] = c
		}
	}
	return out
}

// replaceBetween replaces what lies between the lines begin and end of
// text with body.
func replaceBetween(text, begin, end, body string) (string, error) {
	i := strings.Index(text, begin)
	j := strings.Index(text, end)
	if i < 0 || j < i {
		return "", errors.New("no " + begin + " … " + end + " markers")
	}
	return text[:i] + begin + "\n" + strings.TrimRight(body, "\n") + "\n" + text[j:], nil
}

func rewrite(path, begin, end, body string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	t, err := replaceBetween(string(b), begin, end, body)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, []byte(t), 0o644)
}

// writeDocs writes the charts, the section of docs/performance.md and the
// summary in README.md under root.
func writeDocs(root string, run *rawRun) error {
	cs := charts(run)
	for test, c := range cs {
		var b bytes.Buffer
		if err := c.Write(&b); err != nil {
			return fmt.Errorf("chart of %s: %w", test, err)
		}
		if err := os.WriteFile(filepath.Join(root, "docs", "perf-"+test+".svg"), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	if err := rewrite(filepath.Join(root, "docs", "performance.md"), docsBegin, docsEnd, renderDocs(run, len(cs) == len(sweepTests))); err != nil {
		return err
	}
	return rewrite(filepath.Join(root, "README.md"), readmeBegin, readmeEnd, renderReadme(run))
}
