package provider

import (
	"errors"

	"github.com/goverbs/goverbs/internal/transport"
)

// The data path types every provider reads and writes. Package uverbs
// declares the same types, documented, for its users, and converts its
// slices to these without copying: the two declarations must agree field
// for field (name, type, offset, size), which uverbs' TestDataPathLayout
// checks. Change both together.

// SGE is one scatter/gather element: a span of registered memory.
type SGE struct {
	Addr   uint64
	Length uint32
	Lkey   uint32
}

// WROpcode is a send work request's operation (IBV_WR_*).
type WROpcode uint32

// Send opcodes.
const (
	WRRDMAWrite         WROpcode = 0
	WRRDMAWriteWithImm  WROpcode = 1
	WRSend              WROpcode = 2
	WRSendWithImm       WROpcode = 3
	WRRDMARead          WROpcode = 4
	WRAtomicCmpAndSwp   WROpcode = 5
	WRAtomicFetchAndAdd WROpcode = 6
	WRLocalInv          WROpcode = 7
	WRBindMW            WROpcode = 8
	WRSendWithInv       WROpcode = 9
)

// As uverbs.WROpcode.String (rdma-core's ibv_wr_opcode_str), for the
// providers' messages; uverbs' TestDataPathStrings compares them.
var wrOpcodeNames = [...]string{"rdma-write", "rdma-write-with-imm", "send", "send-with-imm", "rdma-read",
	"atomic-cmp-and-swp", "atomic-fetch-and-add", "local-inv", "bind-mw", "send-with-inv"}

func (o WROpcode) String() string {
	if int(o) < len(wrOpcodeNames) {
		return wrOpcodeNames[o]
	}
	return "WROpcode(" + itoa(uint64(o)) + ")"
}

// SendFlags modify a send work request (IBV_SEND_*).
type SendFlags uint32

// Send flags.
const (
	SendFence     SendFlags = 1 << 0
	SendSignaled  SendFlags = 1 << 1
	SendSolicited SendFlags = 1 << 2
	SendInline    SendFlags = 1 << 3
	// SendIPCsum asks the device to fill in the IP and TCP/UDP checksums
	// of a raw packet (IBV_SEND_IP_CSUM).
	SendIPCsum SendFlags = 1 << 4
)

// BindMW is the memory-window binding of a BIND_MW work request.
type BindMW struct {
	MWRkey  uint32 // the window's current rkey
	NewRkey uint32 // the rkey after the bind
	MRLkey  uint32 // the MR the window exposes
	Addr    uint64
	Length  uint64
	Access  uint32 // IBV_ACCESS_* the window grants
}

// SendWR is a send work request. Only the fields its opcode uses are read.
type SendWR struct {
	ID     uint64
	Opcode WROpcode
	Flags  SendFlags
	SGL    []SGE
	// Imm is the immediate data of *_WITH_IMM, in host order (it travels
	// big endian).
	Imm uint32
	// InvalidateRkey is the rkey SEND_WITH_INV and LOCAL_INV invalidate.
	InvalidateRkey uint32
	// RemoteAddr and Rkey name the peer's memory for RDMA and atomics.
	RemoteAddr uint64
	Rkey       uint32
	// CompareAdd is the compare value of CAS or the addend of FAA; Swap is
	// CAS's new value.
	CompareAdd uint64
	Swap       uint64
	// UD: the destination. AH points to what the caller holds (uverbs'
	// *AH, whose first field is the provider's AH), so posting keeps it
	// reachable and its cleanup cannot destroy it under the program.
	AH         *AHRef
	RemoteQPN  uint32
	RemoteQkey uint32
	// XRCRemoteSRQN is the SRQ an XRC_SEND work request is delivered to
	// (on the XRC target QP's side).
	XRCRemoteSRQN uint32
	Bind          BindMW
}

// AHRef is an address handle as a work request names it: the layout
// prefix of uverbs.AH, whose first field is the provider's half (a test
// of package uverbs checks that it stays so).
type AHRef struct {
	AH AH
}

// RecvWR is a receive work request.
type RecvWR struct {
	ID  uint64
	SGL []SGE
}

// WCStatus is a work completion's status (IBV_WC_*).
type WCStatus uint32

// Completion statuses.
const (
	WCSuccess WCStatus = iota
	WCLocLenErr
	WCLocQPOpErr
	WCLocEECOpErr
	WCLocProtErr
	WCWRFlushErr
	WCMWBindErr
	WCBadRespErr
	WCLocAccessErr
	WCRemInvReqErr
	WCRemAccessErr
	WCRemOpErr
	WCRetryExcErr
	WCRNRRetryExcErr
	WCLocRDDViolErr
	WCRemInvRDReqErr
	WCRemAbortErr
	WCInvEECNErr
	WCInvEECStateErr
	WCFatalErr
	WCRespTimeoutErr
	WCGeneralErr
)

var wcStatusNames = [...]string{"success", "local length error", "local QP operation error",
	"local EE context operation error", "local protection error", "Work Request Flushed Error",
	"memory management operation error", "bad response error", "local access error",
	"remote invalid request error", "remote access error", "remote operation error",
	"transport retry counter exceeded", "RNR retry counter exceeded", "local RDD violation error",
	"remote invalid RD request", "aborted error", "invalid EE context number",
	"invalid EE context state", "fatal error", "response timeout error", "general error"}

// String returns the text ibv_wc_status_str gives.
func (s WCStatus) String() string {
	if int(s) < len(wcStatusNames) {
		return wcStatusNames[s]
	}
	return "unknown"
}

// WCOpcode is what a completion completed (IBV_WC_*).
type WCOpcode uint32

// Completion opcodes.
const (
	WCSend            WCOpcode = 0
	WCRDMAWrite       WCOpcode = 1
	WCRDMARead        WCOpcode = 2
	WCCompSwap        WCOpcode = 3
	WCFetchAdd        WCOpcode = 4
	WCBindMW          WCOpcode = 5
	WCLocalInv        WCOpcode = 6
	WCTSO             WCOpcode = 7
	WCRecv            WCOpcode = 128
	WCRecvRDMAWithImm WCOpcode = 129
)

// WCFlags describe a completion (IBV_WC_* flags).
type WCFlags uint32

// Completion flags.
const (
	WCWithGRH        WCFlags = 1 << 0
	WCWithImm        WCFlags = 1 << 1
	WCIPCSumOK       WCFlags = 1 << 2
	WCWithInvalidate WCFlags = 1 << 3
)

// WC is a work completion.
type WC struct {
	ID           uint64
	Status       WCStatus
	Opcode       WCOpcode
	VendorErr    uint32
	ByteLen      uint32
	Imm          uint32 // immediate data in host order, or the invalidated rkey
	QPNum        uint32
	SrcQP        uint32
	Flags        WCFlags
	PkeyIndex    uint16
	SLID         uint16
	SL           uint8
	DLIDPathBits uint8
}

// Data path errors. Each is returned before anything reaches the queue.
var (
	// ErrQueueFull: the work requests do not fit the free slots.
	ErrQueueFull = errors.New("work queue full")
	// ErrTooManySGE: a work request has more SGEs than the queue allows.
	ErrTooManySGE = errors.New("more scatter/gather elements than the queue allows")
	// ErrInlineTooLarge: inline data beyond the queue's max_inline_data.
	ErrInlineTooLarge = errors.New("inline data larger than the queue allows")
	// ErrBadWR: a work request the QP type or opcode does not allow.
	ErrBadWR = errors.New("invalid work request")
	// ErrClosed: the object (or its context) was closed.
	ErrClosed = transport.ErrClosed
)

// PostError says which work request of a list failed; none of the list
// was posted.
type PostError struct {
	Index int
	Err   error
}

func (e *PostError) Error() string {
	return "work request " + itoa(uint64(e.Index)) + ": " + e.Err.Error()
}
func (e *PostError) Unwrap() error { return e.Err }

// Sender is a provider QP's send side.
type Sender interface {
	// PostSend puts every work request on the send queue and rings the
	// doorbell once, or puts none of them and returns a *PostError.
	PostSend(wrs []SendWR) error
}

// Receiver is a provider QP's (or SRQ's) receive side.
type Receiver interface {
	// PostRecv puts every work request on the receive queue, or none.
	PostRecv(wrs []RecvWR) error
}

// Poller is a provider CQ's completion side.
type Poller interface {
	// Poll moves up to len(wcs) completions into wcs and returns how many.
	Poll(wcs []WC) (int, error)
}

func itoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}
