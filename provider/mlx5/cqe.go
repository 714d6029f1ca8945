package mlx5

import (
	"errors"
	"strconv"

	"github.com/goverbs/goverbs/internal/provider"
)

// The 64-byte CQE (struct mlx5_cqe64 of mlx5dv.h; the PRM's "CQE format").
// Multi-byte fields are big endian.
const (
	cqeSize = 64

	cqeOffMLPath       = 17 // ml_path: dlid_path_bits in the low 7 bits
	cqeOffSLID         = 22 // slid, BE16
	cqeOffFlagsRQPN    = 24 // flags_rqpn: GRH<<28 | SL<<24 | source QPN
	cqeOffHdsIPExt     = 28 // hds_ip_ext: the checksum validation bits
	cqeOffL4HdrTypeEtc = 29 // l4_hdr_type_etc: the L3 header type in bits 2..3
	cqeOffSRQNUIDX     = 32 // srqn_uidx: SRQ number, or the user index under CQE version 1
	cqeOffImmInvalPkey = 36 // immediate, invalidated rkey, or P_Key index
	cqeOffByteCnt      = 44
	cqeOffVendorErr    = 54 // error CQE: vendor_err_synd
	cqeOffSyndrome     = 55 // error CQE: syndrome
	cqeOffSopDropQPN   = 56 // send opcode (requester CQEs) <<24 | QPN
	cqeOffWQECounter   = 60 // BE16
	cqeOffOpOwn        = 63 // opcode<<4 | format<<2 | solicited<<1 | owner

	// cqeOffTrailer is the aligned word ending the CQE (wqe_counter,
	// signature, op_own), read with one ordered load.
	cqeOffTrailer = 60

	cqeOwnerMask       = 0x01
	cqeInlineScatter32 = 0x04 // MLX5_INLINE_SCATTER_32: payload in the CQE's first 32 bytes
	cqeInlineScatter64 = 0x08 // MLX5_INLINE_SCATTER_64: payload in the 64 bytes before it (128-byte CQEs)

	maxQPN = 1<<24 - 1

	cqeL3OK          = 1 << 1 // MLX5_CQE_L3_OK
	cqeL4OK          = 1 << 2 // MLX5_CQE_L4_OK
	cqeL3HdrTypeIPv4 = 2      // MLX5_CQE_L3_HDR_TYPE_IPV4
)

// CQE opcodes (op_own >> 4, MLX5_CQE_*).
const (
	cqeReq         = 0
	cqeRespWRImm   = 1
	cqeRespSend    = 2
	cqeRespSendImm = 3
	cqeRespSendInv = 4
	cqeResizeCQ    = 5
	cqeNoPacket    = 6
	cqeSigErr      = 12
	cqeReqErr      = 13
	cqeRespErr     = 14
	cqeInvalid     = 15
)

// The send opcodes a requester CQE reports in sop_drop_qpn's top byte
// (MLX5_OPCODE_*).
const (
	reqOpNOP          = 0x00
	reqOpSendInval    = 0x01
	reqOpRDMAWrite    = 0x08
	reqOpRDMAWriteImm = 0x09
	reqOpSend         = 0x0a
	reqOpSendImm      = 0x0b
	reqOpTSO          = 0x0e
	reqOpRDMARead     = 0x10
	reqOpAtomicCS     = 0x11
	reqOpAtomicFA     = 0x12
	reqOpSetPSV       = 0x20
	reqOpUMR          = 0x25
	reqOpMMO          = 0x2f
)

// Error CQE syndromes (MLX5_CQE_SYNDROME_*).
const (
	syndromeLocalLength    = 0x01
	syndromeLocalQPOp      = 0x02
	syndromeLocalProt      = 0x04
	syndromeWRFlush        = 0x05
	syndromeMWBind         = 0x06
	syndromeBadResp        = 0x10
	syndromeLocalAccess    = 0x11
	syndromeRemoteInvalReq = 0x12
	syndromeRemoteAccess   = 0x13
	syndromeRemoteOp       = 0x14
	syndromeTransportRetry = 0x15
	syndromeRNRRetry       = 0x16
	syndromeRemoteAborted  = 0x22
)

// syndromeStatus maps an error CQE's syndrome to the work completion
// status, as libmlx5's mlx5_handle_error_cqe does: any syndrome it does
// not name is a general error.
func syndromeStatus(syndrome uint8) provider.WCStatus {
	switch syndrome {
	case syndromeLocalLength:
		return provider.WCLocLenErr
	case syndromeLocalQPOp:
		return provider.WCLocQPOpErr
	case syndromeLocalProt:
		return provider.WCLocProtErr
	case syndromeWRFlush:
		return provider.WCWRFlushErr
	case syndromeMWBind:
		return provider.WCMWBindErr
	case syndromeBadResp:
		return provider.WCBadRespErr
	case syndromeLocalAccess:
		return provider.WCLocAccessErr
	case syndromeRemoteInvalReq:
		return provider.WCRemInvReqErr
	case syndromeRemoteAccess:
		return provider.WCRemAccessErr
	case syndromeRemoteOp:
		return provider.WCRemOpErr
	case syndromeTransportRetry:
		return provider.WCRetryExcErr
	case syndromeRNRRetry:
		return provider.WCRNRRetryExcErr
	case syndromeRemoteAborted:
		return provider.WCRemAbortErr
	default:
		return provider.WCGeneralErr
	}
}

// ErrBadCQE is matched (errors.Is) by every error a poll returns for a CQE
// it cannot deliver.
var ErrBadCQE = errors.New("mlx5: unexpected completion queue entry")

// CQEError describes a CQE a poll could not deliver: an opcode the
// provider does not produce work for, a QP or SRQ number not attached to
// the CQ, or a WQE counter naming nothing outstanding. The CQE is consumed
// (as libmlx5 consumes the CQE it fails on), so the next poll goes on
// with the entry after it.
type CQEError struct {
	CQN        uint32
	Index      uint32 // consumer index of the entry
	Opcode     uint8  // op_own >> 4
	QPN        uint32
	WQECounter uint16
	Reason     string
}

func (e *CQEError) Error() string {
	return "mlx5: CQ " + strconv.FormatUint(uint64(e.CQN), 10) + " entry " + strconv.FormatUint(uint64(e.Index), 10) +
		" (opcode " + strconv.FormatUint(uint64(e.Opcode), 10) + ", QPN " + strconv.FormatUint(uint64(e.QPN), 10) +
		", WQE counter " + strconv.FormatUint(uint64(e.WQECounter), 10) + "): " + e.Reason
}

func (e *CQEError) Unwrap() error { return ErrBadCQE }

// FieldError is an invalid argument to a CQ operation; Field names it.
type FieldError struct {
	Field  string
	Value  uint64
	Reason string
}

func (e *FieldError) Error() string {
	return "mlx5: " + e.Field + " " + strconv.FormatUint(e.Value, 10) + ": " + e.Reason
}
