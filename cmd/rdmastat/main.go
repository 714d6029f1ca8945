// Command rdmastat prints the RDMA counters and resources operators ask
// for most, from RDMA netlink, without iproute2:
//
//	rdmastat [-j] [-d DEV] [TOPIC...]
//
// Topics (default: stat res):
//
//	stat    the hardware counters of every port (rdma statistic)
//	qpstat  the per-QP counters (rdma statistic qp show)
//	res     the resource counts of every device (rdma res)
//	qp, cq, mr, pd, cm_id, ctx
//	        the resources with their owners (rdma res show qp, ...)
//	link    the ports, their state and network devices (rdma link)
//	dev     the devices (rdma dev)
//
// -j prints each topic as one line of JSON: the array rdma -j prints for
// it, key for key. -d limits the output to one device.
//
// rdmastat is a command of its own rather than flags on ibinfo because
// ibinfo's output is, by contract, ibv_devinfo's byte for byte; counters
// and resources are rdma's side of the house, and rdmastat speaks its
// JSON.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/goverbs/goverbs/rdmanl"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

var topics = []string{"stat", "qpstat", "res", "qp", "cq", "mr", "pd", "cm_id", "ctx", "link", "dev"}

// run is rdmastat with its arguments and outputs; it returns the exit
// status: 0, 1 when a query failed, 2 for a bad command line.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rdmastat", flag.ContinueOnError)
	fs.SetOutput(stderr)
	jsonOut := fs.Bool("j", false, "print JSON, as rdma -j does")
	dev := fs.String("d", "", "only the device `DEV`")
	timeout := fs.Duration("timeout", 10*time.Second, "give up after `DURATION`")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: rdmastat [-j] [-d DEV] [TOPIC...]\ntopics: %s (default: stat res)\n", strings.Join(topics, " "))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	want := fs.Args()
	if len(want) == 0 {
		want = []string{"stat", "res"}
	}
	for _, w := range want {
		if !contains(topics, w) {
			fmt.Fprintf(stderr, "rdmastat: unknown topic %q (topics: %s)\n", w, strings.Join(topics, " "))
			return 2
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	c, err := rdmanl.Dial()
	if err != nil {
		fmt.Fprintf(stderr, "rdmastat: %v\n", err)
		return 1
	}
	defer c.Close()
	sel := int64(rdmanl.AllDevices)
	if *dev != "" {
		d, err := c.Device(ctx, *dev)
		if err != nil {
			fmt.Fprintf(stderr, "rdmastat: %v\n", err)
			return 1
		}
		sel = int64(d.Index)
	}
	status := 0
	for _, w := range want {
		items, err := query(ctx, c, w, sel, *dev)
		if err != nil {
			fmt.Fprintf(stderr, "rdmastat: %s: %v\n", w, err)
			status = 1
			continue
		}
		if err := write(stdout, w, items, *jsonOut); err != nil {
			fmt.Fprintf(stderr, "rdmastat: %v\n", err)
			return 1
		}
	}
	return status
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// query returns the topic's results as a slice of rdmanl values.
func query(ctx context.Context, c *rdmanl.Conn, topic string, sel int64, dev string) (any, error) {
	keep := func(name string) bool { return dev == "" || name == dev }
	switch topic {
	case "stat":
		pcs, err := c.AllPortCounters(ctx)
		return filter(pcs, func(p rdmanl.PortCounters) bool { return keep(p.DevName) }), err
	case "qpstat":
		return c.QPCounters(ctx, sel)
	case "res":
		s, err := c.Summary(ctx)
		return filter(s, func(x rdmanl.Summary) bool { return keep(x.DevName) }), err
	case "qp":
		return c.QPs(ctx, sel)
	case "cq":
		return c.CQs(ctx, sel)
	case "mr":
		return c.MRs(ctx, sel)
	case "pd":
		return c.PDs(ctx, sel)
	case "cm_id":
		return c.CMIDs(ctx, sel)
	case "ctx":
		return c.Contexts(ctx, sel)
	case "link":
		ps, err := c.Links(ctx)
		return filter(ps, func(p rdmanl.Port) bool { return keep(p.DevName) }), err
	case "dev":
		ds, err := c.Devices(ctx)
		return filter(ds, func(d rdmanl.Device) bool { return keep(d.Name) }), err
	}
	return nil, fmt.Errorf("unknown topic %q", topic)
}

func filter[T any](xs []T, keep func(T) bool) []T {
	out := []T{}
	for _, x := range xs {
		if keep(x) {
			out = append(out, x)
		}
	}
	return out
}

// leading are the keys printed first in text output, in this order; the
// rest follow sorted.
var leading = []string{"ifindex", "ifname", "port", "pdn", "cqn", "mrn", "cm-idn", "ctxn", "cntn", "lqpn", "type", "state"}

// write writes one topic: a JSON array on one line, or a line of "key
// value" pairs per item.
func write(w io.Writer, topic string, items any, asJSON bool) error {
	v := reflect.ValueOf(items)
	if asJSON {
		if v.Len() == 0 {
			_, err := fmt.Fprintln(w, "[]")
			return err
		}
		b, err := json.Marshal(items)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	for i := range v.Len() {
		b, err := json.Marshal(v.Index(i).Interface())
		if err != nil {
			return err
		}
		var o map[string]any
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber() // 64-bit counters stay exact
		if err := d.Decode(&o); err != nil {
			return err
		}
		var keys []string
		for k := range o {
			if !contains(leading, k) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		var parts []string
		parts = append(parts, topic)
		for _, k := range append(append([]string{}, leading...), keys...) {
			if val, ok := o[k]; ok {
				parts = append(parts, k, text(val))
			}
		}
		if _, err := fmt.Fprintln(w, strings.Join(parts, " ")); err != nil {
			return err
		}
	}
	return nil
}

func text(v any) string {
	switch x := v.(type) {
	case []any:
		var s []string
		for _, e := range x {
			s = append(s, text(e))
		}
		return strings.Join(s, ",")
	}
	return fmt.Sprint(v)
}
