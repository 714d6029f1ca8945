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
