package mlx5

import (
	"encoding/binary"
	"errors"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/internal/provider"
)

// ErrNoCQDoorbell: the CQ has no UAR doorbell register to arm through.
var ErrNoCQDoorbell = errors.New("mlx5: CQ has no UAR doorbell register")

// Arm requests an event for the next completion (the next solicited one
// with solicitedOnly), as libmlx5's mlx5_arm_cq: the arm word
// sn<<28 | command | consumer index goes into the doorbell record, then
// (arm word<<32 | CQN) big endian into the UAR's CQ doorbell register. sn
// is the event count modulo 4, so the HCA can tell an arm that raced an
// event it already sent.
func (cq *CQ) Arm(solicitedOnly bool) error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.closed {
		return provider.ErrClosed
	}
	if cq.armDB == nil {
		return ErrNoCQDoorbell
	}
	if cq.ctx != nil {
		// The UAR page is unmapped when the context closes.
		cq.ctx.life.mu.RLock()
		defer cq.ctx.life.mu.RUnlock()
		if cq.ctx.life.closed.Load() {
			return provider.ErrClosed
		}
	}
	cmd := uint32(cqDBReqNot)
	if solicitedOnly {
		cmd = cqDBReqNotSol
	}
	arm := (atomic.LoadUint32(&cq.armSN)&3)<<28 | cmd | cq.cons&cqConsumerIdxMask
	// The record, then the register, with libmlx5's barriers (the send
	// doorbell's sequence: mmio_wc_start before the 64-bit store,
	// mmio_flush_writes after): the HCA reads the record when the
	// doorbell arrives.
	var db [8]byte
	binary.BigEndian.PutUint64(db[:], uint64(arm)<<32|uint64(cq.cqn))
	ringDoorbell(&cq.dbrec[cqDBRecArm], arm, cq.armDB, unsafe.Pointer(&db[0]))
	return nil
}

// Event records that a completion event of this CQ was read from its
// channel (libmlx5's mlx5_cq_event, called by ibv_get_cq_event): the next
// Arm carries the next sequence number.
// It takes no lock: the count is atomic, so that an event read on one
// goroutine never waits for, or races, a poll on another.
func (cq *CQ) Event() { atomic.AddUint32(&cq.armSN, 1) }
