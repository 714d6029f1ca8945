package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/goverbs/goverbs/internal/testvm/vmproc"
)

// pairTimeout bounds one server+client run.
const pairTimeout = 4 * time.Minute

const (
	serverAddr = "10.99.0.1" // rxe0, va
	clientAddr = "10.99.0.2" // rxe1, vb
)

// value reads the client's row of an rstream custom test: usec/xfer, or
// for bandwidth size bytes per usec/xfer (MB/s over both directions).
func value(metric string, size int, out string) (float64, error) {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) != 8 || f[0] != "custom" {
			continue
		}
		if strings.Contains(out, "verification failed") {
			return 0, errors.New("data verification failed")
		}
		us, err := strconv.ParseFloat(f[7], 64)
		if err != nil || us <= 0 {
			return 0, fmt.Errorf("usec/xfer %q in the client's row", f[7])
		}
		if metric == "lat" {
			return us, nil
		}
		return float64(size) / us, nil
	}
	return 0, errors.New("no custom row in the client's output")
}

type guest struct {
	ctx     context.Context
	rstream string
	port    int
}

func guestMain(ctx context.Context, rstream string, reps int, only string) int {
	g := &guest{ctx: ctx, rstream: rstream, port: 22000}
	var cs []benchCase
	for _, c := range cases() {
		if strings.Contains(c.Name, only) {
			cs = append(cs, c)
		}
	}
	emit := func(c benchCase, tool string, rep int, v float64, err error) {
		m := measurement{Case: c.Name, Tool: tool, Rep: rep, Value: v, OK: err == nil}
		if err != nil {
			m.Detail = err.Error()
		}
		b, _ := json.Marshal(m)
		fmt.Printf("%s%s\n", linePrefix, b)
	}
	// Wire check: each case once across the tools, with -T v.
	for _, c := range cs {
		for _, p := range [][2]string{{"go", "c"}, {"c", "go"}} {
			v, err := g.pair(c, p[0], p[1], "-T", "v")
			emit(c, p[0]+"-"+p[1], 0, v, err)
		}
	}
	for rep := 1; rep <= reps; rep++ {
		for _, c := range cs {
			for i := range tools {
				tool := tools[(i+rep)%len(tools)]
				v, err := g.pair(c, tool, tool)
				emit(c, tool, rep, v, err)
			}
		}
	}
	return 0
}

// command is the argv of one side: tool go, c or tcp (C with -T s).
func (g *guest) command(tool string, c benchCase, server bool, extra []string) []string {
	argv := []string{"rstream"}
	if tool == "go" {
		argv = []string{g.rstream}
	}
	if server {
		argv = append(argv, "-b", serverAddr)
	} else {
		argv = append(argv, "-s", serverAddr, "-b", clientAddr)
	}
	argv = append(argv, "-p", strconv.Itoa(g.port), "-T", "b")
	if tool == "tcp" {
		argv = append(argv, "-T", "s")
	}
	argv = append(argv, "-S", strconv.Itoa(c.Size))
	argv = append(argv, c.Args...)
	return append(argv, extra...)
}

// pair runs a server of one tool and a client of the other (or the same)
// and returns the client's figure.
func (g *guest) pair(c benchCase, serverTool, clientTool string, extra ...string) (float64, error) {
	ctx, cancel := context.WithTimeout(g.ctx, pairTimeout)
	defer cancel()
	g.port++
	port := g.port
	listening := func() bool { return vmproc.CMListening("TCP", port) }
	if serverTool == "tcp" {
		listening = func() bool { return vmproc.Listening(port) }
	}
	cliOut, _, err := vmproc.RunPairWhen(ctx, listening, g.command(serverTool, c, true, extra),
		g.command(clientTool, c, false, extra), nil)
	if err != nil {
		return 0, err
	}
	return value(c.Metric, c.Size, cliOut)
}
