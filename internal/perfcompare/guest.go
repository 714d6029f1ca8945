package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/goverbs/goverbs/internal/testvm/vmproc"
)

// pairTimeout bounds one server+client run.
const pairTimeout = 4 * time.Minute

// The result rows: numbers, or what C's printf makes of a NaN (perftest's
// t_stdev squares an int and can overflow into "-nan").
var (
	num      = `(-?nan|inf|[\d.]+)`
	latRowRE = regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)` + strings.Repeat(`\s+`+num, 7) + `\s*$`)
	bwRowRE  = regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)` + strings.Repeat(`\s+`+num, 3) + `\s*$`)
)

// value reads a client's result row: t_typical for latency, the average
// bandwidth or the message rate for bandwidth.
func value(metric, out string) (float64, error) {
	re, col := bwRowRE, 4
	switch metric {
	case "lat":
		re, col = latRowRE, 5
	case "rate":
		col = 5
	}
	m := re.FindStringSubmatch(out)
	if m == nil {
		return 0, errors.New("no result row in the client's output")
	}
	return strconv.ParseFloat(m[col], 64)
}

type guest struct {
	ctx        context.Context
	ibperf     string
	serverDev  string
	host       string
	port       int
	clientEnv  []string
	lastOutput string
}

func guestMain(ctx context.Context, ibperf string, reps int, devices, only, profile string) int {
	g := &guest{ctx: ctx, ibperf: ibperf, serverDev: "rxe0", host: "127.0.0.1", port: 21000}
	if devices == "pair" {
		g.serverDev, g.host = "rxe1", "10.99.0.2"
	}
	var cs []benchCase
	for _, c := range cases() {
		if strings.Contains(c.Name, only) {
			cs = append(cs, c)
		}
	}
	emit := func(m measurement) {
		b, _ := json.Marshal(m)
		fmt.Printf("%s%s\n", linePrefix, b)
	}
	// Wire compatibility: each case once across the tools.
	for _, c := range cs {
		for _, pair := range [][2]string{{"go", "c"}, {"c", "go"}} {
			v, err := g.pair(c, pair[0], pair[1])
			m := measurement{Case: c.Name, Tool: pair[0] + "-" + pair[1], Value: v, OK: err == nil}
			if err != nil {
				m.Detail = err.Error()
			}
			emit(m)
		}
	}
	for rep := 1; rep <= reps; rep++ {
		for _, c := range cs {
			order := []string{"c", "go"}
			if rep%2 == 0 {
				order = []string{"go", "c"}
			}
			for _, tool := range order {
				v, err := g.pair(c, tool, tool)
				m := measurement{Case: c.Name, Tool: tool, Rep: rep, Value: v, OK: err == nil}
				if err != nil {
					m.Detail = err.Error()
				}
				emit(m)
			}
		}
	}
	for _, name := range splitList(profile) {
		for _, c := range cases() {
			if c.Name != name {
				continue
			}
			g.clientEnv = []string{"IBPERF_CPUPROFILE=" + profilePath(name)}
			v, err := g.pair(c, "go", "go")
			g.clientEnv = nil
			fmt.Fprintf(os.Stderr, "profiled run of %s: %v %v\n", c.Name, v, err)
		}
	}
	return 0
}

// command is the argv of tool for a case.
func (g *guest) command(tool string, c benchCase, dev string, server bool) []string {
	var argv []string
	if tool == "go" {
		argv = []string{g.ibperf, c.Test}
	} else {
		argv = []string{"ib_" + c.Test}
	}
	argv = append(argv, "-d", dev, "-x", "1", "-p", strconv.Itoa(g.port))
	argv = append(argv, c.Args...)
	if tool == "go" {
		argv = append(argv, c.GoArgs...)
	}
	if !server {
		argv = append(argv, g.host)
	}
	return argv
}

// pair runs a server of one tool and a client of the other (or the same)
// and returns the client's figure.
func (g *guest) pair(c benchCase, serverTool, clientTool string) (float64, error) {
	ctx, cancel := context.WithTimeout(g.ctx, pairTimeout)
	defer cancel()
	g.port++
	cliOut, _, err := vmproc.RunPair(ctx, g.port, g.command(serverTool, c, g.serverDev, true),
		g.command(clientTool, c, "rxe0", false), g.clientEnv)
	g.lastOutput = cliOut
	if err != nil {
		return 0, err
	}
	return value(c.Metric, cliOut)
}
