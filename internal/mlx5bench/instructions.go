package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"

	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// With -instructions, mlx5bench also counts the instructions each side
// executes per iteration, under valgrind's callgrind: a figure the host's
// load does not move, which says whether a difference in time is code or
// machine. Counted are the library's own functions, each call's
// instructions with those of what it calls: provider/mlx5's
// (*sendQueue).post and (*CQ).Poll (the benchmark calls them through
// QP.PostSend, which the compiler inlines into it), and libmlx5's
// post_send and poll_cq (ibv_post_send and ibv_poll_cq are inline
// functions of libibverbs calling them through the context's ops; bench
// tells where they lie when BENCH_OPS is set). An iteration is one post
// and one poll (poll16: one poll of 16; its posts are untimed). Every
// call of a case takes the same path, so the untimed calls (the first
// pass of the ring, the probe) count as the timed ones do.
//
// Callgrind counts instructions, not cycles: a locked instruction, a
// cache miss or a mispredicted branch counts one.

// irCase is one case's count: instructions per call of post and poll,
// and per iteration.
type irCase struct {
	goPost, goPoll, cPost, cPoll float64
	goIter, cIter                float64
}

// countInstructions runs both sides of case c under callgrind for iters
// iterations and counts.
func countInstructions(c benchCase, iters int, dir, goTest, sysfs string, env []string) (irCase, error) {
	var r irCase
	goOut := filepath.Join(dir, "callgrind.go."+c.Name)
	// Callgrind stops at the signals the Go runtime preempts with.
	cmd := exec.Command("valgrind", "--tool=callgrind", "--callgrind-out-file="+goOut, goTest,
		"-test.run", "^$", "-test.bench", "^BenchmarkVsLibmlx5$/^"+c.Name+"$", "-test.benchtime", strconv.Itoa(iters)+"x")
	cmd.Dir = "provider/mlx5"
	cmd.Env = append(env, "GODEBUG=asyncpreemptoff=1")
	if _, err := output(cmd); err != nil {
		return r, err
	}
	fns, err := annotate(goOut)
	if err != nil {
		return r, err
	}
	if r.goPost, r.goPoll, err = perCall(fns, `\.\(\*sendQueue\)\.post`, `\.\(\*CQ\)\.Poll`, c.Name == "poll16"); err != nil {
		return r, fmt.Errorf("goverbs side: %w", err)
	}

	cCmd := func(extra ...string) *exec.Cmd {
		args := append(extra, filepath.Join(dir, "bench"), sysfs, c.Name, strconv.Itoa(iters))
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(env, "LD_PRELOAD="+filepath.Join(dir, "libfakekernel.so"), "BENCH_OPS=1")
		return cmd
	}
	b, err := output(cCmd())
	if err != nil {
		return r, err
	}
	post, poll, err := parseOps(b)
	if err != nil {
		return r, err
	}
	cOut := filepath.Join(dir, "callgrind.c."+c.Name)
	if _, err := output(cCmd("valgrind", "--tool=callgrind", "--callgrind-out-file="+cOut)); err != nil {
		return r, err
	}
	if fns, err = annotate(cOut); err != nil {
		return r, err
	}
	if r.cPost, r.cPoll, err = perCall(fns, fmt.Sprintf(`:0x%016x`, post), fmt.Sprintf(`:0x%016x`, poll), c.Name == "poll16"); err != nil {
		return r, fmt.Errorf("libmlx5 side: %w", err)
	}
	r.goIter, r.cIter = r.goPost+r.goPoll, r.cPost+r.cPoll
	return r, nil
}

// parseOps reads bench's line "ops <file> <post_send offset> <poll_cq
// offset>".
func parseOps(out []byte) (post, poll uint64, err error) {
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 4 && f[0] == "ops" {
			post, err1 := strconv.ParseUint(f[2], 0, 64)
			poll, err2 := strconv.ParseUint(f[3], 0, 64)
			if err1 != nil || err2 != nil {
				break
			}
			return post, poll, nil
		}
	}
	return 0, 0, fmt.Errorf("no ops line in bench's output:\n%s", out)
}

// fnCount is a function's inclusive instructions and the calls of it.
type fnCount struct{ ir, calls uint64 }

// annotate reads callgrind_annotate's caller tree of a callgrind output
// file: per function, the instructions of its calls (with their
// callees') and the calls, summed over its callers.
func annotate(file string) (map[string]fnCount, error) {
	cmd := exec.Command("callgrind_annotate", "--tree=caller", "--inclusive=yes", "--threshold=100", file)
	b, err := output(cmd)
	if err != nil {
		return nil, err
	}
	return parseTree(bytes.NewReader(b))
}

var (
	callerLine = regexp.MustCompile(`^\s*[\d,]+\s.*<\s.*\(([\d,]+)x\)`)
	fnLine     = regexp.MustCompile(`^\s*([\d,]+)\s.*\*\s+(.*)$`)
)

func number(s string) (uint64, error) {
	return strconv.ParseUint(strings.ReplaceAll(s, ",", ""), 10, 64)
}

// parseTree parses callgrind_annotate --tree=caller output: blocks of
// "<" lines (a caller and its calls) closed by the function's "*" line.
func parseTree(r io.Reader) (map[string]fnCount, error) {
	fns := make(map[string]fnCount)
	var calls uint64
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.TrimSpace(l) == "" {
			calls = 0
			continue
		}
		if m := callerLine.FindStringSubmatch(l); m != nil {
			n, err := number(m[1])
			if err != nil {
				return nil, fmt.Errorf("callgrind_annotate line %q: %w", l, err)
			}
			calls += n
			continue
		}
		if m := fnLine.FindStringSubmatch(l); m != nil && calls > 0 {
			ir, err := number(m[1])
			if err != nil {
				return nil, fmt.Errorf("callgrind_annotate line %q: %w", l, err)
			}
			fns[m[2]] = fnCount{ir, calls}
			calls = 0
		}
	}
	return fns, sc.Err()
}

// perCall finds the functions named by the patterns post and poll
// (regular expressions the name must end with, before callgrind's
// " [object]") and returns their instructions per call; pollOnly leaves
// post at 0. Only functions that have callers count: callgrind may give
// part of a Go function's instructions a second name of its own, with no
// calls, which the first name's inclusive count already holds.
func perCall(fns map[string]fnCount, post, poll string, pollOnly bool) (float64, float64, error) {
	find := func(pat string) (float64, error) {
		re, err := regexp.Compile(pat + `( \[.*\])?$`)
		if err != nil {
			return 0, err
		}
		var found []fnCount
		for name, f := range fns {
			if re.MatchString(name) {
				found = append(found, f)
			}
		}
		if len(found) != 1 {
			return 0, fmt.Errorf("%d functions named %q in callgrind's output", len(found), pat)
		}
		return float64(found[0].ir) / float64(found[0].calls), nil
	}
	pl, err := find(poll)
	if err != nil || pollOnly {
		return 0, pl, err
	}
	ps, err := find(post)
	return ps, pl, err
}

// haveCallgrind reports whether valgrind and callgrind_annotate are on
// the PATH.
func haveCallgrind() error {
	for _, t := range []string{"valgrind", "callgrind_annotate"} {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Errorf("-instructions needs %s (Debian: apt install valgrind): %w", t, err)
		}
	}
	return nil
}

func writeInstructions(w io.Writer, cs []benchCase, ir map[string]irCase, iters map[string]int) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Instructions per iteration, counted by valgrind's callgrind (one run per side and case; the count does")
	fmt.Fprintln(w, "not depend on the host's load): goverbs' (*sendQueue).post and (*CQ).Poll, libmlx5's post_send and poll_cq,")
	fmt.Fprintln(w, "each with what it calls; poll16 counts its poll of 16 only.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| case | iterations counted | Go post + poll | C post + poll | Go instructions | C instructions | Go/C |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, c := range cs {
		r, ok := ir[c.Name]
		if !ok {
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %.0f + %.0f | %.0f + %.0f | %.0f | %.0f | %.3f |\n", c.Name, iters[c.Name],
			r.goPost, r.goPoll, r.cPost, r.cPoll, r.goIter, r.cIter, r.goIter/r.cIter)
	}
}
