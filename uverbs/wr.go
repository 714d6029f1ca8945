package uverbs

import (
	"errors"
	"strconv"
	"strings"
	"unsafe"

	"github.com/goverbs/goverbs/internal/provider"
)

// The data path types. The providers (provider/rxe, provider/mlx5) read and
// write an internal copy of each, declared field for field the same way, and
// PostSend, PostRecv and Poll hand the caller's slices to them as they are,
// without copying or allocating; TestDataPathLayout compares the two
// declarations (names, types, offsets, sizes) so that they cannot drift.

// SGE is one scatter/gather element: Length bytes of registered memory at
// Addr, named by the lkey of the MR that registers them. MR.SGE makes one
// with its bounds checked.
type SGE struct {
	Addr   uint64 // address of the first byte (MR.Addr or MR.IOVA based)
	Length uint32 // bytes
	Lkey   uint32 // MR.Lkey of the MR that registers the bytes
}

// WROpcode is a send work request's operation (enum ibv_wr_opcode).
type WROpcode uint32

// Send opcodes.
const (
	WRRDMAWrite         WROpcode = 0 // write SGL to RemoteAddr/Rkey
	WRRDMAWriteWithImm  WROpcode = 1 // write, and complete a receive on the peer with Imm
	WRSend              WROpcode = 2 // send SGL into the peer's next receive
	WRSendWithImm       WROpcode = 3 // send with immediate data Imm
	WRRDMARead          WROpcode = 4 // read RemoteAddr/Rkey into SGL
	WRAtomicCmpAndSwp   WROpcode = 5 // 64-bit compare (CompareAdd) and swap (Swap)
	WRAtomicFetchAndAdd WROpcode = 6 // 64-bit fetch and add CompareAdd
	WRLocalInv          WROpcode = 7 // invalidate InvalidateRkey locally
	WRBindMW            WROpcode = 8 // bind a type 2 memory window (Bind)
	WRSendWithInv       WROpcode = 9 // send, and invalidate InvalidateRkey on the peer
)

var wrOpcodeNames = [...]string{"rdma-write", "rdma-write-with-imm", "send", "send-with-imm", "rdma-read",
	"atomic-cmp-and-swp", "atomic-fetch-and-add", "local-inv", "bind-mw", "send-with-inv"}

// String returns the name rdma-core's ibv_wr_opcode_str gives, e.g.
// "rdma-write".
func (o WROpcode) String() string {
	if int(o) < len(wrOpcodeNames) {
		return wrOpcodeNames[o]
	}
	return "WROpcode(" + strconv.FormatUint(uint64(o), 10) + ")"
}

// SendFlags modify a send work request (enum ibv_send_flags).
type SendFlags uint32

// Send flags.
const (
	// SendFence waits for the QP's earlier RDMA reads and atomics to
	// complete before the request starts.
	SendFence SendFlags = 1 << 0
	// SendSignaled asks for a completion (QPs created without SQSigAll
	// complete only signaled requests; an unsignaled one completes with
	// the next signaled one).
	SendSignaled SendFlags = 1 << 1
	// SendSolicited raises a solicited event at the receiver.
	SendSolicited SendFlags = 1 << 2
	// SendInline copies the SGL's bytes into the queue at post time: the
	// memory needs no lkey and may be reused as soon as PostSend returns.
	SendInline SendFlags = 1 << 3
	// SendIPCsum asks the device to fill in the IP and TCP/UDP checksums
	// of a raw packet.
	SendIPCsum SendFlags = 1 << 4
)

// String returns the set flags as "SIGNALED|INLINE" (IBV_SEND_ names), or
// "0".
func (f SendFlags) String() string {
	return flagString(uint32(f), []string{"FENCE", "SIGNALED", "SOLICITED", "INLINE", "IP_CSUM"})
}

// BindMW is the memory-window binding of a WRBindMW work request: after
// it, the window with rkey MWRkey answers to NewRkey and grants Access to
// [Addr, Addr+Length) of the MR with lkey MRLkey.
type BindMW struct {
	MWRkey  uint32 // the window's current rkey (MW.Rkey)
	NewRkey uint32 // the rkey after the bind
	MRLkey  uint32 // the MR the window exposes (MR.Lkey)
	Addr    uint64 // first byte of the window
	Length  uint64 // bytes
	Access  Access // the rights the window grants
}

// SendWR is a send work request for QP.PostSend. Only the fields its
// opcode and the QP's type use are read.
type SendWR struct {
	// ID comes back in the request's completion (WC.ID).
	ID     uint64
	Opcode WROpcode
	Flags  SendFlags
	// SGL is the local memory: gathered for sends and writes, scattered
	// into for reads and atomics (8 bytes for the original value).
	SGL []SGE
	// Imm is the immediate data of the *_WITH_IMM opcodes, in host order
	// (it travels big endian and arrives in the peer's WC.Imm).
	Imm uint32
	// InvalidateRkey is the rkey WRSendWithInv and WRLocalInv invalidate.
	InvalidateRkey uint32
	// RemoteAddr and Rkey name the peer's memory for RDMA and atomics
	// (RemoteBuffer.Addr and .Rkey; see RemoteBuffer.Slice).
	RemoteAddr uint64
	Rkey       uint32
	// CompareAdd is the compare value of WRAtomicCmpAndSwp or the addend
	// of WRAtomicFetchAndAdd; Swap is the compare-and-swap's new value.
	CompareAdd uint64
	Swap       uint64
	// AH, RemoteQPN and RemoteQkey are the destination of a UD send. The
	// request keeps the AH reachable while it is queued.
	AH         *AH
	RemoteQPN  uint32
	RemoteQkey uint32
	// XRCRemoteSRQN is the SRQ an XRC_SEND request is delivered to, on
	// the XRC target's side.
	XRCRemoteSRQN uint32
	// Bind is the binding of WRBindMW.
	Bind BindMW
}

// RecvWR is a receive work request for QP.PostRecv and SRQ.PostRecv: the
// memory the next incoming SEND (or the immediate of RDMA_WRITE_WITH_IMM)
// completes into. A UD receive gets the 40-byte GRH first.
type RecvWR struct {
	ID  uint64 // comes back in the completion (WC.ID)
	SGL []SGE  // scattered into in order
}

// WCStatus is a work completion's status (enum ibv_wc_status). It is also
// an error, so that errors.Is(wc.Err(), WCRemAccessErr) works.
type WCStatus uint32

// Completion statuses.
const (
	WCSuccess          WCStatus = 0
	WCLocLenErr        WCStatus = 1  // local length error: a receive too small, a message too long
	WCLocQPOpErr       WCStatus = 2  // local QP operation error
	WCLocEECOpErr      WCStatus = 3  // local EE context operation error (RD)
	WCLocProtErr       WCStatus = 4  // local protection error: a bad lkey or an SGE outside its MR
	WCWRFlushErr       WCStatus = 5  // flushed: the QP went to the error state
	WCMWBindErr        WCStatus = 6  // memory window bind error
	WCBadRespErr       WCStatus = 7  // bad response from the peer
	WCLocAccessErr     WCStatus = 8  // local access error
	WCRemInvReqErr     WCStatus = 9  // the peer found the request invalid
	WCRemAccessErr     WCStatus = 10 // the peer's rkey, bounds or rights refused the access
	WCRemOpErr         WCStatus = 11 // the peer could not complete the operation
	WCRetryExcErr      WCStatus = 12 // transport retries exhausted: the peer did not answer
	WCRNRRetryExcErr   WCStatus = 13 // receiver-not-ready retries exhausted: no receive posted
	WCLocRDDViolErr    WCStatus = 14 // local RDD violation (RD)
	WCRemInvRDReqErr   WCStatus = 15 // remote invalid RD request
	WCRemAbortErr      WCStatus = 16 // the peer aborted the operation
	WCInvEECNErr       WCStatus = 17 // invalid EE context number (RD)
	WCInvEECStateErr   WCStatus = 18 // invalid EE context state (RD)
	WCFatalErr         WCStatus = 19 // fatal error
	WCRespTimeoutErr   WCStatus = 20 // response timeout
	WCGeneralErr       WCStatus = 21 // general error
	WCTMErr            WCStatus = 22 // tag matching error
	WCTMRndvIncomplete WCStatus = 23 // tag matching rendezvous incomplete
)

var wcStatusNames = [...]string{"success", "local length error", "local QP operation error",
	"local EE context operation error", "local protection error", "Work Request Flushed Error",
	"memory management operation error", "bad response error", "local access error",
	"remote invalid request error", "remote access error", "remote operation error",
	"transport retry counter exceeded", "RNR retry counter exceeded", "local RDD violation error",
	"remote invalid RD request", "aborted error", "invalid EE context number",
	"invalid EE context state", "fatal error", "response timeout error", "general error",
	"TM error", "TM software rendezvous"}

// String returns the text rdma-core's ibv_wc_status_str gives.
func (s WCStatus) String() string {
	if int(s) < len(wcStatusNames) {
		return wcStatusNames[s]
	}
	return "unknown"
}

// Error makes a status an error value for errors.Is; see WC.Err.
func (s WCStatus) Error() string { return "uverbs: work completion: " + s.String() }

// WCOpcode is what a completion completed (enum ibv_wc_opcode).
type WCOpcode uint32

// Completion opcodes. Receives have bit 7 set (WCRecv and above).
const (
	WCSend            WCOpcode = 0
	WCRDMAWrite       WCOpcode = 1
	WCRDMARead        WCOpcode = 2
	WCCompSwap        WCOpcode = 3
	WCFetchAdd        WCOpcode = 4
	WCBindMW          WCOpcode = 5
	WCLocalInv        WCOpcode = 6
	WCTSO             WCOpcode = 7
	WCRecv            WCOpcode = 128 // a SEND (with or without immediate) arrived
	WCRecvRDMAWithImm WCOpcode = 129 // an RDMA_WRITE_WITH_IMM arrived
)

// String returns the IBV_WC_ name in the style of ibv_wr_opcode_str
// (rdma-core has no function for these), e.g. "rdma-write" or
// "recv-rdma-with-imm".
func (o WCOpcode) String() string {
	names := [...]string{"send", "rdma-write", "rdma-read", "comp-swap", "fetch-add", "bind-mw", "local-inv", "tso"}
	switch {
	case int(o) < len(names):
		return names[o]
	case o == WCRecv:
		return "recv"
	case o == WCRecvRDMAWithImm:
		return "recv-rdma-with-imm"
	}
	return "WCOpcode(" + strconv.FormatUint(uint64(o), 10) + ")"
}

// WCFlags describe a completion (enum ibv_wc_flags).
type WCFlags uint32

// Completion flags.
const (
	WCWithGRH        WCFlags = 1 << 0 // a UD receive: the buffer starts with the 40-byte GRH
	WCWithImm        WCFlags = 1 << 1 // WC.Imm holds immediate data
	WCIPCSumOK       WCFlags = 1 << 2 // the device checked the packet's IP checksum
	WCWithInvalidate WCFlags = 1 << 3 // WC.Imm holds the rkey the sender invalidated
)

// String returns the set flags as "GRH|WITH_IMM" (IBV_WC_ names), or "0".
func (f WCFlags) String() string {
	return flagString(uint32(f), []string{"GRH", "WITH_IMM", "IP_CSUM_OK", "WITH_INV"})
}

func flagString(v uint32, names []string) string {
	if v == 0 {
		return "0"
	}
	var b strings.Builder
	for i, n := range names {
		if v&(1<<i) != 0 {
			if b.Len() > 0 {
				b.WriteByte('|')
			}
			b.WriteString(n)
			v &^= 1 << i
		}
	}
	if v != 0 {
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		b.WriteString("0x" + strconv.FormatUint(uint64(v), 16))
	}
	return b.String()
}

// WC is a work completion, as CQ.Poll and CQ.Wait return them. Only ID,
// Status, QPNum and VendorErr are valid when Status is not WCSuccess.
type WC struct {
	ID        uint64 // the work request's ID
	Status    WCStatus
	Opcode    WCOpcode
	VendorErr uint32 // the device's own error code, for its documentation
	ByteLen   uint32 // bytes received (receives; a UD receive counts the GRH)
	// Imm is the immediate data in host order (Flags has WCWithImm) or the
	// invalidated rkey (WCWithInvalidate).
	Imm          uint32
	QPNum        uint32 // the local QP the work request was posted to
	SrcQP        uint32 // UD receives: the sender's QPN
	Flags        WCFlags
	PkeyIndex    uint16 // UD receives (GSI): the P_Key index
	SLID         uint16 // UD receives on InfiniBand: the sender's LID
	SL           uint8  // UD receives: the service level
	DLIDPathBits uint8  // UD receives on InfiniBand
}

// Err returns nil for a successful completion and otherwise a *WCError:
// errors.Is(err, WCRemAccessErr) matches by status.
func (wc *WC) Err() error {
	if wc.Status == WCSuccess {
		return nil
	}
	return &WCError{ID: wc.ID, QPNum: wc.QPNum, Status: wc.Status, VendorErr: wc.VendorErr}
}

// WCError is a failed work completion (WC.Err).
type WCError struct {
	ID        uint64 // the work request's ID
	QPNum     uint32
	Status    WCStatus
	VendorErr uint32
}

func (e *WCError) Error() string {
	return "uverbs: work request " + strconv.FormatUint(e.ID, 10) + " on QP " + strconv.FormatUint(uint64(e.QPNum), 10) +
		": " + e.Status.String() + " (vendor error 0x" + strconv.FormatUint(uint64(e.VendorErr), 16) + ")"
}

// Unwrap returns the status, so errors.Is matches it.
func (e *WCError) Unwrap() error { return e.Status }

// PostError says which work request of a list PostSend or PostRecv
// refused; none of the list was posted. Err is one of the data path
// errors below (errors.Is(err, ErrQueueFull) and so on see through it).
type PostError struct {
	Index int   // the refused work request's index in the list
	Err   error // why
}

func (e *PostError) Error() string {
	return "work request " + strconv.Itoa(e.Index) + ": " + e.Err.Error()
}

// Unwrap returns Err.
func (e *PostError) Unwrap() error { return e.Err }

// Data path errors (match with errors.Is). Each is returned before
// anything reaches the queue.
var (
	// ErrQueueFull: the work requests do not fit the queue's free slots;
	// poll completions and post again.
	ErrQueueFull = provider.ErrQueueFull
	// ErrTooManySGE: a work request has more SGEs than the queue allows.
	ErrTooManySGE = provider.ErrTooManySGE
	// ErrInlineTooLarge: inline data beyond the queue's MaxInlineData.
	ErrInlineTooLarge = provider.ErrInlineTooLarge
	// ErrBadWR: a work request the QP's type or the opcode does not allow.
	ErrBadWR = provider.ErrBadWR
	// ErrQPState: the QP's state does not allow the post.
	ErrQPState = errors.New("uverbs: QP state does not allow posting")
)

// The conversions to the providers' declarations: the same memory, read
// through the providers' identical types (TestDataPathLayout).

func sendWRs(wrs []SendWR) []provider.SendWR {
	return unsafe.Slice((*provider.SendWR)(unsafe.Pointer(unsafe.SliceData(wrs))), len(wrs))
}

func recvWRs(wrs []RecvWR) []provider.RecvWR {
	return unsafe.Slice((*provider.RecvWR)(unsafe.Pointer(unsafe.SliceData(wrs))), len(wrs))
}

func provWCs(wcs []WC) []provider.WC {
	return unsafe.Slice((*provider.WC)(unsafe.Pointer(unsafe.SliceData(wcs))), len(wcs))
}

// postErr gives a provider's *PostError the public type, without copying.
func postErr(err error) error {
	if pe, ok := err.(*provider.PostError); ok {
		return (*PostError)(unsafe.Pointer(pe))
	}
	return err
}
