package uverbs

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
)

// QPState is a queue pair state (enum ibv_qp_state).
type QPState uint8

// QP states.
const (
	QPStateReset QPState = 0
	QPStateInit  QPState = 1
	QPStateRTR   QPState = 2
	QPStateRTS   QPState = 3
	QPStateSQD   QPState = 4
	QPStateSQE   QPState = 5
	QPStateErr   QPState = 6
)

func (s QPState) String() string {
	if int(s) < len(qpStateNames) {
		return qpStateNames[s]
	}
	return fmt.Sprintf("QPState(%d)", uint8(s))
}

var qpStateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

// QPAttrMask selects the attributes of a QPAttr that ModifyQP applies
// (IBV_QP_*).
type QPAttrMask uint32

// QP attribute mask bits.
const (
	QPAttrState            QPAttrMask = abi.QPAttrState
	QPAttrCurState         QPAttrMask = abi.QPAttrCurState
	QPAttrEnSQDAsyncNotify QPAttrMask = abi.QPAttrEnSQDAsyncNotify
	QPAttrAccessFlags      QPAttrMask = abi.QPAttrAccessFlags
	QPAttrPkeyIndex        QPAttrMask = abi.QPAttrPkeyIndex
	QPAttrPort             QPAttrMask = abi.QPAttrPort
	QPAttrQkey             QPAttrMask = abi.QPAttrQkey
	QPAttrAV               QPAttrMask = abi.QPAttrAV
	QPAttrPathMTU          QPAttrMask = abi.QPAttrPathMTU
	QPAttrTimeout          QPAttrMask = abi.QPAttrTimeout
	QPAttrRetryCnt         QPAttrMask = abi.QPAttrRetryCnt
	QPAttrRNRRetry         QPAttrMask = abi.QPAttrRNRRetry
	QPAttrRQPSN            QPAttrMask = abi.QPAttrRQPSN
	QPAttrMaxQPRdAtomic    QPAttrMask = abi.QPAttrMaxQPRdAtomic
	QPAttrAltPath          QPAttrMask = abi.QPAttrAltPath
	QPAttrMinRNRTimer      QPAttrMask = abi.QPAttrMinRNRTimer
	QPAttrSQPSN            QPAttrMask = abi.QPAttrSQPSN
	QPAttrMaxDestRdAtomic  QPAttrMask = abi.QPAttrMaxDestRdAtomic
	QPAttrPathMigState     QPAttrMask = abi.QPAttrPathMigState
	QPAttrCap              QPAttrMask = abi.QPAttrCap
	QPAttrDestQPN          QPAttrMask = abi.QPAttrDestQPN
	QPAttrRateLimit        QPAttrMask = abi.QPAttrRateLimit
)

var qpAttrNames = map[QPAttrMask]string{
	QPAttrState: "State", QPAttrCurState: "CurState", QPAttrEnSQDAsyncNotify: "EnSQDAsyncNotify",
	QPAttrAccessFlags: "AccessFlags", QPAttrPkeyIndex: "PkeyIndex", QPAttrPort: "Port", QPAttrQkey: "Qkey",
	QPAttrAV: "AH", QPAttrPathMTU: "PathMTU", QPAttrTimeout: "Timeout", QPAttrRetryCnt: "RetryCnt",
	QPAttrRNRRetry: "RNRRetry", QPAttrRQPSN: "RQPSN", QPAttrMaxQPRdAtomic: "MaxRdAtomic", QPAttrAltPath: "AltAH",
	QPAttrMinRNRTimer: "MinRNRTimer", QPAttrSQPSN: "SQPSN", QPAttrMaxDestRdAtomic: "MaxDestRdAtomic",
	QPAttrPathMigState: "PathMigState", QPAttrCap: "Cap", QPAttrDestQPN: "DestQPN", QPAttrRateLimit: "RateLimit",
}

func (m QPAttrMask) String() string {
	var parts []string
	for bit := QPAttrMask(1); bit != 0 && bit <= m; bit <<= 1 {
		if m&bit != 0 {
			if n, ok := qpAttrNames[bit]; ok {
				parts = append(parts, n)
			} else {
				parts = append(parts, fmt.Sprintf("%#x", uint32(bit)))
			}
		}
	}
	return strings.Join(parts, "|")
}

// GlobalRoute is the GRH part of an address: required for RoCE.
type GlobalRoute struct {
	DGID         GID
	FlowLabel    uint32
	SGIDIndex    int // 0..255, the index of the local GID to send from
	HopLimit     uint8
	TrafficClass uint8
}

// AHAttr is an address vector: where a QP or AH sends to.
type AHAttr struct {
	GRH         GlobalRoute
	IsGlobal    bool
	DLID        uint16
	SL          uint8
	SrcPathBits uint8
	StaticRate  uint8
	PortNum     uint8
}

// QPAttr holds the attributes ModifyQP sets and QueryQP reports.
type QPAttr struct {
	State            QPState
	CurState         QPState
	PathMTU          MTU
	PathMigState     uint8
	Qkey             uint32
	RQPSN            uint32
	SQPSN            uint32
	DestQPN          uint32
	AccessFlags      Access
	Cap              QPCap
	AH               AHAttr
	AltAH            AHAttr
	PkeyIndex        int // 0..65535
	AltPkeyIndex     int // 0..65535
	EnSQDAsyncNotify bool
	SQDraining       bool
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRNRTimer      uint8
	Port             uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
	AltPort          uint8
	AltTimeout       uint8
	RateLimit        uint32 // kbps
}

// validTransitions[from] has bit to set for each state change the IB spec
// allows (any state may also go to RESET or ERR): an array, because Modify
// consults it on every move and a map's hashing was a tenth of a QP
// connect's user time.
var validTransitions = [...]uint8{
	QPStateReset: 1 << QPStateInit,
	QPStateInit:  1<<QPStateInit | 1<<QPStateRTR,
	QPStateRTR:   1 << QPStateRTS,
	QPStateRTS:   1<<QPStateRTS | 1<<QPStateSQD,
	QPStateSQD:   1<<QPStateRTS | 1<<QPStateSQD,
	QPStateSQE:   1 << QPStateRTS,
	QPStateErr:   0,
}

// validTransition reports whether a QP may go from one state to another
// state than RESET and ERR.
func validTransition(from, to QPState) bool {
	return int(from) < len(validTransitions) && validTransitions[from]&(1<<to) != 0
}

// requiredAttrs lists what each transition must set, per transport (the
// kernel's ib_modify_qp_is_ok table, for RC, UC and UD).
func requiredAttrs(t QPType, from, to QPState) QPAttrMask {
	switch {
	case from == QPStateReset && to == QPStateInit:
		if t == QPTypeUD {
			return QPAttrPkeyIndex | QPAttrPort | QPAttrQkey
		}
		if t == QPTypeRC || t == QPTypeUC {
			return QPAttrPkeyIndex | QPAttrPort | QPAttrAccessFlags
		}
	case from == QPStateInit && to == QPStateRTR:
		switch t {
		case QPTypeUC:
			return QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN
		case QPTypeRC:
			return QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer
		}
	case from == QPStateRTR && to == QPStateRTS:
		switch t {
		case QPTypeUD, QPTypeUC:
			return QPAttrSQPSN
		case QPTypeRC:
			return QPAttrSQPSN | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRdAtomic
		}
	}
	return 0
}

// Modify changes the QP's attributes selected by mask. A state change the
// IB spec forbids, or one missing a required attribute, is refused before
// the kernel is asked, with the missing fields named.
func (qp *QP) Modify(attr *QPAttr, mask QPAttrMask) error {
	if attr == nil {
		return fmt.Errorf("uverbs: modify_qp: nil attributes: %w", unix.EINVAL)
	}
	if err := qp.use(); err != nil {
		return fmt.Errorf("uverbs: modify_qp: %w", err)
	}
	if mask == 0 {
		return fmt.Errorf("uverbs: modify_qp: empty attribute mask: %w", unix.EINVAL)
	}
	if unknown := mask &^ (QPAttrRateLimit<<1 - 1); unknown != 0 {
		return fmt.Errorf("uverbs: modify_qp: unknown mask bits %#x: %w", uint32(unknown), unix.EINVAL)
	}
	cur := qp.State()
	if mask&QPAttrCurState != 0 {
		cur = attr.CurState
	}
	if mask&QPAttrState != 0 {
		to := attr.State
		if to > QPStateErr {
			return fmt.Errorf("uverbs: modify_qp: State %d is not a QP state: %w", to, unix.EINVAL)
		}
		if to != QPStateReset && to != QPStateErr && !validTransition(cur, to) {
			return fmt.Errorf("uverbs: modify_qp: QP %d cannot go from %v to %v: %w", qp.qpn, cur, to, unix.EINVAL)
		}
		if missing := requiredAttrs(qp.typ, cur, to) &^ mask; missing != 0 {
			return fmt.Errorf("uverbs: modify_qp: %v QP %d from %v to %v needs %v: %w", qp.typ, qp.qpn, cur, to, missing, unix.EINVAL)
		}
	}
	if mask&QPAttrPathMTU != 0 && attr.PathMTU.Bytes() == 0 {
		return fmt.Errorf("uverbs: modify_qp: PathMTU %d is not an MTU: %w", attr.PathMTU, unix.EINVAL)
	}
	if mask&QPAttrPort != 0 && attr.Port == 0 {
		return fmt.Errorf("uverbs: modify_qp: Port 0 is invalid; ports are numbered from 1: %w", unix.EINVAL)
	}
	if mask&QPAttrPkeyIndex != 0 && (attr.PkeyIndex < 0 || attr.PkeyIndex > 0xffff) {
		return fmt.Errorf("uverbs: modify_qp: PkeyIndex %d is outside 0..65535: %w", attr.PkeyIndex, unix.EINVAL)
	}
	if mask&QPAttrAV != 0 {
		if err := checkAHAttr("modify_qp: AH", &attr.AH); err != nil {
			return err
		}
	}
	if mask&QPAttrAltPath != 0 {
		if err := checkAHAttr("modify_qp: AltAH", &attr.AltAH); err != nil {
			return err
		}
		if attr.AltPkeyIndex < 0 || attr.AltPkeyIndex > 0xffff {
			return fmt.Errorf("uverbs: modify_qp: AltPkeyIndex %d is outside 0..65535: %w", attr.AltPkeyIndex, unix.EINVAL)
		}
	}
	if err := qp.modify(attr, mask); err != nil {
		return err
	}
	if mask&QPAttrState != 0 {
		if f, ok := qp.prov.(provider.QPStateFollower); ok {
			f.StateChanged(uint8(attr.State))
		}
		qp.stateA.Store(uint32(attr.State))
	}
	return nil
}

// checkAHAttr refuses what an address's ABI fields cannot hold.
func checkAHAttr(verb string, a *AHAttr) error {
	if a.GRH.SGIDIndex < 0 || a.GRH.SGIDIndex > 255 {
		return fmt.Errorf("uverbs: %s: GRH.SGIDIndex %d is outside 0..255: %w", verb, a.GRH.SGIDIndex, unix.EINVAL)
	}
	if a.GRH.FlowLabel > 0xfffff {
		return fmt.Errorf("uverbs: %s: GRH.FlowLabel %#x is wider than 20 bits: %w", verb, a.GRH.FlowLabel, unix.EINVAL)
	}
	if a.SL > 15 {
		return fmt.Errorf("uverbs: %s: SL %d is outside 0..15: %w", verb, a.SL, unix.EINVAL)
	}
	return nil
}

// qpDest is the ABI's form of an address checked by checkAHAttr.
func qpDest(a *AHAttr) abi.QPDest {
	d := abi.QPDest{
		DGID: a.GRH.DGID, FlowLabel: a.GRH.FlowLabel, DLID: a.DLID, SGIDIndex: uint8(a.GRH.SGIDIndex),
		HopLimit: a.GRH.HopLimit, TrafficClass: a.GRH.TrafficClass, SL: a.SL, SrcPathBits: a.SrcPathBits,
		StaticRate: a.StaticRate, PortNum: a.PortNum,
	}
	if a.IsGlobal {
		d.IsGlobal = 1
	}
	return d
}

func fromQPDest(d *abi.QPDest) AHAttr {
	return AHAttr{
		GRH: GlobalRoute{DGID: d.DGID, FlowLabel: d.FlowLabel, SGIDIndex: int(d.SGIDIndex), HopLimit: d.HopLimit,
			TrafficClass: d.TrafficClass},
		IsGlobal: d.IsGlobal != 0, DLID: d.DLID, SL: d.SL, SrcPathBits: d.SrcPathBits, StaticRate: d.StaticRate,
		PortNum: d.PortNum,
	}
}

// modify sends MODIFY_QP, copying only the selected fields as rdma-core
// does (copy_modify_qp_fields), so the bytes match libibverbs'.
func (qp *QP) modify(a *QPAttr, mask QPAttrMask) error {
	defer runtime.KeepAlive(qp) // reachable until the command is done, so no cleanup destroys it meanwhile
	// The command's bytes go to the kernel, so they cannot live on the
	// stack: pooled, not allocated for every modify.
	m := modifyPool.Get().(*abi.ModifyQP)
	defer modifyPool.Put(m)
	*m = abi.ModifyQP{QPHandle: qp.handle, AttrMask: uint32(mask)}
	if mask&QPAttrState != 0 {
		m.QPState = uint8(a.State)
	}
	if mask&QPAttrCurState != 0 {
		m.CurQPState = uint8(a.CurState)
	}
	if mask&QPAttrEnSQDAsyncNotify != 0 && a.EnSQDAsyncNotify {
		m.EnSQDAsyncNotify = 1
	}
	if mask&QPAttrAccessFlags != 0 {
		m.QPAccessFlags = uint32(a.AccessFlags)
	}
	if mask&QPAttrPkeyIndex != 0 {
		m.PkeyIndex = uint16(a.PkeyIndex)
	}
	if mask&QPAttrPort != 0 {
		m.PortNum = a.Port
	}
	if mask&QPAttrQkey != 0 {
		m.Qkey = a.Qkey
	}
	if mask&QPAttrAV != 0 {
		m.Dest = qpDest(&a.AH)
	}
	if mask&QPAttrPathMTU != 0 {
		m.PathMTU = uint8(a.PathMTU)
	}
	if mask&QPAttrTimeout != 0 {
		m.Timeout = a.Timeout
	}
	if mask&QPAttrRetryCnt != 0 {
		m.RetryCnt = a.RetryCnt
	}
	if mask&QPAttrRNRRetry != 0 {
		m.RNRRetry = a.RNRRetry
	}
	if mask&QPAttrRQPSN != 0 {
		m.RQPSN = a.RQPSN
	}
	if mask&QPAttrMaxQPRdAtomic != 0 {
		m.MaxRdAtomic = a.MaxRdAtomic
	}
	if mask&QPAttrAltPath != 0 {
		m.AltDest = qpDest(&a.AltAH)
		m.AltPkeyIndex = uint16(a.AltPkeyIndex)
		m.AltPortNum = a.AltPort
		m.AltTimeout = a.AltTimeout
	}
	if mask&QPAttrMinRNRTimer != 0 {
		m.MinRNRTimer = a.MinRNRTimer
	}
	if mask&QPAttrSQPSN != 0 {
		m.SQPSN = a.SQPSN
	}
	if mask&QPAttrMaxDestRdAtomic != 0 {
		m.MaxDestRdAtomic = a.MaxDestRdAtomic
	}
	if mask&QPAttrPathMigState != 0 {
		m.PathMigState = a.PathMigState
	}
	if mask&QPAttrDestQPN != 0 {
		m.DestQPNum = a.DestQPN
	}
	c := qp.pd.ctx
	if mask&QPAttrRateLimit != 0 {
		// Attributes from RATE_LIMIT on need the extended command.
		ex := struct {
			Base      abi.ModifyQP
			RateLimit uint32
			Reserved  uint32
		}{Base: *m, RateLimit: a.RateLimit}
		var resp [8]byte
		return c.conn.Write("modify_qp", &transport.Write{
			Cmd: abi.CmdFlagExtended | abi.ExCmdModifyQP, In: asBytes(&ex), CoreIn: int(unsafe.Sizeof(ex)),
			Out: resp[:], CoreOut: len(resp),
		})
	}
	return c.conn.Write("modify_qp", &transport.Write{Cmd: abi.CmdModifyQP, In: asBytes(m), CoreIn: int(unsafe.Sizeof(*m))})
}

var modifyPool = sync.Pool{New: func() any { return new(abi.ModifyQP) }}

// Query returns the QP's current attributes from the kernel.
func (qp *QP) Query() (QPAttr, error) {
	if err := qp.use(); err != nil {
		return QPAttr{}, fmt.Errorf("uverbs: query_qp: %w", err)
	}
	req := abi.QueryQP{QPHandle: qp.handle, AttrMask: 0xffffffff}
	var r abi.QueryQPResp
	if err := qp.pd.ctx.conn.Write("query_qp", &transport.Write{
		Cmd: abi.CmdQueryQP, In: asBytes(&req), CoreIn: int(unsafe.Sizeof(req)),
		Out: asBytes(&r), CoreOut: int(unsafe.Sizeof(r)),
	}); err != nil {
		return QPAttr{}, err
	}
	a := QPAttr{
		State: QPState(r.QPState), CurState: QPState(r.CurQPState), PathMTU: MTU(r.PathMTU), PathMigState: r.PathMigState,
		Qkey: r.Qkey, RQPSN: r.RQPSN, SQPSN: r.SQPSN, DestQPN: r.DestQPNum, AccessFlags: Access(r.QPAccessFlags),
		Cap: QPCap{r.MaxSendWr, r.MaxRecvWr, r.MaxSendSGE, r.MaxRecvSGE, r.MaxInlineData},
		AH:  fromQPDest(&r.Dest), AltAH: fromQPDest(&r.AltDest), PkeyIndex: int(r.PkeyIndex), AltPkeyIndex: int(r.AltPkeyIndex),
		SQDraining: r.SQDraining != 0, MaxRdAtomic: r.MaxRdAtomic, MaxDestRdAtomic: r.MaxDestRdAtomic,
		MinRNRTimer: r.MinRNRTimer, Port: r.PortNum, Timeout: r.Timeout, RetryCnt: r.RetryCnt, RNRRetry: r.RNRRetry,
		AltPort: r.AltPortNum, AltTimeout: r.AltTimeout,
	}
	qp.stateA.Store(uint32(a.State))
	return a, nil
}
