package rdmanl

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	nl "github.com/goverbs/goverbs/internal/rdmanl"
	"github.com/goverbs/goverbs/uverbs"
)

// Counter is one named counter and its value. Names are the driver's own
// (rxe: "sent_pkts", "rcvd_pkts", ...; see HWCounters for the stable IB
// ones).
type Counter struct {
	Name  string
	Value uint64
}

// PortCounters is what rdma statistic show prints for one port: the
// device's hardware counters of that port, in the driver's order.
type PortCounters struct {
	DevIndex uint32
	DevName  string
	Port     uint32
	Counters []Counter
}

func parseCounters(a nl.Attrs) ([]Counter, error) {
	out := []Counter{}
	err := eachEntry(a, nl.RDMA_NLDEV_ATTR_STAT_HWCOUNTERS, func(ea nl.Attrs) error {
		name, err := ea.Str(nl.RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME)
		if err != nil {
			return err
		}
		v, err := ea.U64(nl.RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE)
		if err != nil {
			return err
		}
		out = append(out, Counter{Name: name, Value: v})
		return nil
	})
	return out, err
}

// PortCounters reads the hardware counters of one port (RDMA_NLDEV_CMD_STAT_GET
// with the device and port). A port of a device without hardware counters
// gives ErrNotSupported, a device or port that is not there ErrNotFound.
func (c *Conn) PortCounters(ctx context.Context, devIndex, port uint32) (PortCounters, error) {
	var pc PortCounters
	got := false
	attrs := nl.AppendU32Attr(nil, nl.RDMA_NLDEV_ATTR_DEV_INDEX, devIndex)
	attrs = nl.AppendU32Attr(attrs, nl.RDMA_NLDEV_ATTR_PORT_INDEX, port)
	op := fmt.Sprintf("get counters of index %d port %d", devIndex, port)
	err := c.do(ctx, op, nl.RDMA_NLDEV_CMD_STAT_GET, false, attrs, func(a nl.Attrs) error {
		var err error
		if pc.DevIndex, pc.DevName, err = handle(a); err != nil {
			return err
		}
		if pc.Port, err = a.U32(nl.RDMA_NLDEV_ATTR_PORT_INDEX); err != nil {
			return err
		}
		if pc.Counters, err = parseCounters(a); err != nil {
			return err
		}
		got = true
		return nil
	})
	if err != nil {
		if errnoOf(err) == unix.EINVAL {
			// The kernel answers EINVAL both for a device or port that is
			// not there and for a port without hardware counters
			// (stat_get_doit_default_counter); the port tells which.
			if _, perr := c.Port(ctx, devIndex, port); perr == nil {
				return PortCounters{}, &Error{Op: op, Kind: ErrNotSupported, Err: err}
			}
		}
		return PortCounters{}, notFound(err, fmt.Sprintf("index %d port %d", devIndex, port))
	}
	if !got {
		return PortCounters{}, fmt.Errorf("rdmanl: get counters: the kernel acknowledged without a reply: %w", ErrMalformed)
	}
	return pc, nil
}

// AllPortCounters reads the counters of every port of every device, as
// rdma statistic does.
func (c *Conn) AllPortCounters(ctx context.Context) ([]PortCounters, error) {
	ports, err := c.Links(ctx)
	if err != nil {
		return nil, err
	}
	var out []PortCounters
	for _, p := range ports {
		pc, err := c.PortCounters(ctx, p.DevIndex, p.Port)
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrNotSupported) {
			continue // gone meanwhile, or a port without counters
		}
		if err != nil {
			return nil, err
		}
		out = append(out, pc)
	}
	return out, nil
}

// QPCounter is a counter object that QPs are bound to (rdma statistic qp):
// the hardware counters of those QPs together. With auto mode on, the
// kernel binds every new QP to a counter of its kind.
type QPCounter struct {
	DevIndex uint32
	DevName  string
	Port     uint32
	ID       uint32 // "cntn"
	// QPType is the QP type the counter was made for in auto mode by type
	// (HaveQPType).
	QPType     uverbs.QPType
	HaveQPType bool
	Owner      Owner
	Counters   []Counter
	LQPNs      []uint32 // the QPs bound to it
}

// QPCounters lists the QP counters of one device (its index) or of
// AllDevices (RDMA_NLDEV_CMD_STAT_GET dump with STAT_RES = RES_QP).
func (c *Conn) QPCounters(ctx context.Context, dev int64) ([]QPCounter, error) {
	extra := nl.AppendU32Attr(nil, nl.RDMA_NLDEV_ATTR_STAT_RES, nl.RDMA_NLDEV_ATTR_RES_QP)
	return dumpRes(ctx, c, "QP counters", nl.RDMA_NLDEV_CMD_STAT_GET, nl.RDMA_NLDEV_ATTR_STAT_COUNTER, dev, extra, parseQPCounter)
}

func parseQPCounter(idx uint32, name string, ea nl.Attrs) (QPCounter, error) {
	q := QPCounter{DevIndex: idx, DevName: name}
	var err error
	if q.Port, err = ea.OptU32(nl.RDMA_NLDEV_ATTR_PORT_INDEX); err != nil {
		return QPCounter{}, err
	}
	if q.ID, err = ea.U32(nl.RDMA_NLDEV_ATTR_STAT_COUNTER_ID); err != nil {
		return QPCounter{}, err
	}
	if q.HaveQPType = ea.Has(nl.RDMA_NLDEV_ATTR_RES_TYPE); q.HaveQPType {
		t, err := ea.U8(nl.RDMA_NLDEV_ATTR_RES_TYPE)
		if err != nil {
			return QPCounter{}, err
		}
		q.QPType = uverbs.QPType(t)
	}
	if q.Owner, err = parseOwner(ea); err != nil {
		return QPCounter{}, err
	}
	if q.Counters, err = parseCounters(ea); err != nil {
		return QPCounter{}, err
	}
	err = eachEntry(ea, nl.RDMA_NLDEV_ATTR_RES_QP, func(qa nl.Attrs) error {
		n, err := qa.U32(nl.RDMA_NLDEV_ATTR_RES_LQPN)
		q.LQPNs = append(q.LQPNs, n)
		return err
	})
	if err != nil {
		return QPCounter{}, err
	}
	return q, nil
}

// CounterMode is how a port binds QPs to counters (enum
// rdma_nl_counter_mode).
type CounterMode uint32

// Counter modes.
const (
	CounterModeNone   CounterMode = nl.RDMA_COUNTER_MODE_NONE
	CounterModeAuto   CounterMode = nl.RDMA_COUNTER_MODE_AUTO
	CounterModeManual CounterMode = nl.RDMA_COUNTER_MODE_MANUAL
)

// CounterMask says what auto mode groups QPs by (enum
// rdma_nl_counter_mask).
type CounterMask uint32

// Auto mode criteria.
const (
	CounterByQPType CounterMask = nl.RDMA_COUNTER_MASK_QP_TYPE
	CounterByPID    CounterMask = nl.RDMA_COUNTER_MASK_PID
)

// QPCounterMode reads a port's QP counter mode and, in auto mode, its
// criteria (rdma statistic qp mode).
func (c *Conn) QPCounterMode(ctx context.Context, devIndex, port uint32) (CounterMode, CounterMask, error) {
	attrs := nl.AppendU32Attr(nil, nl.RDMA_NLDEV_ATTR_DEV_INDEX, devIndex)
	attrs = nl.AppendU32Attr(attrs, nl.RDMA_NLDEV_ATTR_PORT_INDEX, port)
	// STAT_MODE present in the request asks for the mode rather than the
	// counters.
	attrs = nl.AppendU32Attr(attrs, nl.RDMA_NLDEV_ATTR_STAT_MODE, nl.RDMA_COUNTER_MODE_AUTO)
	attrs = nl.AppendU32Attr(attrs, nl.RDMA_NLDEV_ATTR_STAT_RES, nl.RDMA_NLDEV_ATTR_RES_QP)
	var mode, mask uint32
	err := c.do(ctx, "get QP counter mode", nl.RDMA_NLDEV_CMD_STAT_GET, false, attrs, func(a nl.Attrs) error {
		var err error
		if mode, err = a.OptU32(nl.RDMA_NLDEV_ATTR_STAT_MODE); err != nil {
			return err
		}
		mask, err = a.OptU32(nl.RDMA_NLDEV_ATTR_STAT_AUTO_MODE_MASK)
		return err
	})
	if err != nil {
		return 0, 0, notFound(err, fmt.Sprintf("index %d port %d", devIndex, port))
	}
	return CounterMode(mode), CounterMask(mask), nil
}

// SetQPCounterAuto turns a port's automatic QP counters on (grouping new
// QPs by the criteria in mask, e.g. CounterByQPType) or off (mask 0), as
// rdma statistic qp set link DEV/PORT auto type on|off does. QPs created
// before keep their binding.
func (c *Conn) SetQPCounterAuto(ctx context.Context, devIndex, port uint32, mask CounterMask) error {
	if mask&^(CounterByQPType|CounterByPID) != 0 {
		return fmt.Errorf("rdmanl: set QP counter mode: unknown criteria %#x", uint32(mask))
	}
	attrs := nl.AppendU32Attr(nil, nl.RDMA_NLDEV_ATTR_DEV_INDEX, devIndex)
	attrs = nl.AppendU32Attr(attrs, nl.RDMA_NLDEV_ATTR_PORT_INDEX, port)
	attrs = nl.AppendU32Attr(attrs, nl.RDMA_NLDEV_ATTR_STAT_RES, nl.RDMA_NLDEV_ATTR_RES_QP)
	attrs = nl.AppendU32Attr(attrs, nl.RDMA_NLDEV_ATTR_STAT_MODE, nl.RDMA_COUNTER_MODE_AUTO)
	attrs = nl.AppendU32Attr(attrs, nl.RDMA_NLDEV_ATTR_STAT_AUTO_MODE_MASK, uint32(mask))
	err := c.do(ctx, "set QP counter mode", nl.RDMA_NLDEV_CMD_STAT_SET, false, attrs, nil)
	if err != nil {
		return notFound(err, fmt.Sprintf("index %d port %d", devIndex, port))
	}
	return nil
}
