package uverbs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/leakcheck"
	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/sysfs"
)

// Bad-input table: TestBadInput runs each row below against rxe0 in the
// test VM, through the transport GOVERBS_TRANSPORT names. Each row asserts
// the error (errors.Is on a sentinel or an errno) and that the message
// names the field, or, where the kernel is the one refusing, the verb;
// around the whole table the kernel's object counts (`rdma res show`) and
// the process's descriptors and device mappings must not change, and the
// fixture's objects must still work. TestBadInputRowsListed keeps this list
// equal to the table.
//
// Rows:
//
//	Open/empty name
//	Open/unknown device
//	Open/path in the name
//	Open/unknown transport
//	AllocBuffer/size 0
//	AllocBuffer/negative size
//	AllocBuffer/size that overflows
//	AllocBuffer/more than the address space
//	CheckProvider/zero device
//	Context.AllocPD/nil
//	Context.AllocPD/closed
//	Context.Close/nil
//	Context.CreateCQ/nil
//	Context.CreateCQ/closed
//	Context.CreateCQ/cqe 0
//	Context.CreateCQ/cqe -1
//	Context.CreateCQ/cqe beyond max_cqe
//	Context.CreateCQ/cqe beyond the ABI
//	Context.CreateCQ/comp vector -1
//	Context.CreateCQ/comp vector past the device's
//	Context.CreateCQ/closed channel
//	Context.CreateCQ/channel of another context
//	Context.NewCompChannel/nil
//	Context.NewCompChannel/closed
//	Context.QueryDevice/nil
//	Context.QueryDevice/closed
//	Context.QueryPort/port 0
//	Context.QueryPort/port 2
//	Context.QueryPort/port 255
//	Context.QueryPort/closed
//	Context.QueryGID/port 0
//	Context.QueryGID/port 2
//	Context.QueryGID/index -1
//	Context.QueryGID/index past the table
//	Context.QueryGID/index beyond int32
//	Context.QueryGID/empty slot
//	Context.QueryGID/closed
//	Context.QueryGIDTable/nil
//	Context.QueryGIDTable/closed
//	Context.QueryPKey/port 0
//	Context.QueryPKey/port 2
//	Context.QueryPKey/index -1
//	Context.QueryPKey/index past the table
//	Context.QueryPKey/index beyond 16 bits
//	Context.QueryPKey/closed
//	Context.RecommendedGID/port 0
//	Context.RecommendedGID/port 2
//	Context.RecommendedGID/closed
//	Context.WaitAsyncEvent/nil
//	Context.WaitAsyncEvent/closed
//	PD.AllocMW/nil
//	PD.AllocMW/closed
//	PD.AllocMW/type 0
//	PD.AllocMW/type 3
//	PD.Close/nil
//	PD.CreateAH/nil
//	PD.CreateAH/closed
//	PD.CreateAH/port 0
//	PD.CreateAH/port 2
//	PD.CreateAH/not global on RoCE
//	PD.CreateAH/SGID index past the table
//	PD.CreateQP/nil
//	PD.CreateQP/closed
//	PD.CreateQP/type 0
//	PD.CreateQP/type 200
//	PD.CreateQP/XRC_SEND on rxe
//	PD.CreateQP/XRC_SEND with a RecvCQ
//	PD.CreateQP/XRC_RECV in a PD
//	PD.CreateQP/no CQs
//	PD.CreateQP/no RecvCQ with an SRQ
//	PD.CreateQP/SendCQ of another context
//	PD.CreateQP/RecvCQ of another context
//	PD.CreateQP/closed SendCQ
//	PD.CreateQP/closed RecvCQ
//	PD.CreateQP/closed SRQ
//	PD.CreateQP/SRQ of another context
//	PD.CreateQP/receive caps with an SRQ
//	PD.CreateQP/MaxSendWr beyond max_qp_wr
//	PD.CreateQP/MaxRecvWr beyond max_qp_wr
//	PD.CreateQP/MaxSendSGE beyond max_sge
//	PD.CreateQP/MaxInlineData huge
//	PD.CreateSRQ/nil
//	PD.CreateSRQ/closed
//	PD.CreateSRQ/MaxWr 0
//	PD.CreateSRQ/MaxSGE 0
//	PD.CreateSRQ/MaxWr beyond max_srq_wr
//	PD.CreateSRQ/MaxSGE beyond max_srq_sge
//	PD.CreateXRCSRQ/nil XRCD
//	PD.CreateXRCSRQ/closed XRCD
//	PD.CreateXRCSRQ/XRCD of another context
//	PD.CreateXRCSRQ/nil CQ
//	PD.CreateXRCSRQ/on rxe
//	Context.OpenXRCD/on rxe
//	Context.OpenXRCD/Exclusive without Create
//	XRCD.Close/nil
//	XRCD.CreateQP/nil
//	XRCD.CreateQP/closed
//	XRCD.CreateQP/type RC
//	XRCD.CreateQP/with a CQ
//	PD.RegisterBuffer/nil PD
//	PD.RegisterBuffer/closed PD
//	PD.RegisterBuffer/nil buffer
//	PD.RegisterBuffer/closed buffer
//	PD.RegisterBuffer/negative offset
//	PD.RegisterBuffer/length 0
//	PD.RegisterBuffer/negative length
//	PD.RegisterBuffer/past the end
//	PD.RegisterBuffer/offset past the end
//	PD.RegisterBuffer/huge length
//	PD.RegisterBuffer/unknown access bits
//	PD.RegisterBuffer/remote write without local write
//	PD.RegisterBuffer/remote atomic without local write
//	PD.RegisterBufferIOVA/closed buffer
//	PD.RegisterPinned/empty
//	PD.RegisterPinned/nil PD
//	PD.RegisterPinned/unmapped memory
//	PD.RegisterPinned/PROT_NONE memory
//	PD.RegisterPinned/read-only memory with local write
//	PD.RegisterDmabuf/fd -1
//	PD.RegisterDmabuf/length 0
//	PD.RegisterDmabuf/closed PD
//	PD.RegisterDmabuf/not a dma-buf
//	MR.ReReg/nil
//	MR.ReReg/closed
//	MR.ReReg/flags 0
//	MR.ReReg/translation
//	MR.ReReg/unknown flags
//	MR.ReReg/nil PD
//	MR.ReReg/closed PD
//	MR.ReReg/PD of another context
//	MR.ReReg/unknown access bits
//	MR.ReRegBuffer/nil
//	MR.ReRegBuffer/closed
//	MR.ReRegBuffer/nil buffer
//	MR.ReRegBuffer/outside the buffer
//	MR.Close/nil
//	MW.Close/nil
//	AH.Close/nil
//	Buffer.Close/nil
//	CQ.Resize/nil
//	CQ.Resize/closed
//	CQ.Resize/cqe 0
//	CQ.Resize/cqe -1
//	CQ.Resize/cqe beyond the ABI
//	CQ.Resize/cqe beyond max_cqe
//	CQ.RequestNotify/nil
//	CQ.RequestNotify/closed
//	CQ.Poll/nil
//	CQ.Poll/closed
//	CQ.Close/nil
//	CompChannel.Wait/nil
//	CompChannel.Wait/closed
//	CompChannel.Close/nil
//	CompChannel.Close/with a CQ attached
//	QP.Modify/nil
//	QP.Modify/closed
//	QP.Modify/nil attributes
//	QP.Modify/empty mask
//	QP.Modify/unknown mask bits
//	QP.Modify/state 9
//	QP.Modify/RESET to RTR
//	QP.Modify/RESET to RTS
//	QP.Modify/RESET to SQD
//	QP.Modify/INIT without its attributes
//	QP.Modify/RTR without its attributes
//	QP.Modify/PathMTU 0
//	QP.Modify/PathMTU 6
//	QP.Modify/port 0
//	QP.Modify/port 2
//	QP.Modify/SGID index past the table
//	QP.Query/nil
//	QP.Query/closed
//	QP.Connect/nil
//	QP.Connect/closed
//	QP.Connect/SGIDIndex -2
//	QP.Connect/SGIDIndex 256
//	QP.Connect/port 2
//	QP.AttachMulticast/nil
//	QP.AttachMulticast/closed
//	QP.AttachMulticast/RC QP
//	QP.DetachMulticast/UC QP
//	QP.Close/nil
//	QP.PostSend/nil
//	QP.PostSend/closed
//	QP.PostSend/RESET
//	QP.PostSend/too many SGEs
//	QP.PostSend/inline too large
//	QP.PostSend/queue full
//	QP.PostSend/second of two refused
//	QP.PostSend/unknown opcode
//	QP.PostSend/UD without AH
//	QP.PostSend/UD with a nil *AH
//	QP.PostSend/UD with a closed AH
//	QP.PostSend/UD with another context's AH
//	QP.PostSend/UD with another PD's AH
//	QP.PostSend/RDMA write on UD
//	QP.PostSend/atomic on UD
//	QP.PostSend/RDMA read on UC
//	QP.PostSend/atomic on UC
//	QP.PostSend/atomic at an unaligned address
//	QP.PostSend/atomic shorter than 8 bytes
//	QP.PostSend/inline RDMA read
//	QP.PostSend/more than 2 GiB
//	QP.PostRecv/nil
//	QP.PostRecv/closed
//	QP.PostRecv/RESET
//	QP.PostRecv/too many SGEs
//	QP.PostRecv/queue full
//	QP.PostRecv/with an SRQ
//	SRQ.Modify/nil
//	SRQ.Modify/closed
//	SRQ.Modify/mask 0
//	SRQ.Modify/unknown mask bits
//	SRQ.Modify/MaxWr beyond max_srq_wr
//	SRQ.Modify/limit above MaxWr
//	SRQ.Query/nil
//	SRQ.Query/closed
//	SRQ.PostRecv/nil
//	SRQ.PostRecv/closed
//	SRQ.PostRecv/too many SGEs
//	SRQ.PostRecv/queue full
//	SRQ.Close/nil
//
// Getters without an error (Handle, QPN, Lkey, Cap, ...) are left out: on a
// nil object they fault like any Go method reading its receiver, and on a
// closed one they return what the object had.

// badFixture holds the objects the rows misuse. Nothing in it changes while
// the table runs.
type badFixture struct {
	name                       string
	c, other, closed           *Context
	attr                       DeviceAttr
	gid                        GIDEntry
	pd, otherPD, closedPD      *PD
	cq, otherCQ, closedCQ      *CQ
	ch, otherCh, closedCh      *CompChannel
	chCQ                       *CQ // a CQ on ch
	buf, closedBuf             *Buffer
	mr, closedMR               *MR
	srq, otherSRQ, closedSRQ   *SRQ
	rc, closedQP               *QP // rc stays in RESET
	ud, uc, rcRTS, srqQP       *QP // in RTS (srqQP receives from srq)
	ah, closedAH, otherAH      *AH
	pd2                        *PD   // another PD of the context
	pd2AH                      *AH   // of pd2
	sgl                        []SGE // one SGE over mr
	unmapped, protNone, rdOnly []byte
}

// badRow is one bad input. do returns whatever the call created (closed
// by the test if the call wrongly succeeded) and the error.
type badRow struct {
	name  string
	want  error  // errors.Is target; nil: the call must succeed (no-op rows)
	names string // what the message must say: the field, or the verb the kernel refused
	do    func(f *badFixture) (any, error)
}

func errOnly(err error) (any, error) { return nil, err }

func udWR(f *badFixture, op WROpcode) SendWR {
	return SendWR{Opcode: op, SGL: f.sgl, AH: f.ah, RemoteQPN: f.ud.QPN(), RemoteQkey: 0x11111111}
}

func badRows() []badRow {
	return []badRow{
		{"Open/empty name", sysfs.ErrNoDevice, "open", func(f *badFixture) (any, error) { return Open("") }},
		{"Open/unknown device", sysfs.ErrNoDevice, "nosuch0", func(f *badFixture) (any, error) { return Open("nosuch0") }},
		{"Open/path in the name", sysfs.ErrNoDevice, "../", func(f *badFixture) (any, error) { return Open("../" + f.name) }},
		{"Open/unknown transport", unix.EINVAL, "transport", func(f *badFixture) (any, error) { return Open(f.name, WithTransport(Transport(99))) }},
		{"AllocBuffer/size 0", unix.EINVAL, "size 0", func(f *badFixture) (any, error) { return AllocBuffer(0) }},
		{"AllocBuffer/negative size", unix.EINVAL, "size -1", func(f *badFixture) (any, error) { return AllocBuffer(-1) }},
		{"AllocBuffer/size that overflows", unix.EINVAL, "overflows", func(f *badFixture) (any, error) { return AllocBuffer(math.MaxInt) }},
		{"AllocBuffer/more than the address space", unix.ENOMEM, "AllocBuffer", func(f *badFixture) (any, error) { return AllocBuffer(1 << 60) }},
		{"CheckProvider/zero device", ErrNotSupported, "no goverbs provider", func(f *badFixture) (any, error) { return errOnly(CheckProvider(sysfs.Device{})) }},

		{"Context.AllocPD/nil", unix.EINVAL, "nil context", func(f *badFixture) (any, error) { return (*Context)(nil).AllocPD() }},
		{"Context.AllocPD/closed", ErrClosed, "closed", func(f *badFixture) (any, error) { return f.closed.AllocPD() }},
		{"Context.Close/nil", nil, "", func(f *badFixture) (any, error) { return errOnly((*Context)(nil).Close()) }},
		{"Context.CreateCQ/nil", unix.EINVAL, "nil context", func(f *badFixture) (any, error) { return (*Context)(nil).CreateCQ(4, nil) }},
		{"Context.CreateCQ/closed", ErrClosed, "closed", func(f *badFixture) (any, error) { return f.closed.CreateCQ(4, nil) }},
		{"Context.CreateCQ/cqe 0", unix.EINVAL, "cqe 0", func(f *badFixture) (any, error) { return f.c.CreateCQ(0, nil) }},
		{"Context.CreateCQ/cqe -1", unix.EINVAL, "cqe -1", func(f *badFixture) (any, error) { return f.c.CreateCQ(-1, nil) }},
		{"Context.CreateCQ/cqe beyond max_cqe", unix.EINVAL, "create_cq", func(f *badFixture) (any, error) { return f.c.CreateCQ(int(f.attr.MaxCQE)+1, nil) }},
		{"Context.CreateCQ/cqe beyond the ABI", unix.EINVAL, "cqe 2147483648", func(f *badFixture) (any, error) { return f.c.CreateCQ(1<<31, nil) }},
		{"Context.CreateCQ/comp vector -1", unix.EINVAL, "comp vector -1", func(f *badFixture) (any, error) { return f.c.CreateCQ(4, &CQOptions{CompVector: -1}) }},
		{"Context.CreateCQ/comp vector past the device's", unix.EINVAL, "comp vector", func(f *badFixture) (any, error) {
			return f.c.CreateCQ(4, &CQOptions{CompVector: f.c.NumCompVectors()})
		}},
		{"Context.CreateCQ/closed channel", ErrClosed, "completion channel", func(f *badFixture) (any, error) { return f.c.CreateCQ(4, &CQOptions{Channel: f.closedCh}) }},
		{"Context.CreateCQ/channel of another context", unix.EINVAL, "completion channel belongs to another context", func(f *badFixture) (any, error) {
			return f.c.CreateCQ(4, &CQOptions{Channel: f.otherCh})
		}},
		{"Context.NewCompChannel/nil", unix.EINVAL, "nil context", func(f *badFixture) (any, error) { return (*Context)(nil).NewCompChannel() }},
		{"Context.NewCompChannel/closed", ErrClosed, "closed", func(f *badFixture) (any, error) { return f.closed.NewCompChannel() }},
		{"Context.QueryDevice/nil", unix.EINVAL, "nil context", func(f *badFixture) (any, error) { return errOf((*Context)(nil).QueryDevice()) }},
		{"Context.QueryDevice/closed", ErrClosed, "closed", func(f *badFixture) (any, error) { return errOf(f.closed.QueryDevice()) }},
		{"Context.QueryPort/port 0", unix.EINVAL, "port 0", func(f *badFixture) (any, error) { return errOf(f.c.QueryPort(0)) }},
		{"Context.QueryPort/port 2", unix.EINVAL, "query_port", func(f *badFixture) (any, error) { return errOf(f.c.QueryPort(2)) }},
		{"Context.QueryPort/port 255", unix.EINVAL, "query_port", func(f *badFixture) (any, error) { return errOf(f.c.QueryPort(255)) }},
		{"Context.QueryPort/closed", ErrClosed, "closed", func(f *badFixture) (any, error) { return errOf(f.closed.QueryPort(1)) }},
		{"Context.QueryGID/port 0", unix.EINVAL, "port 0", func(f *badFixture) (any, error) { return errOf(f.c.QueryGID(0, 0)) }},
		{"Context.QueryGID/port 2", unix.EINVAL, "query_gid", func(f *badFixture) (any, error) { return errOf(f.c.QueryGID(2, 0)) }},
		{"Context.QueryGID/index -1", unix.EINVAL, "GID index -1", func(f *badFixture) (any, error) { return errOf(f.c.QueryGID(1, -1)) }},
		{"Context.QueryGID/index past the table", unix.EINVAL, "query_gid", func(f *badFixture) (any, error) { return errOf(f.c.QueryGID(1, 1<<20)) }},
		{"Context.QueryGID/index beyond int32", unix.EINVAL, "GID index 2147483648", func(f *badFixture) (any, error) { return errOf(f.c.QueryGID(1, 1<<31)) }},
		{"Context.QueryGID/empty slot", ErrNoGID, "empty", func(f *badFixture) (any, error) { return errOf(f.c.QueryGID(1, 100)) }},
		{"Context.QueryGID/closed", ErrClosed, "closed", func(f *badFixture) (any, error) { return errOf(f.closed.QueryGID(1, 0)) }},
		{"Context.QueryGIDTable/nil", unix.EINVAL, "nil context", func(f *badFixture) (any, error) { return errOf((*Context)(nil).QueryGIDTable()) }},
		{"Context.QueryGIDTable/closed", ErrClosed, "closed", func(f *badFixture) (any, error) { return errOf(f.closed.QueryGIDTable()) }},
		{"Context.QueryPKey/port 0", unix.EINVAL, "port 0", func(f *badFixture) (any, error) { return errOf(f.c.QueryPKey(0, 0)) }},
		{"Context.QueryPKey/port 2", unix.EINVAL, "no port 2", func(f *badFixture) (any, error) { return errOf(f.c.QueryPKey(2, 0)) }},
		{"Context.QueryPKey/index -1", unix.EINVAL, "P_Key index -1 out of range", func(f *badFixture) (any, error) { return errOf(f.c.QueryPKey(1, -1)) }},
		{"Context.QueryPKey/index past the table", unix.EINVAL, "P_Key index 1000 is past the table", func(f *badFixture) (any, error) { return errOf(f.c.QueryPKey(1, 1000)) }},
		{"Context.QueryPKey/index beyond 16 bits", unix.EINVAL, "P_Key index 65536 out of range", func(f *badFixture) (any, error) { return errOf(f.c.QueryPKey(1, 65536)) }},
		{"Context.QueryPKey/closed", ErrClosed, "closed", func(f *badFixture) (any, error) { return errOf(f.closed.QueryPKey(1, 0)) }},
		{"Context.RecommendedGID/port 0", unix.EINVAL, "port 0", func(f *badFixture) (any, error) { return errOf(f.c.RecommendedGID(0)) }},
		{"Context.RecommendedGID/port 2", unix.EINVAL, "query_port", func(f *badFixture) (any, error) { return errOf(f.c.RecommendedGID(2)) }},
		{"Context.RecommendedGID/closed", ErrClosed, "closed", func(f *badFixture) (any, error) { return errOf(f.closed.RecommendedGID(1)) }},
		{"Context.WaitAsyncEvent/nil", unix.EINVAL, "nil context", func(f *badFixture) (any, error) {
			return errOf((*Context)(nil).WaitAsyncEvent(context.Background()))
		}},
		{"Context.WaitAsyncEvent/closed", ErrClosed, "closed", func(f *badFixture) (any, error) {
			return errOf(f.closed.WaitAsyncEvent(context.Background()))
		}},

		{"PD.AllocMW/nil", unix.EINVAL, "nil PD", func(f *badFixture) (any, error) { return (*PD)(nil).AllocMW(MWType2) }},
		{"PD.AllocMW/closed", ErrClosed, "PD", func(f *badFixture) (any, error) { return f.closedPD.AllocMW(MWType2) }},
		{"PD.AllocMW/type 0", unix.EINVAL, "type 0", func(f *badFixture) (any, error) { return f.pd.AllocMW(0) }},
		{"PD.AllocMW/type 3", unix.EINVAL, "type 3", func(f *badFixture) (any, error) { return f.pd.AllocMW(3) }},
		{"PD.Close/nil", nil, "", func(f *badFixture) (any, error) { return errOnly((*PD)(nil).Close()) }},
		{"PD.CreateAH/nil", unix.EINVAL, "nil PD", func(f *badFixture) (any, error) { return (*PD)(nil).CreateAH(f.ah.Attr()) }},
		{"PD.CreateAH/closed", ErrClosed, "PD", func(f *badFixture) (any, error) { return f.closedPD.CreateAH(f.ah.Attr()) }},
		{"PD.CreateAH/port 0", unix.EINVAL, "PortNum 0", func(f *badFixture) (any, error) {
			a := f.ah.Attr()
			a.PortNum = 0
			return f.pd.CreateAH(a)
		}},
		{"PD.CreateAH/port 2", unix.EINVAL, "create_ah", func(f *badFixture) (any, error) {
			a := f.ah.Attr()
			a.PortNum = 2
			return f.pd.CreateAH(a)
		}},
		{"PD.CreateAH/not global on RoCE", unix.EINVAL, "IsGlobal", func(f *badFixture) (any, error) {
			return f.pd.CreateAH(AHAttr{PortNum: 1, DLID: 1})
		}},
		{"PD.CreateAH/SGID index past the table", unix.ENODATA, "create_ah", func(f *badFixture) (any, error) {
			a := f.ah.Attr()
			a.GRH.SGIDIndex = 255
			return f.pd.CreateAH(a)
		}},
		{"PD.CreateQP/nil", unix.EINVAL, "nil PD", func(f *badFixture) (any, error) { return (*PD)(nil).CreateQP(f.qpAttr(QPTypeRC)) }},
		{"PD.CreateQP/closed", ErrClosed, "PD", func(f *badFixture) (any, error) { return f.closedPD.CreateQP(f.qpAttr(QPTypeRC)) }},
		{"PD.CreateQP/type 0", unix.EINVAL, "Type", func(f *badFixture) (any, error) { return f.pd.CreateQP(f.qpAttr(0)) }},
		{"PD.CreateQP/type 200", unix.EINVAL, "Type", func(f *badFixture) (any, error) { return f.pd.CreateQP(f.qpAttr(200)) }},
		// rxe has no XRC: its provider refuses the type before the kernel.
		{"PD.CreateQP/XRC_SEND on rxe", ErrNotSupported, "rxe: XRC_SEND", func(f *badFixture) (any, error) {
			return f.pd.CreateQP(QPInitAttr{Type: QPTypeXRCSend, SendCQ: f.cq, Cap: QPCap{MaxSendWr: 4, MaxSendSGE: 1}})
		}},
		{"PD.CreateQP/XRC_SEND with a RecvCQ", unix.EINVAL, "no receive side", func(f *badFixture) (any, error) { return f.pd.CreateQP(f.qpAttr(QPTypeXRCSend)) }},
		{"PD.CreateQP/XRC_RECV in a PD", ErrNotSupported, "XRC domain", func(f *badFixture) (any, error) { return f.pd.CreateQP(f.qpAttr(QPTypeXRCRecv)) }},
		{"PD.CreateQP/no CQs", unix.EINVAL, "SendCQ", func(f *badFixture) (any, error) {
			return f.pd.CreateQP(QPInitAttr{Type: QPTypeRC, Cap: QPCap{MaxSendWr: 1, MaxRecvWr: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
		}},
		{"PD.CreateQP/no RecvCQ with an SRQ", unix.EINVAL, "RecvCQ", func(f *badFixture) (any, error) {
			return f.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: f.cq, SRQ: f.srq, Cap: QPCap{MaxSendWr: 1, MaxSendSGE: 1}})
		}},
		{"PD.CreateQP/SendCQ of another context", unix.EINVAL, "SendCQ", func(f *badFixture) (any, error) {
			a := f.qpAttr(QPTypeRC)
			a.SendCQ = f.otherCQ
			return f.pd.CreateQP(a)
		}},
		{"PD.CreateQP/RecvCQ of another context", unix.EINVAL, "RecvCQ", func(f *badFixture) (any, error) {
			a := f.qpAttr(QPTypeRC)
			a.RecvCQ = f.otherCQ
			return f.pd.CreateQP(a)
		}},
		{"PD.CreateQP/closed SendCQ", ErrClosed, "SendCQ", func(f *badFixture) (any, error) {
			a := f.qpAttr(QPTypeRC)
			a.SendCQ = f.closedCQ
			return f.pd.CreateQP(a)
		}},
		{"PD.CreateQP/closed RecvCQ", ErrClosed, "RecvCQ", func(f *badFixture) (any, error) {
			a := f.qpAttr(QPTypeRC)
			a.RecvCQ = f.closedCQ
			return f.pd.CreateQP(a)
		}},
		{"PD.CreateQP/closed SRQ", ErrClosed, "SRQ", func(f *badFixture) (any, error) {
			return f.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: f.cq, RecvCQ: f.cq, SRQ: f.closedSRQ, Cap: QPCap{MaxSendWr: 1, MaxSendSGE: 1}})
		}},
		{"PD.CreateQP/SRQ of another context", unix.EINVAL, "SRQ", func(f *badFixture) (any, error) {
			return f.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: f.cq, RecvCQ: f.cq, SRQ: f.otherSRQ, Cap: QPCap{MaxSendWr: 1, MaxSendSGE: 1}})
		}},
		{"PD.CreateQP/receive caps with an SRQ", unix.EINVAL, "MaxRecvWr", func(f *badFixture) (any, error) {
			return f.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: f.cq, RecvCQ: f.cq, SRQ: f.srq, Cap: QPCap{MaxSendWr: 1, MaxSendSGE: 1, MaxRecvWr: 1}})
		}},
		{"PD.CreateQP/MaxSendWr beyond max_qp_wr", unix.EINVAL, "create_qp", func(f *badFixture) (any, error) {
			a := f.qpAttr(QPTypeRC)
			a.Cap.MaxSendWr = f.attr.MaxQPWr + 1
			return f.pd.CreateQP(a)
		}},
		{"PD.CreateQP/MaxRecvWr beyond max_qp_wr", unix.EINVAL, "create_qp", func(f *badFixture) (any, error) {
			a := f.qpAttr(QPTypeRC)
			a.Cap.MaxRecvWr = math.MaxUint32
			return f.pd.CreateQP(a)
		}},
		{"PD.CreateQP/MaxSendSGE beyond max_sge", unix.EINVAL, "create_qp", func(f *badFixture) (any, error) {
			a := f.qpAttr(QPTypeRC)
			a.Cap.MaxSendSGE = f.attr.MaxSGE + 1
			return f.pd.CreateQP(a)
		}},
		{"PD.CreateQP/MaxInlineData huge", unix.EINVAL, "create_qp", func(f *badFixture) (any, error) {
			a := f.qpAttr(QPTypeRC)
			a.Cap.MaxInlineData = math.MaxUint32
			return f.pd.CreateQP(a)
		}},
		{"PD.CreateSRQ/nil", unix.EINVAL, "nil PD", func(f *badFixture) (any, error) { return (*PD)(nil).CreateSRQ(SRQAttr{MaxWr: 4, MaxSGE: 1}) }},
		{"PD.CreateSRQ/closed", ErrClosed, "PD", func(f *badFixture) (any, error) { return f.closedPD.CreateSRQ(SRQAttr{MaxWr: 4, MaxSGE: 1}) }},
		{"PD.CreateSRQ/MaxWr 0", unix.EINVAL, "MaxWr 0", func(f *badFixture) (any, error) { return f.pd.CreateSRQ(SRQAttr{MaxSGE: 1}) }},
		{"PD.CreateSRQ/MaxSGE 0", unix.EINVAL, "MaxSGE 0", func(f *badFixture) (any, error) { return f.pd.CreateSRQ(SRQAttr{MaxWr: 4}) }},
		{"PD.CreateSRQ/MaxWr beyond max_srq_wr", unix.EINVAL, "create_srq", func(f *badFixture) (any, error) {
			return f.pd.CreateSRQ(SRQAttr{MaxWr: f.attr.MaxSRQWr + 1, MaxSGE: 1})
		}},
		{"PD.CreateSRQ/MaxSGE beyond max_srq_sge", unix.EINVAL, "create_srq", func(f *badFixture) (any, error) {
			return f.pd.CreateSRQ(SRQAttr{MaxWr: 4, MaxSGE: f.attr.MaxSRQSGE + 1})
		}},
		// rxe opens no XRC domain, so the XRCDs below are stand-ins that
		// never reached the kernel: the checks they hit come before it.
		{"PD.CreateXRCSRQ/nil XRCD", unix.EINVAL, "nil XRCD", func(f *badFixture) (any, error) {
			return f.pd.CreateXRCSRQ(nil, f.cq, SRQAttr{MaxWr: 4, MaxSGE: 1})
		}},
		{"PD.CreateXRCSRQ/closed XRCD", ErrClosed, "XRCD", func(f *badFixture) (any, error) {
			return f.pd.CreateXRCSRQ(&XRCD{ctx: f.c, closed: true, ref: &cleanupRef{}}, f.cq, SRQAttr{MaxWr: 4, MaxSGE: 1})
		}},
		{"PD.CreateXRCSRQ/XRCD of another context", unix.EINVAL, "XRCD belongs to another context", func(f *badFixture) (any, error) {
			return f.pd.CreateXRCSRQ(&XRCD{ctx: f.other, ref: &cleanupRef{}}, f.cq, SRQAttr{MaxWr: 4, MaxSGE: 1})
		}},
		{"PD.CreateXRCSRQ/nil CQ", unix.EINVAL, "nil CQ", func(f *badFixture) (any, error) {
			return f.pd.CreateXRCSRQ(&XRCD{ctx: f.c, ref: &cleanupRef{}}, nil, SRQAttr{MaxWr: 4, MaxSGE: 1})
		}},
		{"PD.CreateXRCSRQ/on rxe", ErrNotSupported, "rxe: XRC SRQs", func(f *badFixture) (any, error) {
			return f.pd.CreateXRCSRQ(&XRCD{ctx: f.c, ref: &cleanupRef{}}, f.cq, SRQAttr{MaxWr: 4, MaxSGE: 1})
		}},
		{"Context.OpenXRCD/on rxe", ErrNotSupported, "open_xrcd", func(f *badFixture) (any, error) { return f.c.OpenXRCD(XRCDInit{}) }},
		{"Context.OpenXRCD/Exclusive without Create", unix.EINVAL, "Exclusive", func(f *badFixture) (any, error) {
			return f.c.OpenXRCD(XRCDInit{Exclusive: true})
		}},
		{"XRCD.Close/nil", nil, "", func(f *badFixture) (any, error) { return errOnly((*XRCD)(nil).Close()) }},
		{"XRCD.CreateQP/nil", unix.EINVAL, "nil XRCD", func(f *badFixture) (any, error) {
			return (*XRCD)(nil).CreateQP(QPInitAttr{Type: QPTypeXRCRecv})
		}},
		{"XRCD.CreateQP/closed", ErrClosed, "XRCD", func(f *badFixture) (any, error) {
			return (&XRCD{ctx: f.c, closed: true, ref: &cleanupRef{}}).CreateQP(QPInitAttr{Type: QPTypeXRCRecv})
		}},
		{"XRCD.CreateQP/type RC", unix.EINVAL, "XRC_RECV QPs only", func(f *badFixture) (any, error) {
			return (&XRCD{ctx: f.c, ref: &cleanupRef{}}).CreateQP(f.qpAttr(QPTypeRC))
		}},
		{"XRCD.CreateQP/with a CQ", unix.EINVAL, "no queues", func(f *badFixture) (any, error) {
			return (&XRCD{ctx: f.c, ref: &cleanupRef{}}).CreateQP(QPInitAttr{Type: QPTypeXRCRecv, SendCQ: f.cq})
		}},
		{"PD.RegisterBuffer/nil PD", unix.EINVAL, "nil PD", func(f *badFixture) (any, error) { return (*PD)(nil).RegisterBuffer(f.buf, 0, 64, AccessLocalWrite) }},
		{"PD.RegisterBuffer/closed PD", ErrClosed, "PD", func(f *badFixture) (any, error) { return f.closedPD.RegisterBuffer(f.buf, 0, 64, AccessLocalWrite) }},
		{"PD.RegisterBuffer/nil buffer", unix.EINVAL, "nil buffer", func(f *badFixture) (any, error) { return f.pd.RegisterBuffer(nil, 0, 64, AccessLocalWrite) }},
		{"PD.RegisterBuffer/closed buffer", ErrClosed, "buffer", func(f *badFixture) (any, error) { return f.pd.RegisterBuffer(f.closedBuf, 0, 64, AccessLocalWrite) }},
		{"PD.RegisterBuffer/negative offset", unix.EINVAL, "buffer range [-1,", func(f *badFixture) (any, error) { return f.pd.RegisterBuffer(f.buf, -1, 64, AccessLocalWrite) }},
		{"PD.RegisterBuffer/length 0", unix.EINVAL, "buffer range [0, 0+0)", func(f *badFixture) (any, error) { return f.pd.RegisterBuffer(f.buf, 0, 0, AccessLocalWrite) }},
		{"PD.RegisterBuffer/negative length", unix.EINVAL, "buffer range [0, 0+-5)", func(f *badFixture) (any, error) { return f.pd.RegisterBuffer(f.buf, 0, -5, AccessLocalWrite) }},
		{"PD.RegisterBuffer/past the end", unix.EINVAL, "outside the 8192-byte buffer", func(f *badFixture) (any, error) {
			return f.pd.RegisterBuffer(f.buf, 4096, 8192, AccessLocalWrite)
		}},
		{"PD.RegisterBuffer/offset past the end", unix.EINVAL, "outside the 8192-byte buffer", func(f *badFixture) (any, error) {
			return f.pd.RegisterBuffer(f.buf, 8193, 1, AccessLocalWrite)
		}},
		{"PD.RegisterBuffer/huge length", unix.EINVAL, "outside the 8192-byte buffer", func(f *badFixture) (any, error) {
			return f.pd.RegisterBuffer(f.buf, 1, math.MaxInt, AccessLocalWrite)
		}},
		{"PD.RegisterBuffer/unknown access bits", unix.EINVAL, "unknown bits", func(f *badFixture) (any, error) { return f.pd.RegisterBuffer(f.buf, 0, 64, 1<<30) }},
		{"PD.RegisterBuffer/remote write without local write", unix.EINVAL, "require LOCAL_WRITE", func(f *badFixture) (any, error) {
			return f.pd.RegisterBuffer(f.buf, 0, 64, AccessRemoteWrite)
		}},
		{"PD.RegisterBuffer/remote atomic without local write", unix.EINVAL, "require LOCAL_WRITE", func(f *badFixture) (any, error) {
			return f.pd.RegisterBuffer(f.buf, 0, 64, AccessRemoteAtomic)
		}},
		{"PD.RegisterBufferIOVA/closed buffer", ErrClosed, "buffer", func(f *badFixture) (any, error) {
			return f.pd.RegisterBufferIOVA(f.closedBuf, 0, 64, 0x1000, AccessLocalWrite, true)
		}},
		{"PD.RegisterPinned/empty", unix.EINVAL, "empty memory", func(f *badFixture) (any, error) { return f.pd.RegisterPinned(nil, AccessLocalWrite) }},
		{"PD.RegisterPinned/nil PD", unix.EINVAL, "nil PD", func(f *badFixture) (any, error) { return (*PD)(nil).RegisterPinned(make([]byte, 64), AccessLocalWrite) }},
		{"PD.RegisterPinned/unmapped memory", unix.EFAULT, "reg_mr", func(f *badFixture) (any, error) { return f.pd.RegisterPinned(f.unmapped, AccessLocalWrite) }},
		{"PD.RegisterPinned/PROT_NONE memory", unix.EFAULT, "reg_mr", func(f *badFixture) (any, error) { return f.pd.RegisterPinned(f.protNone, AccessLocalWrite) }},
		{"PD.RegisterPinned/read-only memory with local write", unix.EFAULT, "reg_mr", func(f *badFixture) (any, error) {
			return f.pd.RegisterPinned(f.rdOnly, AccessLocalWrite)
		}},
		{"PD.RegisterDmabuf/fd -1", unix.EINVAL, "fd -1", func(f *badFixture) (any, error) { return f.pd.RegisterDmabuf(-1, 0, 4096, 0, AccessLocalWrite) }},
		{"PD.RegisterDmabuf/length 0", unix.EINVAL, "length 0", func(f *badFixture) (any, error) { return f.pd.RegisterDmabuf(0, 0, 0, 0, AccessLocalWrite) }},
		{"PD.RegisterDmabuf/closed PD", ErrClosed, "PD", func(f *badFixture) (any, error) { return f.closedPD.RegisterDmabuf(0, 0, 4096, 0, AccessLocalWrite) }},
		{"PD.RegisterDmabuf/not a dma-buf", ErrNotSupported, "reg_dmabuf_mr", func(f *badFixture) (any, error) {
			return f.pd.RegisterDmabuf(int(os.Stdin.Fd()), 0, 4096, 0, AccessLocalWrite)
		}},

		{"MR.ReReg/nil", unix.EINVAL, "nil MR", func(f *badFixture) (any, error) { return errOnly((*MR)(nil).ReReg(ReregAccess, nil, AccessLocalWrite)) }},
		{"MR.ReReg/closed", ErrClosed, "rereg_mr", func(f *badFixture) (any, error) { return errOnly(f.closedMR.ReReg(ReregAccess, nil, AccessLocalWrite)) }},
		{"MR.ReReg/flags 0", unix.EINVAL, "flags 0", func(f *badFixture) (any, error) { return errOnly(f.mr.ReReg(0, nil, AccessLocalWrite)) }},
		{"MR.ReReg/translation", unix.EINVAL, "flags 0x1", func(f *badFixture) (any, error) { return errOnly(f.mr.ReReg(ReregTranslation, nil, AccessLocalWrite)) }},
		{"MR.ReReg/unknown flags", unix.EINVAL, "flags 0x10", func(f *badFixture) (any, error) { return errOnly(f.mr.ReReg(0x10, nil, AccessLocalWrite)) }},
		{"MR.ReReg/nil PD", unix.EINVAL, "nil PD", func(f *badFixture) (any, error) { return errOnly(f.mr.ReReg(ReregPD, nil, 0)) }},
		{"MR.ReReg/closed PD", ErrClosed, "PD", func(f *badFixture) (any, error) { return errOnly(f.mr.ReReg(ReregPD, f.closedPD, 0)) }},
		{"MR.ReReg/PD of another context", unix.EINVAL, "PD belongs to another context", func(f *badFixture) (any, error) {
			return errOnly(f.mr.ReReg(ReregPD, f.otherPD, 0))
		}},
		{"MR.ReReg/unknown access bits", unix.EINVAL, "unknown bits", func(f *badFixture) (any, error) { return errOnly(f.mr.ReReg(ReregAccess, nil, 1<<30)) }},
		{"MR.ReRegBuffer/nil", unix.EINVAL, "nil MR", func(f *badFixture) (any, error) { return errOnly((*MR)(nil).ReRegBuffer(f.buf, 0, 64)) }},
		{"MR.ReRegBuffer/closed", ErrClosed, "rereg_mr", func(f *badFixture) (any, error) { return errOnly(f.closedMR.ReRegBuffer(f.buf, 0, 64)) }},
		{"MR.ReRegBuffer/nil buffer", unix.EINVAL, "nil buffer", func(f *badFixture) (any, error) { return errOnly(f.mr.ReRegBuffer(nil, 0, 64)) }},
		{"MR.ReRegBuffer/outside the buffer", unix.EINVAL, "outside the", func(f *badFixture) (any, error) { return errOnly(f.mr.ReRegBuffer(f.buf, 8000, 4096)) }},
		{"MR.Close/nil", nil, "", func(f *badFixture) (any, error) { return errOnly((*MR)(nil).Close()) }},
		{"MW.Close/nil", nil, "", func(f *badFixture) (any, error) { return errOnly((*MW)(nil).Close()) }},
		{"AH.Close/nil", nil, "", func(f *badFixture) (any, error) { return errOnly((*AH)(nil).Close()) }},
		{"Buffer.Close/nil", nil, "", func(f *badFixture) (any, error) { return errOnly((*Buffer)(nil).Close()) }},

		{"CQ.Resize/nil", unix.EINVAL, "nil CQ", func(f *badFixture) (any, error) { return errOnly((*CQ)(nil).Resize(8)) }},
		{"CQ.Resize/closed", ErrClosed, "CQ", func(f *badFixture) (any, error) { return errOnly(f.closedCQ.Resize(8)) }},
		{"CQ.Resize/cqe 0", unix.EINVAL, "cqe 0", func(f *badFixture) (any, error) { return errOnly(f.cq.Resize(0)) }},
		{"CQ.Resize/cqe -1", unix.EINVAL, "cqe -1", func(f *badFixture) (any, error) { return errOnly(f.cq.Resize(-1)) }},
		{"CQ.Resize/cqe beyond the ABI", unix.EINVAL, "cqe 2147483648", func(f *badFixture) (any, error) { return errOnly(f.cq.Resize(1 << 31)) }},
		{"CQ.Resize/cqe beyond max_cqe", unix.EINVAL, "resize_cq", func(f *badFixture) (any, error) { return errOnly(f.cq.Resize(int(f.attr.MaxCQE) + 1)) }},
		{"CQ.RequestNotify/nil", unix.EINVAL, "nil CQ", func(f *badFixture) (any, error) { return errOnly((*CQ)(nil).RequestNotify(false)) }},
		{"CQ.RequestNotify/closed", ErrClosed, "CQ", func(f *badFixture) (any, error) { return errOnly(f.closedCQ.RequestNotify(false)) }},
		{"CQ.Poll/nil", unix.EINVAL, "nil CQ", func(f *badFixture) (any, error) { return errOf((*CQ)(nil).Poll(make([]WC, 1))) }},
		{"CQ.Poll/closed", ErrClosed, "closed", func(f *badFixture) (any, error) { return errOf(f.closedCQ.Poll(make([]WC, 1))) }},
		{"CQ.Close/nil", nil, "", func(f *badFixture) (any, error) { return errOnly((*CQ)(nil).Close()) }},
		{"CompChannel.Wait/nil", unix.EINVAL, "nil completion channel", func(f *badFixture) (any, error) {
			return (*CompChannel)(nil).Wait(context.Background())
		}},
		{"CompChannel.Wait/closed", ErrClosed, "completion channel", func(f *badFixture) (any, error) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			return f.closedCh.Wait(ctx)
		}},
		{"CompChannel.Close/nil", nil, "", func(f *badFixture) (any, error) { return errOnly((*CompChannel)(nil).Close()) }},
		{"CompChannel.Close/with a CQ attached", ErrBusy, "1 CQ(s) still use it", func(f *badFixture) (any, error) { return errOnly(f.ch.Close()) }},

		{"QP.Modify/nil", unix.EINVAL, "nil QP", func(f *badFixture) (any, error) { return errOnly((*QP)(nil).Modify(&QPAttr{}, QPAttrState)) }},
		{"QP.Modify/closed", ErrClosed, "QP", func(f *badFixture) (any, error) {
			return errOnly(f.closedQP.Modify(&QPAttr{State: QPStateErr}, QPAttrState))
		}},
		{"QP.Modify/nil attributes", unix.EINVAL, "nil attributes", func(f *badFixture) (any, error) { return errOnly(f.rc.Modify(nil, QPAttrState)) }},
		{"QP.Modify/empty mask", unix.EINVAL, "empty attribute mask", func(f *badFixture) (any, error) { return errOnly(f.rc.Modify(&QPAttr{}, 0)) }},
		{"QP.Modify/unknown mask bits", unix.EINVAL, "unknown mask bits", func(f *badFixture) (any, error) { return errOnly(f.rc.Modify(&QPAttr{}, 1<<30)) }},
		{"QP.Modify/state 9", unix.EINVAL, "State 9", func(f *badFixture) (any, error) { return errOnly(f.rc.Modify(&QPAttr{State: 9}, QPAttrState)) }},
		{"QP.Modify/RESET to RTR", unix.EINVAL, "from RESET to RTR", func(f *badFixture) (any, error) {
			return errOnly(f.rc.Modify(&QPAttr{State: QPStateRTR}, QPAttrState))
		}},
		{"QP.Modify/RESET to RTS", unix.EINVAL, "from RESET to RTS", func(f *badFixture) (any, error) {
			return errOnly(f.rc.Modify(&QPAttr{State: QPStateRTS}, QPAttrState))
		}},
		{"QP.Modify/RESET to SQD", unix.EINVAL, "from RESET to SQD", func(f *badFixture) (any, error) {
			return errOnly(f.rc.Modify(&QPAttr{State: QPStateSQD}, QPAttrState))
		}},
		{"QP.Modify/INIT without its attributes", unix.EINVAL, "needs", func(f *badFixture) (any, error) {
			return errOnly(f.rc.Modify(&QPAttr{State: QPStateInit}, QPAttrState))
		}},
		{"QP.Modify/RTR without its attributes", unix.EINVAL, "needs", func(f *badFixture) (any, error) {
			return errOnly(f.rc.Modify(&QPAttr{State: QPStateRTR, CurState: QPStateInit}, QPAttrState|QPAttrCurState))
		}},
		{"QP.Modify/PathMTU 0", unix.EINVAL, "PathMTU 0", func(f *badFixture) (any, error) { return errOnly(f.rc.Modify(&QPAttr{}, QPAttrPathMTU)) }},
		{"QP.Modify/PathMTU 6", unix.EINVAL, "PathMTU 6", func(f *badFixture) (any, error) { return errOnly(f.rc.Modify(&QPAttr{PathMTU: 6}, QPAttrPathMTU)) }},
		{"QP.Modify/port 0", unix.EINVAL, "Port 0", func(f *badFixture) (any, error) {
			return errOnly(f.rc.Modify(&QPAttr{State: QPStateInit}, QPAttrState|QPAttrPkeyIndex|QPAttrPort|QPAttrAccessFlags))
		}},
		{"QP.Modify/port 2", unix.EINVAL, "modify_qp", func(f *badFixture) (any, error) {
			return errOnly(f.rc.Modify(&QPAttr{State: QPStateInit, Port: 2}, QPAttrState|QPAttrPkeyIndex|QPAttrPort|QPAttrAccessFlags))
		}},
		{"QP.Modify/SGID index past the table", unix.ENODATA, "modify_qp", func(f *badFixture) (any, error) {
			// The AV of an RTS QP, changed alone: the kernel resolves it.
			a := QPAttr{AH: AHAttr{IsGlobal: true, PortNum: 1, GRH: GlobalRoute{DGID: f.gid.GID, SGIDIndex: 255, HopLimit: 1}}}
			return errOnly(f.rcRTS.Modify(&a, QPAttrAV))
		}},
		{"QP.Query/nil", unix.EINVAL, "nil QP", func(f *badFixture) (any, error) { return errOf((*QP)(nil).Query()) }},
		{"QP.Query/closed", ErrClosed, "QP", func(f *badFixture) (any, error) { return errOf(f.closedQP.Query()) }},
		{"QP.Connect/nil", unix.EINVAL, "nil QP", func(f *badFixture) (any, error) { return errOnly((*QP)(nil).Connect(f.connectAttr())) }},
		{"QP.Connect/closed", ErrClosed, "QP", func(f *badFixture) (any, error) { return errOnly(f.closedQP.Connect(f.connectAttr())) }},
		{"QP.Connect/SGIDIndex -2", unix.EINVAL, "SGIDIndex -2", func(f *badFixture) (any, error) {
			a := f.connectAttr()
			a.SGIDIndex = -2
			return errOnly(f.rc.Connect(a))
		}},
		{"QP.Connect/SGIDIndex 256", unix.EINVAL, "SGIDIndex 256", func(f *badFixture) (any, error) {
			a := f.connectAttr()
			a.SGIDIndex = 256
			return errOnly(f.rc.Connect(a))
		}},
		{"QP.Connect/port 2", unix.EINVAL, "to INIT", func(f *badFixture) (any, error) {
			a := f.connectAttr()
			a.Port = 2
			return errOnly(f.rc.Connect(a))
		}},
		{"QP.AttachMulticast/nil", unix.EINVAL, "nil QP", func(f *badFixture) (any, error) { return errOnly((*QP)(nil).AttachMulticast(gidOf("ff0e::1"), 0)) }},
		{"QP.AttachMulticast/closed", ErrClosed, "QP", func(f *badFixture) (any, error) { return errOnly(f.closedQP.AttachMulticast(gidOf("ff0e::1"), 0)) }},
		{"QP.AttachMulticast/RC QP", unix.EINVAL, "only UD QPs", func(f *badFixture) (any, error) { return errOnly(f.rc.AttachMulticast(gidOf("ff0e::1"), 0)) }},
		{"QP.DetachMulticast/UC QP", unix.EINVAL, "only UD QPs", func(f *badFixture) (any, error) { return errOnly(f.uc.DetachMulticast(gidOf("ff0e::1"), 0)) }},
		{"QP.Close/nil", nil, "", func(f *badFixture) (any, error) { return errOnly((*QP)(nil).Close()) }},

		{"QP.PostSend/nil", unix.EINVAL, "nil QP", func(f *badFixture) (any, error) { return errOnly((*QP)(nil).PostSend([]SendWR{{Opcode: WRSend}})) }},
		{"QP.PostSend/closed", ErrClosed, "closed", func(f *badFixture) (any, error) { return errOnly(f.closedQP.PostSend([]SendWR{udWR(f, WRSend)})) }},
		{"QP.PostSend/RESET", ErrQPState, "RESET", func(f *badFixture) (any, error) {
			return errOnly(f.rc.PostSend([]SendWR{{Opcode: WRSend, SGL: f.sgl}}))
		}},
		{"QP.PostSend/too many SGEs", ErrTooManySGE, "work request 0", func(f *badFixture) (any, error) {
			return errOnly(f.rcRTS.PostSend([]SendWR{{Opcode: WRSend, SGL: slices.Repeat(f.sgl, int(f.rcRTS.Cap().MaxSendSGE)+1)}}))
		}},
		{"QP.PostSend/inline too large", ErrInlineTooLarge, "work request 0", func(f *badFixture) (any, error) {
			sge := SGE{Addr: f.sgl[0].Addr, Length: f.rcRTS.Cap().MaxInlineData + 1, Lkey: f.sgl[0].Lkey}
			return errOnly(f.rcRTS.PostSend([]SendWR{{Opcode: WRSend, Flags: SendInline, SGL: []SGE{sge}}}))
		}},
		{"QP.PostSend/queue full", ErrQueueFull, "work request", func(f *badFixture) (any, error) {
			wrs := make([]SendWR, 4096)
			for i := range wrs {
				wrs[i] = SendWR{ID: uint64(i), Opcode: WRSend, SGL: f.sgl}
			}
			return errOnly(f.rcRTS.PostSend(wrs))
		}},
		{"QP.PostSend/second of two refused", ErrBadWR, "work request 1", func(f *badFixture) (any, error) {
			return errOnly(f.ud.PostSend([]SendWR{udWR(f, WRSend), udWR(f, WRRDMAWrite)}))
		}},
		{"QP.PostSend/unknown opcode", ErrBadWR, "work request 0", func(f *badFixture) (any, error) {
			return errOnly(f.rcRTS.PostSend([]SendWR{{Opcode: 200, SGL: f.sgl}}))
		}},
		{"QP.PostSend/UD without AH", ErrBadWR, "work request 0", func(f *badFixture) (any, error) {
			wr := udWR(f, WRSend)
			wr.AH = nil
			return errOnly(f.ud.PostSend([]SendWR{wr}))
		}},
		{"QP.PostSend/UD with a nil *AH", ErrBadWR, "work request 0", func(f *badFixture) (any, error) {
			wr := udWR(f, WRSend)
			wr.AH = (*AH)(nil)
			return errOnly(f.ud.PostSend([]SendWR{wr}))
		}},
		{"QP.PostSend/UD with a closed AH", ErrClosed, "work request 0", func(f *badFixture) (any, error) {
			wr := udWR(f, WRSend)
			wr.AH = f.closedAH
			return errOnly(f.ud.PostSend([]SendWR{wr}))
		}},
		{"QP.PostSend/UD with another context's AH", ErrBadWR, "work request 0", func(f *badFixture) (any, error) {
			wr := udWR(f, WRSend)
			wr.AH = f.otherAH
			return errOnly(f.ud.PostSend([]SendWR{wr}))
		}},
		{"QP.PostSend/UD with another PD's AH", ErrBadWR, "work request 0", func(f *badFixture) (any, error) {
			wr := udWR(f, WRSend)
			wr.AH = f.pd2AH
			return errOnly(f.ud.PostSend([]SendWR{wr}))
		}},
		{"QP.PostSend/RDMA write on UD", ErrBadWR, "work request 0", func(f *badFixture) (any, error) { return errOnly(f.ud.PostSend([]SendWR{udWR(f, WRRDMAWrite)})) }},
		{"QP.PostSend/atomic on UD", ErrBadWR, "work request 0", func(f *badFixture) (any, error) {
			return errOnly(f.ud.PostSend([]SendWR{udWR(f, WRAtomicFetchAndAdd)}))
		}},
		{"QP.PostSend/RDMA read on UC", ErrBadWR, "work request 0", func(f *badFixture) (any, error) {
			return errOnly(f.uc.PostSend([]SendWR{{Opcode: WRRDMARead, SGL: f.sgl, RemoteAddr: f.mr.Addr(), Rkey: f.mr.Rkey()}}))
		}},
		{"QP.PostSend/atomic on UC", ErrBadWR, "work request 0", func(f *badFixture) (any, error) {
			return errOnly(f.uc.PostSend([]SendWR{{Opcode: WRAtomicCmpAndSwp, SGL: f.sgl, RemoteAddr: f.mr.Addr(), Rkey: f.mr.Rkey()}}))
		}},
		{"QP.PostSend/atomic at an unaligned address", ErrBadWR, "work request 0", func(f *badFixture) (any, error) {
			return errOnly(f.rcRTS.PostSend([]SendWR{{Opcode: WRAtomicFetchAndAdd, SGL: f.sgl, RemoteAddr: f.mr.Addr() + 4, Rkey: f.mr.Rkey()}}))
		}},
		{"QP.PostSend/atomic shorter than 8 bytes", ErrBadWR, "work request 0", func(f *badFixture) (any, error) {
			sge := f.sgl[0]
			sge.Length = 4
			return errOnly(f.rcRTS.PostSend([]SendWR{{Opcode: WRAtomicFetchAndAdd, SGL: []SGE{sge}, RemoteAddr: f.mr.Addr(), Rkey: f.mr.Rkey()}}))
		}},
		{"QP.PostSend/inline RDMA read", ErrBadWR, "work request 0", func(f *badFixture) (any, error) {
			return errOnly(f.rcRTS.PostSend([]SendWR{{Opcode: WRRDMARead, Flags: SendInline, SGL: f.sgl, RemoteAddr: f.mr.Addr(), Rkey: f.mr.Rkey()}}))
		}},
		{"QP.PostSend/more than 2 GiB", ErrBadWR, "work request 0", func(f *badFixture) (any, error) {
			big := SGE{Addr: f.sgl[0].Addr, Length: 1<<31 + 1, Lkey: f.sgl[0].Lkey}
			return errOnly(f.rcRTS.PostSend([]SendWR{{Opcode: WRSend, SGL: []SGE{big}}}))
		}},
		{"QP.PostRecv/nil", unix.EINVAL, "nil QP", func(f *badFixture) (any, error) { return errOnly((*QP)(nil).PostRecv([]RecvWR{{SGL: f.sgl}})) }},
		{"QP.PostRecv/closed", ErrClosed, "closed", func(f *badFixture) (any, error) { return errOnly(f.closedQP.PostRecv([]RecvWR{{SGL: f.sgl}})) }},
		{"QP.PostRecv/RESET", ErrQPState, "RESET", func(f *badFixture) (any, error) { return errOnly(f.rc.PostRecv([]RecvWR{{SGL: f.sgl}})) }},
		{"QP.PostRecv/too many SGEs", ErrTooManySGE, "work request 0", func(f *badFixture) (any, error) {
			return errOnly(f.rcRTS.PostRecv([]RecvWR{{SGL: slices.Repeat(f.sgl, int(f.rcRTS.Cap().MaxRecvSGE)+1)}}))
		}},
		{"QP.PostRecv/queue full", ErrQueueFull, "work request", func(f *badFixture) (any, error) {
			wrs := make([]RecvWR, 4096)
			for i := range wrs {
				wrs[i] = RecvWR{ID: uint64(i), SGL: f.sgl}
			}
			return errOnly(f.rcRTS.PostRecv(wrs))
		}},
		{"QP.PostRecv/with an SRQ", ErrNotSupported, "SRQ", func(f *badFixture) (any, error) { return errOnly(f.srqQP.PostRecv([]RecvWR{{SGL: f.sgl}})) }},

		{"SRQ.Modify/nil", unix.EINVAL, "nil SRQ", func(f *badFixture) (any, error) {
			return errOnly((*SRQ)(nil).Modify(SRQAttr{SRQLimit: 1}, SRQAttrLimit))
		}},
		{"SRQ.Modify/closed", ErrClosed, "SRQ", func(f *badFixture) (any, error) {
			return errOnly(f.closedSRQ.Modify(SRQAttr{SRQLimit: 1}, SRQAttrLimit))
		}},
		{"SRQ.Modify/mask 0", unix.EINVAL, "mask 0", func(f *badFixture) (any, error) { return errOnly(f.srq.Modify(SRQAttr{SRQLimit: 1}, 0)) }},
		{"SRQ.Modify/unknown mask bits", unix.EINVAL, "mask 0x8", func(f *badFixture) (any, error) { return errOnly(f.srq.Modify(SRQAttr{}, 8)) }},
		{"SRQ.Modify/MaxWr beyond max_srq_wr", unix.EINVAL, "modify_srq", func(f *badFixture) (any, error) {
			return errOnly(f.srq.Modify(SRQAttr{MaxWr: f.attr.MaxSRQWr + 1}, SRQAttrMaxWr))
		}},
		{"SRQ.Modify/limit above MaxWr", unix.EINVAL, "is above MaxWr", func(f *badFixture) (any, error) {
			return errOnly(f.srq.Modify(SRQAttr{SRQLimit: f.srq.MaxWr() + 1}, SRQAttrLimit))
		}},
		{"SRQ.Query/nil", unix.EINVAL, "nil SRQ", func(f *badFixture) (any, error) { return errOf((*SRQ)(nil).Query()) }},
		{"SRQ.Query/closed", ErrClosed, "SRQ", func(f *badFixture) (any, error) { return errOf(f.closedSRQ.Query()) }},
		{"SRQ.PostRecv/nil", unix.EINVAL, "nil SRQ", func(f *badFixture) (any, error) { return errOnly((*SRQ)(nil).PostRecv([]RecvWR{{SGL: f.sgl}})) }},
		{"SRQ.PostRecv/closed", ErrClosed, "closed", func(f *badFixture) (any, error) { return errOnly(f.closedSRQ.PostRecv([]RecvWR{{SGL: f.sgl}})) }},
		{"SRQ.PostRecv/too many SGEs", ErrTooManySGE, "work request 0", func(f *badFixture) (any, error) {
			return errOnly(f.srq.PostRecv([]RecvWR{{SGL: slices.Repeat(f.sgl, int(f.srq.MaxSGE())+1)}}))
		}},
		{"SRQ.PostRecv/queue full", ErrQueueFull, "work request", func(f *badFixture) (any, error) {
			wrs := make([]RecvWR, 4096)
			for i := range wrs {
				wrs[i] = RecvWR{ID: uint64(i), SGL: f.sgl}
			}
			return errOnly(f.srq.PostRecv(wrs))
		}},
		{"SRQ.Close/nil", nil, "", func(f *badFixture) (any, error) { return errOnly((*SRQ)(nil).Close()) }},
	}
}

// errOf drops a value of a call that returns one with its error.
func errOf[T any](_ T, err error) (any, error) { return nil, err }

func (f *badFixture) qpAttr(t QPType) QPInitAttr {
	return QPInitAttr{Type: t, SendCQ: f.cq, RecvCQ: f.cq, Cap: QPCap{MaxSendWr: 4, MaxRecvWr: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}
}

func (f *badFixture) connectAttr() ConnectAttr {
	return ConnectAttr{SGIDIndex: f.gid.Index, Access: AccessLocalWrite | AccessRemoteWrite,
		Remote: Endpoint{QPN: f.rc.QPN(), GID: f.gid.GID}}
}

// newBadFixture creates the objects, with t.Cleanup closing them.
func newBadFixture(t *testing.T) *badFixture {
	t.Helper()
	name := vmenv.RequireRXE(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	open := func() *Context {
		c, err := Open(name)
		must(err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	f := &badFixture{name: name, c: open(), other: open(), closed: open()}
	must(f.closed.Close())
	var err error
	f.attr, err = f.c.QueryDevice()
	must(err)
	f.gid, err = f.c.RecommendedGID(1)
	must(err)
	later := func(c interface{ Close() error }) { t.Cleanup(func() { c.Close() }) }

	f.pd, err = f.c.AllocPD()
	must(err)
	later(f.pd)
	f.otherPD, err = f.other.AllocPD()
	must(err)
	later(f.otherPD)
	f.closedPD, err = f.c.AllocPD()
	must(err)
	must(f.closedPD.Close())

	f.ch, err = f.c.NewCompChannel()
	must(err)
	later(f.ch)
	f.otherCh, err = f.other.NewCompChannel()
	must(err)
	later(f.otherCh)
	f.closedCh, err = f.c.NewCompChannel()
	must(err)
	must(f.closedCh.Close())

	f.cq, err = f.c.CreateCQ(64, nil)
	must(err)
	later(f.cq)
	f.chCQ, err = f.c.CreateCQ(4, &CQOptions{Channel: f.ch})
	must(err)
	later(f.chCQ)
	f.otherCQ, err = f.other.CreateCQ(4, nil)
	must(err)
	later(f.otherCQ)
	f.closedCQ, err = f.c.CreateCQ(4, nil)
	must(err)
	must(f.closedCQ.Close())

	f.buf, err = AllocBuffer(8192)
	must(err)
	later(f.buf)
	f.closedBuf, err = AllocBuffer(4096)
	must(err)
	must(f.closedBuf.Close())
	f.mr, err = f.pd.RegisterBuffer(f.buf, 0, 8192, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic)
	must(err)
	later(f.mr)
	f.closedMR, err = f.pd.RegisterBuffer(f.buf, 0, 4096, AccessLocalWrite)
	must(err)
	must(f.closedMR.Close())
	f.sgl = []SGE{{Addr: f.mr.Addr(), Length: 64, Lkey: f.mr.Lkey()}}

	f.srq, err = f.pd.CreateSRQ(SRQAttr{MaxWr: 8, MaxSGE: 1})
	must(err)
	later(f.srq)
	f.otherSRQ, err = f.otherPD.CreateSRQ(SRQAttr{MaxWr: 4, MaxSGE: 1})
	must(err)
	later(f.otherSRQ)
	f.closedSRQ, err = f.pd.CreateSRQ(SRQAttr{MaxWr: 4, MaxSGE: 1})
	must(err)
	must(f.closedSRQ.Close())

	newQP := func(typ QPType, srq *SRQ) *QP {
		a := QPInitAttr{Type: typ, SendCQ: f.cq, RecvCQ: f.cq,
			Cap: QPCap{MaxSendWr: 4, MaxRecvWr: 4, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 32}}
		if srq != nil {
			a.SRQ, a.Cap.MaxRecvWr, a.Cap.MaxRecvSGE = srq, 0, 0
		}
		qp, err := f.pd.CreateQP(a)
		must(err)
		later(qp)
		return qp
	}
	loop := func(qp *QP) {
		must(qp.Connect(ConnectAttr{SGIDIndex: f.gid.Index, Qkey: 0x11111111,
			Access: AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic,
			Remote: Endpoint{QPN: qp.QPN(), GID: f.gid.GID}}))
	}
	f.rc = newQP(QPTypeRC, nil)
	f.ud, f.uc, f.rcRTS, f.srqQP = newQP(QPTypeUD, nil), newQP(QPTypeUC, nil), newQP(QPTypeRC, nil), newQP(QPTypeRC, f.srq)
	for _, qp := range []*QP{f.ud, f.uc, f.rcRTS, f.srqQP} {
		loop(qp)
	}
	f.closedQP = newQP(QPTypeUD, nil)
	loop(f.closedQP)
	must(f.closedQP.Close())

	ahAttr := AHAttr{PortNum: 1, IsGlobal: true, GRH: GlobalRoute{DGID: f.gid.GID, SGIDIndex: f.gid.Index, HopLimit: 1}}
	f.ah, err = f.pd.CreateAH(ahAttr)
	must(err)
	later(f.ah)
	f.otherAH, err = f.otherPD.CreateAH(ahAttr)
	must(err)
	later(f.otherAH)
	f.pd2, err = f.c.AllocPD()
	must(err)
	later(f.pd2)
	f.pd2AH, err = f.pd2.CreateAH(ahAttr)
	must(err)
	later(f.pd2AH)
	f.closedAH, err = f.pd.CreateAH(ahAttr)
	must(err)
	must(f.closedAH.Close())

	// Memory no MR may cover: a hole, a PROT_NONE page, a read-only page.
	// The hole is below vm.mmap_min_addr (64 KiB on Debian), where nothing
	// is ever mapped: a page unmapped here would be the next small mmap's
	// (this fixture's PROT_NONE page, or any thread's).
	mapped := func(prot int) []byte {
		m, err := unix.Mmap(-1, 0, 4096, prot, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		must(err)
		return m
	}
	f.unmapped = unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(nil), 0x8000)), 4096)
	f.protNone = mapped(unix.PROT_NONE)
	f.rdOnly = mapped(unix.PROT_READ)
	t.Cleanup(func() {
		unix.Munmap(f.protNone)
		unix.Munmap(f.rdOnly)
	})
	return f
}

// stillWorks checks that the fixture's objects survived the table.
func (f *badFixture) stillWorks() error {
	var errs []error
	if a, err := f.rc.Query(); err != nil || a.State != QPStateReset || f.rc.State() != QPStateReset {
		errs = append(errs, fmt.Errorf("RESET QP: %v, state %v (cached %v)", err, a.State, f.rc.State()))
	}
	for _, qp := range []*QP{f.ud, f.uc, f.rcRTS} {
		if a, err := qp.Query(); err != nil || a.State != QPStateRTS {
			errs = append(errs, fmt.Errorf("%v QP %d: %v, state %v", qp.Type(), qp.QPN(), err, a.State))
		}
	}
	if _, err := f.srq.Query(); err != nil {
		errs = append(errs, fmt.Errorf("SRQ: %w", err))
	}
	if err := f.cq.RequestNotify(false); err != nil {
		errs = append(errs, fmt.Errorf("CQ: %w", err))
	}
	if n, err := f.cq.Poll(make([]WC, 16)); n != 0 || err != nil {
		errs = append(errs, fmt.Errorf("CQ holds %d completions (%v): a refused post reached the queue", n, err))
	}
	if _, err := f.c.QueryPort(1); err != nil {
		errs = append(errs, fmt.Errorf("context: %w", err))
	}
	if f.mr.Access() != AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic || f.mr.PD() != f.pd {
		errs = append(errs, fmt.Errorf("MR changed: access %v", f.mr.Access()))
	}
	return errors.Join(errs...)
}

func TestBadInput(t *testing.T) {
	requireVM(t)
	f := newBadFixture(t)
	objects := settledResources(t)
	held := leakcheck.Take()
	for _, row := range badRows() {
		t.Run(row.name, func(t *testing.T) {
			got, err := runRow(f, row)
			if c, ok := got.(interface{ Close() error }); ok && err == nil && row.want != nil {
				c.Close()
			}
			switch {
			case row.want == nil:
				if err != nil {
					t.Errorf("err = %v, want nil", err)
				}
			case err == nil:
				t.Errorf("accepted; want an error matching %v", row.want)
			case !errors.Is(err, row.want):
				t.Errorf("err = %v, does not match %v", err, row.want)
			case !strings.Contains(err.Error(), row.names):
				t.Errorf("err = %q, does not say %q", err, row.names)
			default:
				t.Logf("%v", err)
			}
		})
	}
	if err := f.stillWorks(); err != nil {
		t.Errorf("after the table: %v", err)
	}
	if after := resources(t); !noMore(after, objects) {
		t.Errorf("the table left kernel objects: before %v, after %v", objects, after)
	}
	if after := settledResources(t); !noMore(objects, after) {
		t.Errorf("the table destroyed kernel objects: before %v, after %v", objects, after)
	}
	if msg := leakcheck.Settle(held); msg != "" {
		t.Errorf("the table leaked: %s", msg)
	}
}

// runRow runs one row, turning a panic into an error the row fails on.
func runRow(f *badFixture, row badRow) (got any, err error) {
	defer func() {
		if p := recover(); p != nil {
			got, err = nil, fmt.Errorf("panic: %v", p)
		}
	}()
	return row.do(f)
}

// TestBadInputRowsListed keeps the file's list of rows equal to the table.
func TestBadInputRowsListed(t *testing.T) {
	src, err := os.ReadFile("badinput_vm_test.go")
	if err != nil && vmenv.InVM() {
		t.Skip("the source is not in the VM; the host run checks the list")
	}
	if err != nil {
		t.Fatal(err)
	}
	_, list, ok := strings.Cut(string(src), "// Rows:\n//\n")
	if !ok {
		t.Fatal("no \"// Rows:\" list in badinput_vm_test.go")
	}
	list, _, _ = strings.Cut(list, "\n//\n")
	var listed []string
	for _, m := range regexp.MustCompile(`(?m)^//\t(.+)$`).FindAllStringSubmatch(list, -1) {
		listed = append(listed, m[1])
	}
	var rows []string
	seen := map[string]bool{}
	for _, r := range badRows() {
		if seen[r.name] {
			t.Errorf("row %q twice", r.name)
		}
		seen[r.name] = true
		rows = append(rows, r.name)
	}
	if !slices.Equal(listed, rows) {
		for _, r := range rows {
			if !slices.Contains(listed, r) {
				t.Errorf("row %q is not in the list", r)
			}
		}
		for _, l := range listed {
			if !seen[l] {
				t.Errorf("listed %q is not a row", l)
			}
		}
		if !t.Failed() {
			t.Error("the list is not in the table's order")
		}
	}
	t.Logf("%d rows", len(rows))
}
