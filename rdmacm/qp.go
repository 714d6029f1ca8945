package rdmacm

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/uverbs"
)

// InitQPAttr asks the kernel for the attributes that move a QP of this ID
// to state (INIT_QP_ATTR): port, P_Key index, access flags, Q_Key, the
// address vector, PSNs, timeouts, RDMA READ depths. Apply them with
// qp.Modify(&attr, mask) to drive a QP the caller created itself. On 6.12
// the access flags of an RC QP include the FLUSH bits (0x300) on devices
// that support flush.
func (id *ID) InitQPAttr(state uverbs.QPState) (uverbs.QPAttr, uverbs.QPAttrMask, error) {
	const op = "init qp attr"
	if err := id.use(op); err != nil {
		return uverbs.QPAttr{}, 0, err
	}
	if state > uverbs.QPStateErr {
		return uverbs.QPAttr{}, 0, fmt.Errorf("rdmacm: %s: state %d is not a QP state: %w", op, state, unix.EINVAL)
	}
	req := &abi.UCMInitQPAttr{ID: id.handle, QPState: uint32(state)}
	r, err := writeResp[abi.UCMInitQPAttr, abi.QPAttr](id.ch, abi.UCMCmdInitQPAttr, req, &req.Response)
	if err != nil {
		return uverbs.QPAttr{}, 0, cmdErr(op, err)
	}
	attr, mask := qpAttrFromABI(&r)
	return attr, mask, nil
}

// qpAttrFromABI converts INIT_QP_ATTR's ib_uverbs_qp_attr.
func qpAttrFromABI(r *abi.QPAttr) (uverbs.QPAttr, uverbs.QPAttrMask) {
	a := uverbs.QPAttr{
		State: uverbs.QPState(r.QPState), CurState: uverbs.QPState(r.CurQPState), PathMTU: uverbs.MTU(r.PathMTU),
		PathMigState: uint8(r.PathMigState), Qkey: r.Qkey, RQPSN: r.RQPSN, SQPSN: r.SQPSN, DestQPN: r.DestQPNum,
		AccessFlags: uverbs.Access(r.QPAccessFlags), AH: ahFromABI(&r.AHAttr), AltAH: ahFromABI(&r.AltAHAttr),
		Cap: uverbs.QPCap{MaxSendWr: r.MaxSendWr, MaxRecvWr: r.MaxRecvWr, MaxSendSGE: r.MaxSendSGE,
			MaxRecvSGE: r.MaxRecvSGE, MaxInlineData: r.MaxInlineData},
		PkeyIndex: int(r.PkeyIndex), AltPkeyIndex: int(r.AltPkeyIndex), EnSQDAsyncNotify: r.EnSQDAsyncNotify != 0,
		SQDraining: r.SQDraining != 0, MaxRdAtomic: r.MaxRdAtomic, MaxDestRdAtomic: r.MaxDestRdAtomic,
		MinRNRTimer: r.MinRNRTimer, Port: r.PortNum, Timeout: r.Timeout, RetryCnt: r.RetryCnt, RNRRetry: r.RNRRetry,
		AltPort: r.AltPortNum, AltTimeout: r.AltTimeout,
	}
	// Only the IB spec's standard bits (STATE .. DEST_QPN) come from the CM.
	return a, uverbs.QPAttrMask(r.QPAttrMask) & (abi.QPAttrDestQPN<<1 - 1)
}

// modifyFromCM moves qp to state with the kernel's attributes for it,
// with MaxDestRdAtomic set to destRd and MaxRdAtomic to rd where those are
// not MaxResources (noOverride). The overrides are values, not an edit
// function: a pointer to the attributes handed to a function value moved
// them to the heap, about 700 bytes for each of a connection's moves.
func (id *ID) modifyFromCM(qp *uverbs.QP, state uverbs.QPState, destRd, rd uint8) error {
	attr, mask, err := id.InitQPAttr(state)
	if err != nil {
		return err
	}
	if destRd != MaxResources {
		attr.MaxDestRdAtomic = destRd
	}
	if rd != MaxResources {
		attr.MaxRdAtomic = rd
	}
	if err := qp.Modify(&attr, mask); err != nil {
		return fmt.Errorf("move QP %d to %v with the CM's attributes (%v): %w", qp.QPN(), state, mask, err)
	}
	return nil
}

// noOverride leaves modifyFromCM's RDMA READ depths as the kernel gives
// them.
const noOverride = MaxResources

// moveToRTS is librdmacm's ucma_modify_qp_rtr and _rts for RC: INIT→INIT
// (the access flags the connection negotiated), RTR, RTS. resp and init,
// unless MaxResources, override the kernel's RDMA READ depths.
func (id *ID) moveToRTS(qp *uverbs.QP, resp, init uint8) error {
	if err := id.modifyFromCM(qp, uverbs.QPStateInit, noOverride, noOverride); err != nil {
		return err
	}
	if err := id.modifyFromCM(qp, uverbs.QPStateRTR, resp, noOverride); err != nil {
		return err
	}
	return id.modifyFromCM(qp, uverbs.QPStateRTS, noOverride, init)
}

// CreateQP creates the ID's QP on pd, which must belong to the ID's device
// (ID.Context), and moves it to INIT (RC) or through INIT, RTR to RTS (UD)
// with the kernel's attributes, as rdma_create_qp does. attr.Type 0 takes
// the ID's QP type. Connect and Accept then drive it; Close destroys it.
func (id *ID) CreateQP(pd *uverbs.PD, attr uverbs.QPInitAttr) (*uverbs.QP, error) {
	const op = "create qp"
	if err := id.use(op); err != nil {
		return nil, err
	}
	if pd == nil {
		return nil, fmt.Errorf("rdmacm: %s: nil PD: %w", op, unix.EINVAL)
	}
	if pd.Context() == nil {
		return nil, fmt.Errorf("rdmacm: %s: the PD has no context (allocate it with AllocPD on ID.Context): %w", op, unix.EINVAL)
	}
	if attr.Type == 0 {
		attr.Type = id.qpType
	}
	if attr.Type != id.qpType {
		return nil, fmt.Errorf("rdmacm: %s: QPInitAttr.Type %v, but the ID's port space %v carries %v: %w", op, attr.Type, id.ps, id.qpType, unix.EINVAL)
	}
	if attr.SendCQ == nil || attr.RecvCQ == nil {
		return nil, fmt.Errorf("rdmacm: %s: QPInitAttr.SendCQ and RecvCQ are required: %w", op, unix.EINVAL)
	}
	d, err := id.device()
	if err != nil {
		return nil, fmt.Errorf("rdmacm: %s: %w", op, err)
	}
	if pd.Context().Name() != d.name {
		return nil, fmt.Errorf("rdmacm: %s: the PD is on %s, the ID on %s: %w", op, pd.Context().Name(), d.name, unix.EINVAL)
	}
	id.mu.Lock()
	has := id.qp != nil
	id.mu.Unlock()
	if has {
		return nil, fmt.Errorf("rdmacm: %s: the ID already has a QP: %w", op, unix.EEXIST)
	}
	qp, err := pd.CreateQP(attr)
	if err != nil {
		return nil, fmt.Errorf("rdmacm: %s: %w", op, err)
	}
	err = id.modifyFromCM(qp, uverbs.QPStateInit, noOverride, noOverride)
	if err == nil && attr.Type == uverbs.QPTypeUD {
		err = qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTR}, uverbs.QPAttrState)
		if err == nil {
			err = qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTS}, uverbs.QPAttrState|uverbs.QPAttrSQPSN)
		}
	}
	if err != nil {
		qp.Close()
		return nil, fmt.Errorf("rdmacm: %s: %w", op, err)
	}
	id.mu.Lock()
	if id.closed || id.qp != nil {
		id.mu.Unlock()
		qp.Close()
		return nil, fmt.Errorf("rdmacm: %s: the ID was closed or given a QP meanwhile: %w", op, unix.EINVAL)
	}
	id.qp = qp
	id.mu.Unlock()
	return qp, nil
}

// DestroyQP destroys the QP CreateQP made (rdma_destroy_qp); Close does it
// too.
func (id *ID) DestroyQP() error {
	if id == nil {
		return fmt.Errorf("rdmacm: destroy qp: nil ID: %w", unix.EINVAL)
	}
	// Not while the event reader moves the QP to the error state: the
	// kernel would refuse the destroy with EBUSY.
	id.qpOp.Lock()
	defer id.qpOp.Unlock()
	id.mu.Lock()
	qp := id.qp
	id.qp = nil
	id.mu.Unlock()
	if qp == nil {
		return nil
	}
	return qp.Close()
}
