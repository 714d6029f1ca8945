package rdmanl

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	nl "github.com/goverbs/goverbs/internal/rdmanl"
	"github.com/goverbs/goverbs/uverbs"
)

// Owner is who holds a resource: a user process (PID, with its command
// name read from /proc/PID/comm when the resource was listed, as rdma res
// show prints it) or a kernel module (Kernel set, PID 0, Comm the name the
// kernel reports, e.g. "ib_core", "rdma_cm").
//
// The zero Owner means the kernel named none, which it does for a user
// resource whose task has exited or is not visible in the caller's PID
// namespace, and for a QP counter not bound by PID (manual mode, or auto
// mode by QP type alone). Known tells it apart.
type Owner struct {
	// PID is the id, in the caller's PID namespace, of the task that
	// created the resource: the thread, which for a multi-threaded program
	// (any Go program) need not be the process's leader; /proc/PID/comm
	// works for either. 0 for the kernel and when no owner was named.
	PID    uint32
	Comm   string
	Kernel bool
}

// Known reports whether the kernel named the owner (a PID or a kernel
// module).
func (o Owner) Known() bool { return o.Kernel || o.PID != 0 }

func parseOwner(a nl.Attrs) (Owner, error) {
	switch {
	case a.Has(nl.RDMA_NLDEV_ATTR_RES_PID):
		pid, err := a.U32(nl.RDMA_NLDEV_ATTR_RES_PID)
		if err != nil {
			return Owner{}, err
		}
		return Owner{PID: pid, Comm: readComm(pid)}, nil
	case a.Has(nl.RDMA_NLDEV_ATTR_RES_KERN_NAME):
		name, err := a.Str(nl.RDMA_NLDEV_ATTR_RES_KERN_NAME)
		if err != nil {
			return Owner{}, err
		}
		return Owner{Kernel: true, Comm: name}, nil
	}
	return Owner{}, nil
}

// readComm is taskComm; tests replace it.
var readComm = taskComm

// taskComm reads a process's command name, "" if it is gone.
func taskComm(pid uint32) string {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}

// Summary is one device's count of each resource type (rdma res).
type Summary struct {
	DevIndex uint32
	DevName  string
	// Counts by the kernel's names: "pd", "cq", "qp", "cm_id", "mr",
	// "ctx", "srq" (6.1 and 6.12), in the kernel's order in Names.
	Counts map[string]uint64
	Names  []string
}

// Summary lists the resource counts of every device.
func (c *Conn) Summary(ctx context.Context) ([]Summary, error) {
	var out []Summary
	err := c.do(ctx, "get resource summary", nl.RDMA_NLDEV_CMD_RES_GET, true, nil, func(a nl.Attrs) error {
		var s Summary
		var err error
		if s.DevIndex, s.DevName, err = handle(a); err != nil {
			return err
		}
		s.Counts = map[string]uint64{}
		err = eachEntry(a, nl.RDMA_NLDEV_ATTR_RES_SUMMARY, func(ea nl.Attrs) error {
			name, err := ea.Str(nl.RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME)
			if err != nil {
				return err
			}
			curr, err := ea.U64(nl.RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR)
			if err != nil {
				return err
			}
			s.Counts[name] = curr
			s.Names = append(s.Names, name)
			return nil
		})
		if err != nil {
			return err
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

// resDump dumps one table of every device (or of the device with index
// dev, if dev >= 0), asking with the device index and the attributes
// extra, and hands each entry to fn.
func (c *Conn) resDump(ctx context.Context, what string, cmd, table uint16, dev int64, extra []byte, fn func(idx uint32, name string, e nl.Attrs) error) error {
	devs, err := c.deviceIndexes(ctx, dev)
	if err != nil {
		return err
	}
	for _, di := range devs {
		attrs := append(nl.AppendU32Attr(nil, nl.RDMA_NLDEV_ATTR_DEV_INDEX, di), extra...)
		err := c.do(ctx, "get "+what, cmd, true, attrs, func(a nl.Attrs) error {
			idx, name, err := handle(a)
			if err != nil {
				return err
			}
			return eachEntry(a, table, func(e nl.Attrs) error { return fn(idx, name, e) })
		})
		if err != nil && !errors.Is(err, ErrDumpInterrupted) {
			if dev < 0 && errnoOf(err) == unix.EINVAL {
				continue // the device went away since the list
			}
			return notFound(err, fmt.Sprintf("index %d", di))
		}
	}
	return nil
}

// dumpRes dumps one table (see resDump) and decodes each entry with parse.
func dumpRes[T any](ctx context.Context, c *Conn, what string, cmd, table uint16, dev int64, extra []byte,
	parse func(idx uint32, name string, e nl.Attrs) (T, error)) ([]T, error) {
	var out []T
	err := c.resDump(ctx, what, cmd, table, dev, extra, func(idx uint32, name string, e nl.Attrs) error {
		x, err := parse(idx, name, e)
		if err == nil {
			out = append(out, x)
		}
		return err
	})
	return out, err
}

// AllDevices selects every device in the resource and counter dumps.
const AllDevices = -1

// QP is a queue pair as rdma res show qp lists it.
type QP struct {
	DevIndex uint32
	DevName  string
	Port     uint32 // 0 until the QP is bound to a port (INIT)
	LQPN     uint32 // local QP number
	// RQPN and RQPSN (remote QP number, receive PSN) are sent for RC and
	// UC QPs only; PathMigState for RC, UC and XRC.
	RQPN         uint32
	RQPSN        uint32
	SQPSN        uint32
	PathMigState uint8 // 0 MIGRATED, 1 REARM, 2 ARMED
	Type         uverbs.QPType
	State        uverbs.QPState
	PDN          uint32 // the PD's restrack id; user QPs only
	Owner        Owner
}

// QPs lists the queue pairs of one device (its index) or of AllDevices.
func (c *Conn) QPs(ctx context.Context, dev int64) ([]QP, error) {
	return dumpRes(ctx, c, "QPs", nl.RDMA_NLDEV_CMD_RES_QP_GET, nl.RDMA_NLDEV_ATTR_RES_QP, dev, nil, parseQP)
}

func parseQP(idx uint32, name string, e nl.Attrs) (QP, error) {
	q := QP{DevIndex: idx, DevName: name}
	var err error
	var typ, st uint8
	if q.LQPN, err = e.U32(nl.RDMA_NLDEV_ATTR_RES_LQPN); err != nil {
		return QP{}, err
	}
	if q.SQPSN, err = e.U32(nl.RDMA_NLDEV_ATTR_RES_SQ_PSN); err != nil {
		return QP{}, err
	}
	if err := optU32s(e, u32Field{&q.Port, nl.RDMA_NLDEV_ATTR_PORT_INDEX}, u32Field{&q.RQPN, nl.RDMA_NLDEV_ATTR_RES_RQPN},
		u32Field{&q.RQPSN, nl.RDMA_NLDEV_ATTR_RES_RQ_PSN}, u32Field{&q.PDN, nl.RDMA_NLDEV_ATTR_RES_PDN}); err != nil {
		return QP{}, err
	}
	if typ, err = e.U8(nl.RDMA_NLDEV_ATTR_RES_TYPE); err != nil {
		return QP{}, err
	}
	if st, err = e.U8(nl.RDMA_NLDEV_ATTR_RES_STATE); err != nil {
		return QP{}, err
	}
	if q.PathMigState, err = e.OptU8(nl.RDMA_NLDEV_ATTR_RES_PATH_MIG_STATE); err != nil {
		return QP{}, err
	}
	q.Type, q.State = uverbs.QPType(typ), uverbs.QPState(st)
	if q.Owner, err = parseOwner(e); err != nil {
		return QP{}, err
	}
	return q, nil
}

// CQ is a completion queue as rdma res show cq lists it.
type CQ struct {
	DevIndex uint32
	DevName  string
	CQN      uint32 // restrack id
	CQE      uint32 // size
	Users    uint64 // QPs and others using it
	// PollCtx is how a kernel CQ is polled (0 DIRECT, 1 SOFTIRQ, 2
	// WORKQUEUE, 3 UNBOUND_WORKQUEUE); HavePollCtx is false for user CQs.
	PollCtx            uint8
	HavePollCtx        bool
	AdaptiveModeration bool
	CtxN               uint32 // the owning uverbs context's id; user CQs only
	Owner              Owner
}

// CQs lists the completion queues of one device or of AllDevices.
func (c *Conn) CQs(ctx context.Context, dev int64) ([]CQ, error) {
	return dumpRes(ctx, c, "CQs", nl.RDMA_NLDEV_CMD_RES_CQ_GET, nl.RDMA_NLDEV_ATTR_RES_CQ, dev, nil, parseCQ)
}

func parseCQ(idx uint32, name string, e nl.Attrs) (CQ, error) {
	q := CQ{DevIndex: idx, DevName: name}
	var err error
	if q.CQE, err = e.U32(nl.RDMA_NLDEV_ATTR_RES_CQE); err != nil {
		return CQ{}, err
	}
	if q.Users, err = e.U64(nl.RDMA_NLDEV_ATTR_RES_USECNT); err != nil {
		return CQ{}, err
	}
	if err := optU32s(e, u32Field{&q.CQN, nl.RDMA_NLDEV_ATTR_RES_CQN}, u32Field{&q.CtxN, nl.RDMA_NLDEV_ATTR_RES_CTXN}); err != nil {
		return CQ{}, err
	}
	if q.PollCtx, err = e.OptU8(nl.RDMA_NLDEV_ATTR_RES_POLL_CTX); err != nil {
		return CQ{}, err
	}
	q.HavePollCtx = e.Has(nl.RDMA_NLDEV_ATTR_RES_POLL_CTX)
	dim, err := e.OptU8(nl.RDMA_NLDEV_ATTR_DEV_DIM)
	if err != nil {
		return CQ{}, err
	}
	q.AdaptiveModeration = dim != 0
	if q.Owner, err = parseOwner(e); err != nil {
		return CQ{}, err
	}
	return q, nil
}

// MR is a memory region as rdma res show mr lists it. The keys and the
// IOVA are sent only to callers with CAP_NET_ADMIN.
type MR struct {
	DevIndex uint32
	DevName  string
	MRN      uint32 // restrack id
	RKey     uint32
	LKey     uint32
	IOVA     uint64
	Length   uint64 // "mrlen"
	PDN      uint32
	Owner    Owner
}

// MRs lists the memory regions of one device or of AllDevices.
func (c *Conn) MRs(ctx context.Context, dev int64) ([]MR, error) {
	return dumpRes(ctx, c, "MRs", nl.RDMA_NLDEV_CMD_RES_MR_GET, nl.RDMA_NLDEV_ATTR_RES_MR, dev, nil, parseMR)
}

func parseMR(idx uint32, name string, e nl.Attrs) (MR, error) {
	m := MR{DevIndex: idx, DevName: name}
	var err error
	if m.Length, err = e.U64(nl.RDMA_NLDEV_ATTR_RES_MRLEN); err != nil {
		return MR{}, err
	}
	if err := optU32s(e, u32Field{&m.MRN, nl.RDMA_NLDEV_ATTR_RES_MRN}, u32Field{&m.RKey, nl.RDMA_NLDEV_ATTR_RES_RKEY},
		u32Field{&m.LKey, nl.RDMA_NLDEV_ATTR_RES_LKEY}, u32Field{&m.PDN, nl.RDMA_NLDEV_ATTR_RES_PDN}); err != nil {
		return MR{}, err
	}
	if m.IOVA, err = e.OptU64(nl.RDMA_NLDEV_ATTR_RES_IOVA); err != nil {
		return MR{}, err
	}
	if m.Owner, err = parseOwner(e); err != nil {
		return MR{}, err
	}
	return m, nil
}

// PD is a protection domain as rdma res show pd lists it.
type PD struct {
	DevIndex     uint32
	DevName      string
	PDN          uint32 // restrack id
	LocalDMALKey uint32 // sent to CAP_NET_ADMIN callers only
	// UnsafeGlobalRKey is set (and HaveUnsafeGlobalRKey) only for a PD
	// created with IB_PD_UNSAFE_GLOBAL_RKEY.
	UnsafeGlobalRKey     uint32
	HaveUnsafeGlobalRKey bool
	Users                uint64
	CtxN                 uint32 // user PDs only
	Owner                Owner
}

// PDs lists the protection domains of one device or of AllDevices.
func (c *Conn) PDs(ctx context.Context, dev int64) ([]PD, error) {
	return dumpRes(ctx, c, "PDs", nl.RDMA_NLDEV_CMD_RES_PD_GET, nl.RDMA_NLDEV_ATTR_RES_PD, dev, nil, parsePD)
}

func parsePD(idx uint32, name string, e nl.Attrs) (PD, error) {
	p := PD{DevIndex: idx, DevName: name}
	var err error
	if p.Users, err = e.U64(nl.RDMA_NLDEV_ATTR_RES_USECNT); err != nil {
		return PD{}, err
	}
	if err := optU32s(e, u32Field{&p.PDN, nl.RDMA_NLDEV_ATTR_RES_PDN}, u32Field{&p.LocalDMALKey, nl.RDMA_NLDEV_ATTR_RES_LOCAL_DMA_LKEY},
		u32Field{&p.UnsafeGlobalRKey, nl.RDMA_NLDEV_ATTR_RES_UNSAFE_GLOBAL_RKEY}, u32Field{&p.CtxN, nl.RDMA_NLDEV_ATTR_RES_CTXN}); err != nil {
		return PD{}, err
	}
	p.HaveUnsafeGlobalRKey = e.Has(nl.RDMA_NLDEV_ATTR_RES_UNSAFE_GLOBAL_RKEY)
	if p.Owner, err = parseOwner(e); err != nil {
		return PD{}, err
	}
	return p, nil
}

// CMID is a connection manager id (rdma_cm_id) as rdma res show cm_id
// lists it.
type CMID struct {
	DevIndex uint32
	DevName  string
	Port     uint32 // 0 before the id is bound to a port
	CMIDN    uint32 // restrack id
	// LQPN and QPType are set (HaveQP) once a QP is attached.
	LQPN   uint32
	QPType uverbs.QPType
	HaveQP bool
	PS     PortSpace
	State  CMState
	// Src and Dst are the bound and the remote address; invalid (the zero
	// AddrPort) when the kernel sends none.
	Src, Dst netip.AddrPort
	Owner    Owner
}

// PortSpace is an rdma_cm port space (enum rdma_ucm_port_space).
type PortSpace uint32

// Port spaces.
const (
	PSIPoIB PortSpace = 0x0002
	PSIB    PortSpace = 0x013F
	PSTCP   PortSpace = 0x0106
	PSUDP   PortSpace = 0x0111
)

func (p PortSpace) String() string {
	switch p {
	case PSIPoIB:
		return "IPoIB"
	case PSIB:
		return "IB"
	case PSTCP:
		return "TCP"
	case PSUDP:
		return "UDP"
	}
	return fmt.Sprintf("PortSpace(%#x)", uint32(p))
}

// CMState is the state of an rdma_cm id (the kernel's enum rdma_cm_state).
type CMState uint8

var cmStateNames = [...]string{"IDLE", "ADDR_QUERY", "ADDR_RESOLVED", "ROUTE_QUERY", "ROUTE_RESOLVED",
	"CONNECT", "DISCONNECT", "ADDR_BOUND", "LISTEN", "DEVICE_REMOVAL", "DESTROYING"}

func (s CMState) String() string {
	if int(s) < len(cmStateNames) {
		return cmStateNames[s]
	}
	return fmt.Sprintf("CMState(%d)", uint8(s))
}

// CMIDs lists the connection manager ids of one device or of AllDevices.
func (c *Conn) CMIDs(ctx context.Context, dev int64) ([]CMID, error) {
	return dumpRes(ctx, c, "CM ids", nl.RDMA_NLDEV_CMD_RES_CM_ID_GET, nl.RDMA_NLDEV_ATTR_RES_CM_ID, dev, nil, parseCMID)
}

func parseCMID(idx uint32, name string, e nl.Attrs) (CMID, error) {
	m := CMID{DevIndex: idx, DevName: name}
	var err error
	if m.Port, err = e.OptU32(nl.RDMA_NLDEV_ATTR_PORT_INDEX); err != nil {
		return CMID{}, err
	}
	if m.CMIDN, err = e.OptU32(nl.RDMA_NLDEV_ATTR_RES_CM_IDN); err != nil {
		return CMID{}, err
	}
	if m.HaveQP = e.Has(nl.RDMA_NLDEV_ATTR_RES_LQPN); m.HaveQP {
		if m.LQPN, err = e.U32(nl.RDMA_NLDEV_ATTR_RES_LQPN); err != nil {
			return CMID{}, err
		}
		t, err := e.OptU8(nl.RDMA_NLDEV_ATTR_RES_TYPE)
		if err != nil {
			return CMID{}, err
		}
		m.QPType = uverbs.QPType(t)
	}
	ps, err := e.U32(nl.RDMA_NLDEV_ATTR_RES_PS)
	if err != nil {
		return CMID{}, err
	}
	st, err := e.U8(nl.RDMA_NLDEV_ATTR_RES_STATE)
	if err != nil {
		return CMID{}, err
	}
	m.PS, m.State = PortSpace(ps), CMState(st)
	if e.Has(nl.RDMA_NLDEV_ATTR_RES_SRC_ADDR) {
		if m.Src, err = parseSockaddr(e[nl.RDMA_NLDEV_ATTR_RES_SRC_ADDR]); err != nil {
			return CMID{}, err
		}
	}
	if e.Has(nl.RDMA_NLDEV_ATTR_RES_DST_ADDR) {
		if m.Dst, err = parseSockaddr(e[nl.RDMA_NLDEV_ATTR_RES_DST_ADDR]); err != nil {
			return CMID{}, err
		}
	}
	if m.Owner, err = parseOwner(e); err != nil {
		return CMID{}, err
	}
	return m, nil
}

// parseSockaddr decodes a struct sockaddr_storage holding an AF_INET or
// AF_INET6 address (family in host order, port in network order). Other
// families (AF_IB) give the zero AddrPort.
func parseSockaddr(b []byte) (netip.AddrPort, error) {
	if len(b) < 2 {
		return netip.AddrPort{}, &nl.FormatError{What: fmt.Sprintf("socket address of %d bytes", len(b))}
	}
	fam := uint16(b[0]) | uint16(b[1])<<8
	switch fam {
	case 2: // AF_INET: family, port, 4-byte address
		if len(b) < 8 {
			return netip.AddrPort{}, &nl.FormatError{What: fmt.Sprintf("AF_INET address of %d bytes", len(b))}
		}
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), uint16(b[2])<<8|uint16(b[3])), nil
	case 10: // AF_INET6: family, port, flowinfo, 16-byte address, scope id
		if len(b) < 28 {
			return netip.AddrPort{}, &nl.FormatError{What: fmt.Sprintf("AF_INET6 address of %d bytes", len(b))}
		}
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), uint16(b[2])<<8|uint16(b[3])), nil
	}
	return netip.AddrPort{}, nil
}

// Ctx is a user verbs context (an open uverbs file) as rdma res show ctx
// lists it.
type Ctx struct {
	DevIndex uint32
	DevName  string
	CtxN     uint32 // restrack id; the CtxN of its PDs and CQs
	Owner    Owner
}

// Contexts lists the verbs contexts of one device or of AllDevices.
func (c *Conn) Contexts(ctx context.Context, dev int64) ([]Ctx, error) {
	return dumpRes(ctx, c, "contexts", nl.RDMA_NLDEV_CMD_RES_CTX_GET, nl.RDMA_NLDEV_ATTR_RES_CTX, dev, nil, parseCtx)
}

func parseCtx(idx uint32, name string, e nl.Attrs) (Ctx, error) {
	x := Ctx{DevIndex: idx, DevName: name}
	var err error
	if x.CtxN, err = e.U32(nl.RDMA_NLDEV_ATTR_RES_CTXN); err != nil {
		return Ctx{}, err
	}
	if x.Owner, err = parseOwner(e); err != nil {
		return Ctx{}, err
	}
	return x, nil
}
