package rdmanl

import (
	"context"
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
var queries = map[string]func(context.Context, *Conn) (int, []string, error){
	"Devices": func(ctx context.Context, c *Conn) (int, []string, error) {
		ds, err := c.Devices(ctx)
		var s []string
		for _, d := range ds {
			s = append(s, d.Name, d.FWVersion, d.Protocol)
		}
		return len(ds), s, err
	},
	"Ports": func(ctx context.Context, c *Conn) (int, []string, error) {
		ps, err := c.Ports(ctx, 0)
		var s []string
		for _, p := range ps {
			s = append(s, p.DevName, p.Netdev)
		}
		return len(ps), s, err
	},
	"System": func(ctx context.Context, c *Conn) (int, []string, error) { _, err := c.System(ctx); return 1, nil, err },
	"Summary": func(ctx context.Context, c *Conn) (int, []string, error) {
		ss, err := c.Summary(ctx)
		var s []string
		n := len(ss)
		for _, x := range ss {
			s = append(s, x.DevName)
			s = append(s, x.Names...)
			n += len(x.Names)
		}
		return n, s, err
	},
	"QPs": func(ctx context.Context, c *Conn) (int, []string, error) {
		qs, err := c.QPs(ctx, 0)
		return len(qs), ownerStrs(qs, func(q QP) (string, Owner) { return q.DevName, q.Owner }), err
	},
	"CQs": func(ctx context.Context, c *Conn) (int, []string, error) {
		qs, err := c.CQs(ctx, 0)
		return len(qs), ownerStrs(qs, func(q CQ) (string, Owner) { return q.DevName, q.Owner }), err
	},
	"MRs": func(ctx context.Context, c *Conn) (int, []string, error) {
		qs, err := c.MRs(ctx, 0)
		return len(qs), ownerStrs(qs, func(q MR) (string, Owner) { return q.DevName, q.Owner }), err
	},
	"PDs": func(ctx context.Context, c *Conn) (int, []string, error) {
		qs, err := c.PDs(ctx, 0)
		return len(qs), ownerStrs(qs, func(q PD) (string, Owner) { return q.DevName, q.Owner }), err
	},
	"CMIDs": func(ctx context.Context, c *Conn) (int, []string, error) {
		qs, err := c.CMIDs(ctx, 0)
		return len(qs), ownerStrs(qs, func(q CMID) (string, Owner) { return q.DevName, q.Owner }), err
	},
	"PortCounters": func(ctx context.Context, c *Conn) (int, []string, error) {
		pc, err := c.PortCounters(ctx, 0, 1)
		s := []string{pc.DevName}
		for _, x := range pc.Counters {
			s = append(s, x.Name)
		}
		return len(pc.Counters), s, err
	},
	"QPCounters": func(ctx context.Context, c *Conn) (int, []string, error) {
		qs, err := c.QPCounters(ctx, 0)
		n := len(qs)
		var s []string
		for _, q := range qs {
			n += len(q.Counters) + len(q.LQPNs)
			s = append(s, q.DevName)
		}
		return n, s, err
	},
	"QPCounterMode": func(ctx context.Context, c *Conn) (int, []string, error) {
		_, _, err := c.QPCounterMode(ctx, 0, 1)
		return 0, nil, err
	},
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
	f.Fuzz(func(t *testing.T, b []byte) {
		for name, q := range queries {
			c := &Conn{c: nl.Replay([][]byte{b, endOfExchange})}
			n, strs, err := q(context.Background(), c)
			var ke *nl.Error
			if err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, io.EOF) && !errors.As(err, &ke) &&
				!errors.Is(err, ErrDumpInterrupted) {
				t.Fatalf("%s: unexpected error %v", name, err)
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
