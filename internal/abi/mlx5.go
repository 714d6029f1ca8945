package abi

// mlx5 driver data (<rdma/mlx5-abi.h>).

// MLX5ABIVersion is MLX5_IB_UVERBS_ABI_VERSION, the only one libmlx5 speaks.
const MLX5ABIVersion = 1

// mlx5 GET_CONTEXT request bits.
const (
	MLX5LibCap4KUAR        = 1 // MLX5_LIB_CAP_4K_UAR
	MLX5LibCapDynUAR       = 2 // MLX5_LIB_CAP_DYN_UAR
	MLX5AllocUctxDEVX      = 1 // MLX5_IB_ALLOC_UCTX_DEVX
	MLX5CQEVersionV1       = 1
	MLX5DefaultTotalUUARs  = 16 // MLX5_DEF_TOT_UUARS
	MLX5MedBfregsThreshold = 12 // MLX5_MED_BFREGS_TSHOLD
)

// MLX5AllocUcontextReqV2 is struct mlx5_ib_alloc_ucontext_req_v2.
type MLX5AllocUcontextReqV2 struct {
	TotalNumBfregs      uint32
	NumLowLatencyBfregs uint32
	Flags               uint32
	CompMask            uint32
	MaxCQEVersion       uint8
	Reserved0           uint8
	Reserved1           uint16
	Reserved2           uint32
	LibCaps             uint64
}

// MLX5AllocUcontextResp is struct mlx5_ib_alloc_ucontext_resp.
type MLX5AllocUcontextResp struct {
	QPTabSize          uint32
	BfRegSize          uint32
	TotBfregs          uint32
	CacheLineSize      uint32
	MaxSQDescSz        uint16
	MaxRQDescSz        uint16
	MaxSendWqebb       uint32
	MaxRecvWr          uint32
	MaxSRQRecvWr       uint32
	NumPorts           uint16
	FlowActionFlags    uint16
	CompMask           uint32
	ResponseLength     uint32
	CQEVersion         uint8
	CmdsSuppUHW        uint8
	EthMinInline       uint8
	ClockInfoVersions  uint8
	HCACoreClockOffset uint64
	LogUARSize         uint32
	NumUARsPerPage     uint32
	NumDynBfregs       uint32
	DumpFillMkey       uint32
}

// MLX5 GET_CONTEXT response comp_mask bits
// (MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_*).
const (
	MLX5UctxRespCoreClockOffset = 1 << 0
	MLX5UctxRespDumpFillMkey    = 1 << 1
	MLX5UctxRespECE             = 1 << 2
	MLX5UctxRespSQD2RTS         = 1 << 3
	MLX5UctxRespRealTimeTS      = 1 << 4
)

// eth_min_inline values of the GET_CONTEXT response
// (enum mlx5_user_inline_mode).
const (
	MLX5UserInlineModeNA   = 0
	MLX5UserInlineModeNone = 1
)

// The mmap offset encoding of mlx5_ib: the page offset of an mmap on the
// uverbs fd carries a command in bits 8..15 and an index in bits 0..7
// (bits 16.. extend the index of MLX5_IB_MMAP_ALLOC_WC).
const (
	MLX5MmapCmdShift       = 8
	MLX5MmapRegularPage    = 0 // MLX5_IB_MMAP_REGULAR_PAGE: static UAR page, write-combining
	MLX5MmapWCPage         = 2
	MLX5MmapNCPage         = 3 // MLX5_IB_MMAP_NC_PAGE: static UAR page, non-cached
	MLX5MmapCoreClock      = 5
	MLX5MmapAllocWC        = 6
	MLX5MmapClockInfo      = 7
	MLX5ClockInfoV1        = 0 // MLX5_IB_CLOCK_INFO_V1: index of the clock info page
	MLX5AdapterPageSize    = 4096
	MLX5BFOffset           = 0x800 // MLX5_BF_OFFSET: BlueFlame registers within a UAR
	MLX5NumNonFPBfregsUAR  = 2     // MLX5_NUM_NON_FP_BFREGS_PER_UAR
	MLX5NumBfregsPerUAR    = 4     // NUM_BFREGS_PER_UAR
	MLX5MaxBfregs          = 512 * MLX5NumNonFPBfregsUAR
	MLX5QPCPageOffsetQuant = 64
)

// MLX5MmapOffset is the byte offset of an mmap of command cmd, index idx,
// as libmlx5's get_uar_mmap_offset computes it.
func MLX5MmapOffset(cmd, idx int, pageSize int) int64 {
	off := int64(cmd) << MLX5MmapCmdShift
	if cmd == MLX5MmapAllocWC && idx >= 1<<MLX5MmapCmdShift {
		off |= int64(idx&0xff) | int64(idx>>8)<<16
	} else {
		off |= int64(idx)
	}
	return off * int64(pageSize)
}

// The driver's UAR object (MLX5_IB_OBJECT_UAR), for dynamic UARs: one
// ioctl allocates a UAR page and says where to mmap it.
const (
	MLX5ObjectUAR            = 1<<12 + 8 // MLX5_IB_OBJECT_UAR
	MLX5MethodUARObjAlloc    = 1 << 12   // MLX5_IB_METHOD_UAR_OBJ_ALLOC
	MLX5MethodUARObjDestroy  = 1<<12 + 1 // MLX5_IB_METHOD_UAR_OBJ_DESTROY
	MLX5AttrUARAllocHandle   = 1 << 12   // MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE
	MLX5AttrUARAllocType     = 1<<12 + 1
	MLX5AttrUARAllocMmapOff  = 1<<12 + 2
	MLX5AttrUARAllocMmapLen  = 1<<12 + 3
	MLX5AttrUARAllocPageID   = 1<<12 + 4
	MLX5AttrUARDestroyHandle = 1 << 12 // MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE
	MLX5UARAllocTypeBF       = 0       // MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF
	MLX5UARAllocTypeNC       = 1       // MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC
)

// CREATE_QP driver request flags (MLX5_QP_FLAG_*).
const (
	MLX5QPFlagSignature    = 1 << 0
	MLX5QPFlagScatterCQE   = 1 << 1
	MLX5QPFlagBfregIndex   = 1 << 3
	MLX5QPFlagUARPageIndex = 1 << 10
	// MLX5ECEVersion1 is the ece_options libmlx5 sends when the kernel
	// reports ECE: "start from ECE version 1".
	MLX5ECEVersion1 = 0x10000000
)

// CREATE_CQ driver request flags (MLX5_IB_CREATE_CQ_FLAGS_*).
const (
	MLX5CreateCQFlagCQE128BPad   = 1 << 0
	MLX5CreateCQFlagUARPageIndex = 1 << 1
)

// MLX5CreateCQ is struct mlx5_ib_create_cq.
type MLX5CreateCQ struct {
	BufAddr          uint64
	DBAddr           uint64
	CQESize          uint32
	CQECompEn        uint8
	CQECompResFormat uint8
	Flags            uint16
	UARPageIndex     uint16
	Reserved0        uint16
	Reserved1        uint32
}

// MLX5CreateCQResp is struct mlx5_ib_create_cq_resp (no BTF: mlx5_ib
// fills it through a copy of its cqn alone).
type MLX5CreateCQResp struct {
	CQN      uint32
	Reserved uint32
}

// MLX5ResizeCQ is struct mlx5_ib_resize_cq.
type MLX5ResizeCQ struct {
	BufAddr   uint64
	CQESize   uint16
	Reserved0 uint16
	Reserved1 uint32
}

// MLX5CreateQP is struct mlx5_ib_create_qp.
type MLX5CreateQP struct {
	BufAddr    uint64
	DBAddr     uint64
	SQWqeCount uint32
	RQWqeCount uint32
	RQWqeShift uint32
	Flags      uint32
	UIdx       uint32
	BfregIndex uint32
	SQBufAddr  uint64 // a union with access_key (DC)
	ECEOptions uint32
	DCIStreams uint16 // struct mlx5_ib_create_qp_dci_streams
	Reserved   uint16
}

// MLX5CreateQPResp is struct mlx5_ib_create_qp_resp.
type MLX5CreateQPResp struct {
	BfregIndex uint32
	ECEOptions uint32
	CompMask   uint32
	TIRN       uint32
	TISN       uint32
	RQN        uint32
	SQN        uint32
	Reserved1  uint32
	TIRICMAddr uint64
}

// MLX5CreateSRQ is struct mlx5_ib_create_srq.
type MLX5CreateSRQ struct {
	BufAddr   uint64
	DBAddr    uint64
	Flags     uint32
	Reserved0 uint32
	UIdx      uint32
	Reserved1 uint32
}

// MLX5CreateSRQResp is struct mlx5_ib_create_srq_resp.
type MLX5CreateSRQResp struct {
	SRQN     uint32
	Reserved uint32
}

// MLX5CreateAHResp is struct mlx5_ib_create_ah_resp.
type MLX5CreateAHResp struct {
	ResponseLength uint32
	DMAC           [6]byte
	Reserved       [6]byte
}

// The work queue entries below are what the HCA reads from the queue
// buffers, all big endian (the PRM; mirrored by <infiniband/mlx5dv.h> and
// the kernel's <linux/mlx5/qp.h>).

// WQE sizes and doorbell record slots.
const (
	MLX5SendWQEBB    = 64 // MLX5_SEND_WQE_BB: a send WQE basic block
	MLX5SendWQEShift = 6
	MLX5RcvDBR       = 0 // MLX5_RCV_DBR: receive counter word of a QP doorbell record
	MLX5SndDBR       = 1 // MLX5_SND_DBR: send counter word
	MLX5InvalidLkey  = 0x100
	MLX5ExtendedUDAV = 0x80000000
	MLX5InlineSeg    = 0x80000000
	// MLX5EthL2InlineHeaderSize is the Ethernet header a raw packet
	// WQE carries inline when the device asks for L2 inline.
	MLX5EthL2InlineHeaderSize = 18
)

// WQE opcodes (MLX5_OPCODE_*).
const (
	MLX5OpcodeNop          = 0x00
	MLX5OpcodeSendInval    = 0x01
	MLX5OpcodeRDMAWrite    = 0x08
	MLX5OpcodeRDMAWriteImm = 0x09
	MLX5OpcodeSend         = 0x0a
	MLX5OpcodeSendImm      = 0x0b
	MLX5OpcodeRDMARead     = 0x10
	MLX5OpcodeAtomicCS     = 0x11
	MLX5OpcodeAtomicFA     = 0x12
	MLX5OpcodeUMR          = 0x25
)

// Control segment fm_ce_se bits (MLX5_WQE_CTRL_*).
const (
	MLX5WQECtrlCQUpdate            = 2 << 2
	MLX5WQECtrlSolicited           = 1 << 1
	MLX5WQECtrlFence               = 4 << 5
	MLX5WQECtrlInitiatorSmallFence = 1 << 5
)

// UMR control and mkey context bits a LOCAL_INV WQE uses.
const (
	MLX5UMRCtrlFlagInline            = 1 << 7
	MLX5UMRCtrlFlagCheckFree         = 1 << 5
	MLX5UMRCtrlFlagTranslationOffset = 1 << 4
	MLX5UMRCtrlFlagCheckQPN          = 1 << 3
	MLX5UMRCtrlMkeyMaskMkey          = 1 << 13
	MLX5UMRCtrlMkeyMaskQPN           = 1 << 14
	MLX5UMRCtrlMkeyMaskFree          = 1 << 29
	MLX5MkeyContextFree              = 1 << 6
)

// MLX5WQECtrlSeg is struct mlx5_wqe_ctrl_seg.
type MLX5WQECtrlSeg struct {
	OpmodIdxOpcode uint32
	QPNDS          uint32
	Signature      uint8
	DCIStreamID    [2]byte // big endian, unaligned
	FmCeSe         uint8
	Imm            uint32
}

// MLX5WQEDataSeg is struct mlx5_wqe_data_seg.
type MLX5WQEDataSeg struct {
	ByteCount uint32
	Lkey      uint32
	Addr      uint64
}

// MLX5WQERaddrSeg is struct mlx5_wqe_raddr_seg.
type MLX5WQERaddrSeg struct {
	Raddr    uint64
	Rkey     uint32
	Reserved uint32
}

// MLX5WQEAtomicSeg is struct mlx5_wqe_atomic_seg (no BTF: the kernel
// never builds one).
type MLX5WQEAtomicSeg struct {
	SwapAdd uint64
	Compare uint64
}

// MLX5AV is struct mlx5_av (libmlx5's struct mlx5_wqe_av), the address
// vector of a UD WQE.
type MLX5AV struct {
	Key        uint64 // qkey and reserved, or the DC key
	DQPDCT     uint32
	StatRateSL uint8
	FlMlid     uint8
	Rlid       uint16
	Reserved0  [4]byte
	Rmac       [6]byte
	Tclass     uint8
	HopLimit   uint8
	GrhGidFl   uint32
	Rgid       [16]byte
}

// MLX5WQEDatagramSeg is struct mlx5_wqe_datagram_seg.
type MLX5WQEDatagramSeg struct {
	AV MLX5AV
}

// MLX5WQEEthSeg is struct mlx5_wqe_eth_seg. A raw packet WQE continues it
// with the rest of the inline headers (libmlx5 declares the 16 bytes after
// it as part of the struct).
type MLX5WQEEthSeg struct {
	SwpOuterL4Offset  uint8
	SwpOuterL3Offset  uint8
	SwpInnerL4Offset  uint8
	SwpInnerL3Offset  uint8
	CsFlags           uint8
	SwpFlags          uint8
	MSS               uint16
	FlowTableMetadata uint32
	InlineHdr         [4]byte // inline_hdr.sz (big endian) and the first 2 header bytes
}

// MLX5WQEInlineSeg is struct mlx5_wqe_inline_seg.
type MLX5WQEInlineSeg struct {
	ByteCount uint32
}

// MLX5WQEXRCSeg is struct mlx5_wqe_xrc_seg.
type MLX5WQEXRCSeg struct {
	XRCSRQN uint32
	Rsvd    [12]byte
}

// MLX5WQESRQNextSeg is struct mlx5_wqe_srq_next_seg.
type MLX5WQESRQNextSeg struct {
	Rsvd0        [2]byte
	NextWQEIndex uint16
	Signature    uint8
	Rsvd1        [11]byte
}

// MLX5WQEUMRCtrlSeg is struct mlx5_wqe_umr_ctrl_seg.
type MLX5WQEUMRCtrlSeg struct {
	Flags         uint8
	Rsvd0         [3]byte
	XltOctowords  uint16
	XltOffset     uint16 // translation_offset in libmlx5
	MkeyMask      uint64
	XltOffset4716 uint32
	Rsvd1         [28]byte
}

// MLX5WQEMkeyContextSeg is struct mlx5_wqe_mkey_context_seg of
// <infiniband/mlx5dv.h> (no BTF: the kernel builds mkey contexts through
// the firmware's layout).
type MLX5WQEMkeyContextSeg struct {
	Free                    uint8
	Reserved1               uint8
	AccessFlags             uint8
	SF                      uint8
	QPNMkey                 uint32
	Reserved2               uint32
	FlagsPD                 uint32
	StartAddr               uint64
	Len                     uint64
	BsfOctwordSize          uint32
	Reserved3               [4]uint32
	TranslationsOctwordSize uint32
	Reserved4               [3]byte
	LogPageSize             uint8
	Reserved                uint32
}
