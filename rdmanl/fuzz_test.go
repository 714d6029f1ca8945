package rdmanl

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"

	nl "github.com/goverbs/goverbs/internal/rdmanl"
)

// endOfExchange is a datagram that ends any request: an acknowledgement
// and a dump's end.
var endOfExchange = append(nl.AppendRequest(nil, nl.NLMSG_ERROR, 0, 0, make([]byte, 20)),
	nl.AppendRequest(nil, nl.NLMSG_DONE, nl.NLM_F_MULTI, 0, make([]byte, 4))...)

// queries runs every parser of the package on a Conn and reports how many
// items came back and the strings taken from the kernel's bytes.
type query struct {
	cmd uint16 // the nldev command the kernel answers it with
	run func(context.Context, *Conn) (int, []string, error)
}

var queries = map[string]query{
	"Devices": {nl.RDMA_NLDEV_CMD_GET, func(ctx context.Context, c *Conn) (int, []string, error) {
		ds, err := c.Devices(ctx)
		checkMarshal(ds)
		var s []string
		for _, d := range ds {
			s = append(s, d.Name, d.FWVersion, d.Protocol)
		}
		return len(ds), s, err
	}},
	"Ports": {nl.RDMA_NLDEV_CMD_PORT_GET, func(ctx context.Context, c *Conn) (int, []string, error) {
		ps, err := c.Ports(ctx, 0)
		checkMarshal(ps)
		var s []string
		for _, p := range ps {
			s = append(s, p.DevName, p.Netdev)
		}
		return len(ps), s, err
	}},
	"System": {nl.RDMA_NLDEV_CMD_SYS_GET, func(ctx context.Context, c *Conn) (int, []string, error) { _, err := c.System(ctx); return 1, nil, err }},
	"Summary": {nl.RDMA_NLDEV_CMD_RES_GET, func(ctx context.Context, c *Conn) (int, []string, error) {
		ss, err := c.Summary(ctx)
		checkMarshal(ss)
		var s []string
		n := len(ss)
		for _, x := range ss {
			s = append(s, x.DevName)
			s = append(s, x.Names...)
			n += len(x.Names)
		}
		return n, s, err
	}},
	"QPs": {nl.RDMA_NLDEV_CMD_RES_QP_GET, func(ctx context.Context, c *Conn) (int, []string, error) {
		qs, err := c.QPs(ctx, 0)
		checkMarshal(qs)
		return len(qs), ownerStrs(qs, func(q QP) (string, Owner) { return q.DevName, q.Owner }), err
	}},
	"CQs": {nl.RDMA_NLDEV_CMD_RES_CQ_GET, func(ctx context.Context, c *Conn) (int, []string, error) {
		qs, err := c.CQs(ctx, 0)
		checkMarshal(qs)
		return len(qs), ownerStrs(qs, func(q CQ) (string, Owner) { return q.DevName, q.Owner }), err
	}},
	"MRs": {nl.RDMA_NLDEV_CMD_RES_MR_GET, func(ctx context.Context, c *Conn) (int, []string, error) {
		qs, err := c.MRs(ctx, 0)
		checkMarshal(qs)
		return len(qs), ownerStrs(qs, func(q MR) (string, Owner) { return q.DevName, q.Owner }), err
	}},
	"PDs": {nl.RDMA_NLDEV_CMD_RES_PD_GET, func(ctx context.Context, c *Conn) (int, []string, error) {
		qs, err := c.PDs(ctx, 0)
		checkMarshal(qs)
		return len(qs), ownerStrs(qs, func(q PD) (string, Owner) { return q.DevName, q.Owner }), err
	}},
	"CMIDs": {nl.RDMA_NLDEV_CMD_RES_CM_ID_GET, func(ctx context.Context, c *Conn) (int, []string, error) {
		qs, err := c.CMIDs(ctx, 0)
		checkMarshal(qs)
		return len(qs), ownerStrs(qs, func(q CMID) (string, Owner) { return q.DevName, q.Owner }), err
	}},
	"Contexts": {nl.RDMA_NLDEV_CMD_RES_CTX_GET, func(ctx context.Context, c *Conn) (int, []string, error) {
		xs, err := c.Contexts(ctx, 0)
		checkMarshal(xs)
		return len(xs), ownerStrs(xs, func(x Ctx) (string, Owner) { return x.DevName, x.Owner }), err
	}},
	"PortCounters": {nl.RDMA_NLDEV_CMD_STAT_GET, func(ctx context.Context, c *Conn) (int, []string, error) {
		pc, err := c.PortCounters(ctx, 0, 1)
		checkMarshal(pc)
		s := []string{pc.DevName}
		for _, x := range pc.Counters {
			s = append(s, x.Name)
		}
		return len(pc.Counters), s, err
	}},
	"QPCounters": {nl.RDMA_NLDEV_CMD_STAT_GET, func(ctx context.Context, c *Conn) (int, []string, error) {
		qs, err := c.QPCounters(ctx, 0)
		checkMarshal(qs)
		n := len(qs)
		var s []string
		for _, q := range qs {
			n += len(q.Counters) + len(q.LQPNs)
			s = append(s, q.DevName)
		}
		return n, s, err
	}},
	"Monitor": {nl.RDMA_NLDEV_CMD_MONITOR, func(ctx context.Context, c *Conn) (int, []string, error) {
		n, err := (&Monitor{c: c.c}).Next(ctx)
		checkMarshal(n)
		return 1, []string{n.DevName, n.Netdev}, err
	}},
	"QPCounterMode": {nl.RDMA_NLDEV_CMD_STAT_GET, func(ctx context.Context, c *Conn) (int, []string, error) {
		_, _, err := c.QPCounterMode(ctx, 0, 1)
		return 0, nil, err
	}},
}

// marshalErr is the first MarshalJSON failure of an exec.
var marshalErr error

// checkMarshal marshals a query's result, as a user would print it.
func checkMarshal(v any) {
	if _, err := json.Marshal(v); err != nil && marshalErr == nil {
		marshalErr = err
	}
}

func ownerStrs[T any](xs []T, f func(T) (string, Owner)) []string {
	var s []string
	for _, x := range xs {
		name, o := f(x)
		s = append(s, name)
		if o.Kernel { // a user owner's name comes from /proc, not the reply
			s = append(s, o.Comm)
		}
	}
	return s
}

// FuzzReplies gives one datagram, as the kernel's answer, to every query
// of the package. None may panic; an error is a malformed reply, the
// kernel's error, or the replay running out; and what comes back is
// bounded by the bytes given: at most one item per 4 bytes (an attribute
// header), and every string inside them. Seeds (testdata/fuzz/FuzzReplies)
// are datagrams the 6.1 and 6.12 kernels sent in TestVMIproute2.
func FuzzReplies(f *testing.F) {
	// A user owner's name is read from /proc; not the parser's business.
	defer func(old func(uint32) string) { readComm = old }(readComm)
	readComm = func(uint32) string { return "" }
	f.Fuzz(func(t *testing.T, b []byte) {
		// Each datagram goes to the queries answered with its first
		// message's command (the fuzzer changes it to reach the others).
		var cmd uint16
		if len(b) >= 6 {
			cmd = (uint16(b[4]) | uint16(b[5])<<8) & (1<<10 - 1)
		}
		for name, q := range queries {
			if q.cmd != cmd {
				continue
			}
			marshalErr = nil
			c := &Conn{c: nl.Replay([][]byte{b, endOfExchange})}
			n, strs, err := q.run(context.Background(), c)
			var ke *nl.Error
			if err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, io.EOF) && !errors.As(err, &ke) &&
				!errors.Is(err, ErrDumpInterrupted) {
				t.Fatalf("%s: unexpected error %v", name, err)
			}
			if marshalErr != nil {
				t.Fatalf("%s: MarshalJSON: %v", name, marshalErr)
			}
			if n > len(b)/4+1 {
				t.Fatalf("%s: %d items from %d bytes", name, n, len(b))
			}
			total := 0
			for _, s := range strs {
				total += len(s)
			}
			if total > len(b) {
				t.Fatalf("%s: %d bytes of strings from %d bytes", name, total, len(b))
			}
		}
	})
}
