package abi

// rxe (Soft-RoCE) driver data and shared queue layouts (<rdma/rdma_user_rxe.h>).

// RXEABIVersion is the rxe driver's uverbs ABI (RXE_UVERBS_ABI_VERSION).
const RXEABIVersion = 2

// rxe network types (enum rxe_network_type) for an address vector.
const (
	RXENetworkTypeIPv4 = 1
	RXENetworkTypeIPv6 = 2
)

// MMInfo is struct mminfo: where to mmap a queue on the uverbs fd.
type MMInfo struct {
	Offset uint64
	Size   uint32
	Pad    uint32
}

// RXECreateCQResp is struct rxe_create_cq_resp.
type RXECreateCQResp struct {
	MI MMInfo
}

// RXEResizeCQResp is struct rxe_resize_cq_resp.
type RXEResizeCQResp struct {
	MI MMInfo
}

// RXECreateQPResp is struct rxe_create_qp_resp.
type RXECreateQPResp struct {
	RQMI MMInfo
	SQMI MMInfo
}

// RXECreateSRQResp is struct rxe_create_srq_resp.
type RXECreateSRQResp struct {
	MI       MMInfo
	SRQNum   uint32
	Reserved uint32
}

// RXEModifySRQCmd is struct rxe_modify_srq_cmd.
type RXEModifySRQCmd struct {
	MmapInfoAddr uint64
}

// RXECreateAHResp is struct rxe_create_ah_resp.
type RXECreateAHResp struct {
	AHNum    uint32
	Reserved uint32
}

// RXEGlobalRoute is struct rxe_global_route.
type RXEGlobalRoute struct {
	DGID         [16]uint8
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
}

// RXEAV is struct rxe_av, the address vector older kernels took inline.
type RXEAV struct {
	PortNum     uint8
	NetworkType uint8
	DMAC        [6]uint8
	GRH         RXEGlobalRoute
	SGIDAddr    [28]byte // sockaddr_in or sockaddr_in6
	DGIDAddr    [28]byte
}

// RXESendWR is struct rxe_send_wr.
type RXESendWR struct {
	WRID      uint64
	Reserved  uint32 // was num_sge before 6.1; the kernel reads dma.num_sge
	Opcode    uint32
	SendFlags uint32
	Ex        uint32    // imm_data (big endian) or invalidate_rkey
	WR        [120]byte // union of rdma, atomic, ud and mw
}

// RXESGE is struct rxe_sge.
type RXESGE struct {
	Addr   uint64
	Length uint32
	Lkey   uint32
}

// RXEDMAInfo is struct rxe_dma_info; SGEs or inline data follow it.
type RXEDMAInfo struct {
	Length    uint32
	Resid     uint32
	CurSGE    uint32
	NumSGE    uint32
	SGEOffset uint32
	Reserved  uint32
}

// RXESendWQE is struct rxe_send_wqe, one send queue slot.
type RXESendWQE struct {
	WR          RXESendWR
	Status      uint32
	State       uint32
	IOVA        uint64
	Mask        uint32
	FirstPSN    uint32
	LastPSN     uint32
	AckLength   uint32
	SSN         uint32
	HasRdAtomic uint32
	DMA         RXEDMAInfo
}

// RXERecvWQE is struct rxe_recv_wqe, one receive queue slot.
type RXERecvWQE struct {
	WRID     uint64
	Reserved uint32
	Padding  uint32
	DMA      RXEDMAInfo
}

// RXEQueueBuf is struct rxe_queue_buf, the header of every mapped queue;
// the slots follow at offset 384.
type RXEQueueBuf struct {
	Log2ElemSize  uint32
	IndexMask     uint32
	Pad1          [30]uint32
	ProducerIndex uint32
	Pad2          [31]uint32
	ConsumerIndex uint32
	Pad3          [31]uint32
}
