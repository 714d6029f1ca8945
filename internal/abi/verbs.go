package abi

// Structs of the verbs objects (<rdma/ib_user_verbs.h>, <rdma/ib_user_ioctl_verbs.h>).

// RegMR is struct ib_uverbs_reg_mr.
type RegMR struct {
	Response    uint64
	Start       uint64
	Length      uint64
	HCAVA       uint64
	PDHandle    uint32
	AccessFlags uint32
}

// RegMRResp is struct ib_uverbs_reg_mr_resp.
type RegMRResp struct {
	MRHandle uint32
	Lkey     uint32
	Rkey     uint32
}

// ReregMR is struct ib_uverbs_rereg_mr.
type ReregMR struct {
	Response    uint64
	MRHandle    uint32
	Flags       uint32
	Start       uint64
	Length      uint64
	HCAVA       uint64
	PDHandle    uint32
	AccessFlags uint32
}

// ReregMRResp is struct ib_uverbs_rereg_mr_resp.
type ReregMRResp struct {
	Lkey uint32
	Rkey uint32
}

// DeregMR is struct ib_uverbs_dereg_mr.
type DeregMR struct {
	MRHandle uint32
}

// AllocMW is struct ib_uverbs_alloc_mw.
type AllocMW struct {
	Response uint64
	PDHandle uint32
	MWType   uint8
	Reserved [3]uint8
}

// AllocMWResp is struct ib_uverbs_alloc_mw_resp.
type AllocMWResp struct {
	MWHandle uint32
	Rkey     uint32
}

// DeallocMW is struct ib_uverbs_dealloc_mw.
type DeallocMW struct {
	MWHandle uint32
}

// CreateCompChannel is struct ib_uverbs_create_comp_channel.
type CreateCompChannel struct {
	Response uint64
}

// CreateCompChannelResp is struct ib_uverbs_create_comp_channel_resp.
type CreateCompChannelResp struct {
	FD uint32
}

// CreateCQ is struct ib_uverbs_create_cq.
type CreateCQ struct {
	Response    uint64
	UserHandle  uint64
	CQE         uint32
	CompVector  uint32
	CompChannel int32 // -1: none
	Reserved    uint32
}

// CreateCQResp is struct ib_uverbs_create_cq_resp.
type CreateCQResp struct {
	CQHandle uint32
	CQE      uint32
}

// ExCreateCQ is struct ib_uverbs_ex_create_cq.
type ExCreateCQ struct {
	UserHandle  uint64
	CQE         uint32
	CompVector  uint32
	CompChannel int32
	CompMask    uint32
	Flags       uint32
	Reserved    uint32
}

// ExCreateCQResp is struct ib_uverbs_ex_create_cq_resp.
type ExCreateCQResp struct {
	Base           CreateCQResp
	CompMask       uint32
	ResponseLength uint32
}

// ResizeCQ is struct ib_uverbs_resize_cq.
type ResizeCQ struct {
	Response uint64
	CQHandle uint32
	CQE      uint32
}

// ResizeCQResp is struct ib_uverbs_resize_cq_resp.
type ResizeCQResp struct {
	CQE      uint32
	Reserved uint32
}

// ReqNotifyCQ is struct ib_uverbs_req_notify_cq.
type ReqNotifyCQ struct {
	CQHandle      uint32
	SolicitedOnly uint32
}

// DestroyCQ is struct ib_uverbs_destroy_cq.
type DestroyCQ struct {
	Response uint64
	CQHandle uint32
	Reserved uint32
}

// DestroyCQResp is struct ib_uverbs_destroy_cq_resp.
type DestroyCQResp struct {
	CompEventsReported  uint32
	AsyncEventsReported uint32
}

// WC is struct ib_uverbs_wc, the work completion (also rxe's CQE).
type WC struct {
	WRID         uint64
	Status       uint32
	Opcode       uint32
	VendorErr    uint32
	ByteLen      uint32
	Ex           uint32 // imm_data (big endian) or invalidate_rkey
	QPNum        uint32
	SrcQP        uint32
	WCFlags      uint32
	PkeyIndex    uint16
	SLID         uint16
	SL           uint8
	DLIDPathBits uint8
	PortNum      uint8
	Reserved     uint8
}

// GlobalRoute is struct ib_uverbs_global_route.
type GlobalRoute struct {
	DGID         [16]uint8
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	Reserved     uint8
}

// AHAttr is struct ib_uverbs_ah_attr.
type AHAttr struct {
	GRH         GlobalRoute
	DLID        uint16
	SL          uint8
	SrcPathBits uint8
	StaticRate  uint8
	IsGlobal    uint8
	PortNum     uint8
	Reserved    uint8
}

// QPCap is struct ib_uverbs_qp_cap.
type QPCap struct {
	MaxSendWr     uint32
	MaxRecvWr     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
}

// CreateQP is struct ib_uverbs_create_qp.
type CreateQP struct {
	Response      uint64
	UserHandle    uint64
	PDHandle      uint32
	SendCQHandle  uint32
	RecvCQHandle  uint32
	SRQHandle     uint32
	MaxSendWr     uint32
	MaxRecvWr     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
	SQSigAll      uint8
	QPType        uint8
	IsSRQ         uint8
	Reserved      uint8
}

// CreateQPResp is struct ib_uverbs_create_qp_resp.
type CreateQPResp struct {
	QPHandle      uint32
	QPN           uint32
	MaxSendWr     uint32
	MaxRecvWr     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
	Reserved      uint32
}

// QPDest is struct ib_uverbs_qp_dest.
type QPDest struct {
	DGID         [16]uint8
	FlowLabel    uint32
	DLID         uint16
	Reserved     uint16
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	SL           uint8
	SrcPathBits  uint8
	StaticRate   uint8
	IsGlobal     uint8
	PortNum      uint8
}

// ModifyQP is struct ib_uverbs_modify_qp.
type ModifyQP struct {
	Dest             QPDest
	AltDest          QPDest
	QPHandle         uint32
	AttrMask         uint32
	Qkey             uint32
	RQPSN            uint32
	SQPSN            uint32
	DestQPNum        uint32
	QPAccessFlags    uint32
	PkeyIndex        uint16
	AltPkeyIndex     uint16
	QPState          uint8
	CurQPState       uint8
	PathMTU          uint8
	PathMigState     uint8
	EnSQDAsyncNotify uint8
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRNRTimer      uint8
	PortNum          uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
	AltPortNum       uint8
	AltTimeout       uint8
	Reserved         [2]uint8
}

// QueryQP is struct ib_uverbs_query_qp.
type QueryQP struct {
	Response uint64
	QPHandle uint32
	AttrMask uint32
}

// QueryQPResp is struct ib_uverbs_query_qp_resp.
type QueryQPResp struct {
	Dest            QPDest
	AltDest         QPDest
	MaxSendWr       uint32
	MaxRecvWr       uint32
	MaxSendSGE      uint32
	MaxRecvSGE      uint32
	MaxInlineData   uint32
	Qkey            uint32
	RQPSN           uint32
	SQPSN           uint32
	DestQPNum       uint32
	QPAccessFlags   uint32
	PkeyIndex       uint16
	AltPkeyIndex    uint16
	QPState         uint8
	CurQPState      uint8
	PathMTU         uint8
	PathMigState    uint8
	SQDraining      uint8
	MaxRdAtomic     uint8
	MaxDestRdAtomic uint8
	MinRNRTimer     uint8
	PortNum         uint8
	Timeout         uint8
	RetryCnt        uint8
	RNRRetry        uint8
	AltPortNum      uint8
	AltTimeout      uint8
	SQSigAll        uint8
	Reserved        [5]uint8
}

// DestroyQP is struct ib_uverbs_destroy_qp.
type DestroyQP struct {
	Response uint64
	QPHandle uint32
	Reserved uint32
}

// DestroyQPResp is struct ib_uverbs_destroy_qp_resp.
type DestroyQPResp struct {
	EventsReported uint32
}

// SGE is struct ib_uverbs_sge.
type SGE struct {
	Addr   uint64
	Length uint32
	Lkey   uint32
}

// SendWR is struct ib_uverbs_send_wr.
type SendWR struct {
	WRID      uint64
	NumSGE    uint32
	Opcode    uint32
	SendFlags uint32
	Ex        uint32   // imm_data (big endian) or invalidate_rkey
	WR        [32]byte // union of rdma, atomic and ud
}

// PostSend is struct ib_uverbs_post_send (work requests follow).
type PostSend struct {
	Response uint64
	QPHandle uint32
	WRCount  uint32
	SGECount uint32
	WQESize  uint32
}

// PostSendResp is struct ib_uverbs_post_send_resp.
type PostSendResp struct {
	BadWR uint32
}

// CreateAH is struct ib_uverbs_create_ah.
type CreateAH struct {
	Response   uint64
	UserHandle uint64
	PDHandle   uint32
	Reserved   uint32
	Attr       AHAttr
}

// CreateAHResp is struct ib_uverbs_create_ah_resp.
type CreateAHResp struct {
	AHHandle uint32
}

// DestroyAH is struct ib_uverbs_destroy_ah.
type DestroyAH struct {
	AHHandle uint32
}

// AttachMcast is struct ib_uverbs_attach_mcast (detach has the same layout).
type AttachMcast struct {
	GID      [16]uint8
	QPHandle uint32
	MLID     uint16
	Reserved uint16
}

// CreateSRQ is struct ib_uverbs_create_srq.
type CreateSRQ struct {
	Response   uint64
	UserHandle uint64
	PDHandle   uint32
	MaxWr      uint32
	MaxSGE     uint32
	SRQLimit   uint32
}

// CreateXSRQ is struct ib_uverbs_create_xsrq: CREATE_SRQ with a type, and
// for XRC SRQs the domain and the CQ their completions go to. The answer
// is CreateSRQResp.
type CreateXSRQ struct {
	Response   uint64
	UserHandle uint64
	SRQType    uint32
	PDHandle   uint32
	MaxWr      uint32
	MaxSGE     uint32
	SRQLimit   uint32
	MaxNumTags uint32
	XRCDHandle uint32
	CQHandle   uint32
}

// SRQ types (enum ib_uverbs_srq_type).
const (
	SRQTypeBasic = 0
	SRQTypeXRC   = 1
	SRQTypeTM    = 2
)

// OpenXRCD is struct ib_uverbs_open_xrcd. FD names the file whose inode
// identifies a domain shared between processes, or is ^0 (-1) for a domain
// of this context alone; OFlags are O_CREAT and O_EXCL.
type OpenXRCD struct {
	Response uint64
	FD       uint32
	OFlags   uint32
}

// OpenXRCDResp is struct ib_uverbs_open_xrcd_resp.
type OpenXRCDResp struct {
	XRCDHandle uint32
}

// CloseXRCD is struct ib_uverbs_close_xrcd.
type CloseXRCD struct {
	XRCDHandle uint32
}

// CreateSRQResp is struct ib_uverbs_create_srq_resp.
type CreateSRQResp struct {
	SRQHandle uint32
	MaxWr     uint32
	MaxSGE    uint32
	SRQN      uint32
}

// ModifySRQ is struct ib_uverbs_modify_srq.
type ModifySRQ struct {
	SRQHandle uint32
	AttrMask  uint32
	MaxWr     uint32
	SRQLimit  uint32
}

// QuerySRQ is struct ib_uverbs_query_srq.
type QuerySRQ struct {
	Response  uint64
	SRQHandle uint32
	Reserved  uint32
}

// QuerySRQResp is struct ib_uverbs_query_srq_resp.
type QuerySRQResp struct {
	MaxWr    uint32
	MaxSGE   uint32
	SRQLimit uint32
	Reserved uint32
}

// DestroySRQ is struct ib_uverbs_destroy_srq.
type DestroySRQ struct {
	Response  uint64
	SRQHandle uint32
	Reserved  uint32
}

// DestroySRQResp is struct ib_uverbs_destroy_srq_resp.
type DestroySRQResp struct {
	EventsReported uint32
}

// AsyncEventDesc is struct ib_uverbs_async_event_desc, read from the async fd.
type AsyncEventDesc struct {
	Element   uint64
	EventType uint32
	Reserved  uint32
}

// CompEventDesc is struct ib_uverbs_comp_event_desc, read from a completion
// channel.
type CompEventDesc struct {
	CQHandle uint64
}

// QP types (enum ib_uverbs_qp_type).
const (
	QPTypeRC        = 2
	QPTypeUC        = 3
	QPTypeUD        = 4
	QPTypeRawPacket = 8
	QPTypeXRCIni    = 9
	QPTypeXRCTgt    = 10
	QPTypeDriver    = 0xff
)

// QP create flags of the ioctl path (enum ib_uverbs_qp_create_flags).
const (
	QPCreateBlockMulticastLoopback = 1 << 1
	QPCreateScatterFCS             = 1 << 8
	QPCreateCVLANStripping         = 1 << 9
	QPCreatePCIWriteEndPadding     = 1 << 11
	QPCreateSQSigAll               = 1 << 12
)

// Modify-QP attribute mask bits (enum ib_uverbs_qp_attr_mask / IBV_QP_*).
const (
	QPAttrState            = 1 << 0
	QPAttrCurState         = 1 << 1
	QPAttrEnSQDAsyncNotify = 1 << 2
	QPAttrAccessFlags      = 1 << 3
	QPAttrPkeyIndex        = 1 << 4
	QPAttrPort             = 1 << 5
	QPAttrQkey             = 1 << 6
	QPAttrAV               = 1 << 7
	QPAttrPathMTU          = 1 << 8
	QPAttrTimeout          = 1 << 9
	QPAttrRetryCnt         = 1 << 10
	QPAttrRNRRetry         = 1 << 11
	QPAttrRQPSN            = 1 << 12
	QPAttrMaxQPRdAtomic    = 1 << 13
	QPAttrAltPath          = 1 << 14
	QPAttrMinRNRTimer      = 1 << 15
	QPAttrSQPSN            = 1 << 16
	QPAttrMaxDestRdAtomic  = 1 << 17
	QPAttrPathMigState     = 1 << 18
	QPAttrCap              = 1 << 19
	QPAttrDestQPN          = 1 << 20
	QPAttrRateLimit        = 1 << 25
)
