package abi

// The RDMA connection manager's user ABI: the write() commands of
// /dev/infiniband/rdma_cm (<rdma/rdma_user_cm.h>, kernel
// drivers/infiniband/core/ucma.c) and the event and port-space numbers of
// <rdma/rdma_cm.h>. The structs are checked against the BTF of the rdma_ucm
// module (Layouts); the enums against the rdma_ucm module's
// rdma_cm_event_type and rdma_ucm_port_space.

// UCMABIVersion is RDMA_USER_CM_ABI_VERSION, exported by the kernel as
// /sys/class/misc/rdma_cm/abi_version and the netlink chardev ABI of
// "rdma_cm". librdmacm accepts UCMMinABIVersion..UCMMaxABIVersion; version 3
// differs only in that it has no INIT_QP_ATTR.
const (
	UCMABIVersion    = 4
	UCMMinABIVersion = 4
	UCMMaxABIVersion = 4
)

// UCMCharDev is the name of the connection manager's misc device (node
// /dev/infiniband/rdma_cm) and its netlink chardev client type.
const UCMCharDev = "rdma_cm"

// ucma write() commands (enum of RDMA_USER_CM_CMD_*).
const (
	UCMCmdCreateID       = 0
	UCMCmdDestroyID      = 1
	UCMCmdBindIP         = 2
	UCMCmdResolveIP      = 3
	UCMCmdResolveRoute   = 4
	UCMCmdQueryRoute     = 5
	UCMCmdConnect        = 6
	UCMCmdListen         = 7
	UCMCmdAccept         = 8
	UCMCmdReject         = 9
	UCMCmdDisconnect     = 10
	UCMCmdInitQPAttr     = 11
	UCMCmdGetEvent       = 12
	UCMCmdGetOption      = 13
	UCMCmdSetOption      = 14
	UCMCmdNotify         = 15
	UCMCmdJoinIPMcast    = 16
	UCMCmdLeaveMcast     = 17
	UCMCmdMigrateID      = 18
	UCMCmdQuery          = 19
	UCMCmdBind           = 20
	UCMCmdResolveAddr    = 21
	UCMCmdJoinMcast      = 22
	UCMCmdResolveIBServ  = 23 // after 6.12; EINVAL on 6.1 and 6.12
	UCMCmdWriteCMEvent   = 24 // after 6.12; EINVAL on 6.1 and 6.12
	UCMCmdCountOn612     = 23 // commands the 6.1 and 6.12 ucma_write tables hold
	UCMMaxPrivateData    = 256
	UCMMaxEventResp      = 336 // sizeof(struct rdma_ucm_event_resp)
	UCMMinEventResp      = 324 // the kernel's minimum GET_EVENT response (before ece)
	UCMQueryPathRecBytes = 72  // sizeof(struct ib_path_rec_data)
)

// Port spaces (enum rdma_ucm_port_space).
const (
	RDMAPSIPoIB = 0x0002
	RDMAPSIB    = 0x013F
	RDMAPSTCP   = 0x0106
	RDMAPSUDP   = 0x0111
)

// Connection manager events (enum rdma_cm_event_type).
const (
	CMEventAddrResolved    = 0
	CMEventAddrError       = 1
	CMEventRouteResolved   = 2
	CMEventRouteError      = 3
	CMEventConnectRequest  = 4
	CMEventConnectResponse = 5
	CMEventConnectError    = 6
	CMEventUnreachable     = 7
	CMEventRejected        = 8
	CMEventEstablished     = 9
	CMEventDisconnected    = 10
	CMEventDeviceRemoval   = 11
	CMEventMulticastJoin   = 12
	CMEventMulticastError  = 13
	CMEventAddrChange      = 14
	CMEventTimewaitExit    = 15
)

// QUERY options (RDMA_USER_CM_QUERY_*).
const (
	UCMQueryAddr = 0
	UCMQueryPath = 1
	UCMQueryGID  = 2
)

// SET_OPTION levels and names (RDMA_OPTION_*).
const (
	RDMAOptionID           = 0
	RDMAOptionIDTOS        = 0 // u8
	RDMAOptionIDReuseAddr  = 1 // int
	RDMAOptionIDAFOnly     = 2 // int
	RDMAOptionIDAckTimeout = 3 // u8
	RDMAOptionIB           = 1
	RDMAOptionIBPath       = 1 // array of ib_path_rec_data
)

// Multicast join flags (RDMA_MC_JOIN_FLAG_*).
const (
	MCJoinFullMember         = 0
	MCJoinSendOnlyFullMember = 1
)

// IB CM reject reasons (enum ib_cm_rej_reason) that reach user space in the
// status of a REJECTED event, and the SIDR reply statuses of an UNREACHABLE
// event on a UD id (enum ib_cm_sidr_status).
const (
	CMRejNoQP                 = 1
	CMRejTimeout              = 4
	CMRejInvalidServiceID     = 8 // nobody listens on the port
	CMRejConsumerDefined      = 28
	CMRejVendorOptionNotSupp  = 35
	CMSIDRUnsupported         = 1
	CMSIDRReject              = 2
	CMSIDRNoQP                = 3
	CMSIDRRedirect            = 4
	CMSIDRUnsupportedVersion  = 5
	RDMAUDPQkey               = 0x01234567 // RDMA_UDP_QKEY: the Q_Key of UDP and IB port-space ids
	RDMAMaxRespRes            = 0xFF       // RDMA_MAX_RESP_RES: "the device maximum"
	RDMAMaxInitDepth          = 0xFF       // RDMA_MAX_INIT_DEPTH: "the device maximum"
	IBEventCommEst            = 4          // IB_EVENT_COMM_EST, for NOTIFY
	MulticastQPN              = 0xFFFFFF   // the destination QPN of a multicast send
	UCMMaxBacklogDefault      = 1024       // /proc/sys/net/rdma_ucm/max_backlog default
	CMAHdrBytes               = 36         // struct cma_hdr the kernel prepends to IP REQs and SIDR REQs
	IBCMREQPrivateDataBytes   = 92         // IB_CM_REQ_PRIVATE_DATA_SIZE
	IBCMREPPrivateDataBytes   = 196        // IB_CM_REP_PRIVATE_DATA_SIZE
	IBCMREJPrivateDataBytes   = 148        // IB_CM_REJ_PRIVATE_DATA_SIZE
	IBCMSIDRREQPrivateDataLen = 216        // IB_CM_SIDR_REQ_PRIVATE_DATA_SIZE
	IBCMSIDRREPPrivateDataLen = 136        // IB_CM_SIDR_REP_PRIVATE_DATA_SIZE
)

// Address families of the sockaddrs the commands carry, and their sizes.
const (
	AFInet         = 2
	AFInet6        = 10
	AFIB           = 27
	SockaddrIn     = 16 // sizeof(struct sockaddr_in)
	SockaddrIn6    = 28 // sizeof(struct sockaddr_in6)
	SockaddrIB     = 48 // sizeof(struct sockaddr_ib)
	SockaddrStoreN = 128
)

// UCMCmdHdr is struct rdma_ucm_cmd_hdr: every write() starts with it. In is
// the size of the command struct after it, Out the size of the response.
type UCMCmdHdr struct {
	Cmd uint32
	In  uint16
	Out uint16
}

// UCMCreateID is struct rdma_ucm_create_id.
type UCMCreateID struct {
	UID      uint64
	Response uint64
	PS       uint16
	QPType   uint8
	Reserved [5]uint8
}

// UCMCreateIDResp is struct rdma_ucm_create_id_resp.
type UCMCreateIDResp struct {
	ID uint32
}

// UCMDestroyID is struct rdma_ucm_destroy_id (also LEAVE_MCAST's request).
type UCMDestroyID struct {
	Response uint64
	ID       uint32
	Reserved uint32
}

// UCMDestroyIDResp is struct rdma_ucm_destroy_id_resp.
type UCMDestroyIDResp struct {
	EventsReported uint32
}

// UCMBindIP is struct rdma_ucm_bind_ip.
type UCMBindIP struct {
	Response uint64
	Addr     [SockaddrIn6]byte
	ID       uint32
}

// UCMBind is struct rdma_ucm_bind.
type UCMBind struct {
	ID       uint32
	AddrSize uint16
	Reserved uint16
	Addr     [SockaddrStoreN]byte
}

// UCMResolveIP is struct rdma_ucm_resolve_ip.
type UCMResolveIP struct {
	SrcAddr   [SockaddrIn6]byte
	DstAddr   [SockaddrIn6]byte
	ID        uint32
	TimeoutMs uint32
}

// UCMResolveAddr is struct rdma_ucm_resolve_addr.
type UCMResolveAddr struct {
	ID        uint32
	TimeoutMs uint32
	SrcSize   uint16
	DstSize   uint16
	Reserved  uint32
	SrcAddr   [SockaddrStoreN]byte
	DstAddr   [SockaddrStoreN]byte
}

// UCMResolveRoute is struct rdma_ucm_resolve_route.
type UCMResolveRoute struct {
	ID        uint32
	TimeoutMs uint32
}

// UCMQuery is struct rdma_ucm_query (QUERY and QUERY_ROUTE).
type UCMQuery struct {
	Response uint64
	ID       uint32
	Option   uint32
}

// UCMQueryAddrResp is struct rdma_ucm_query_addr_resp. NodeGUID holds the
// raw big-endian bytes of the device's GUID; Pkey is big endian.
type UCMQueryAddrResp struct {
	NodeGUID   uint64
	PortNum    uint8
	Reserved   uint8
	Pkey       uint16 // __be16
	SrcSize    uint16
	DstSize    uint16
	SrcAddr    [SockaddrStoreN]byte
	DstAddr    [SockaddrStoreN]byte
	IBDevIndex uint32
	Reserved1  uint32
}

// IBUserPathRec is struct ib_user_path_rec (QUERY_ROUTE).
type IBUserPathRec struct {
	DGID                   [16]uint8
	SGID                   [16]uint8
	DLID                   uint16 // __be16
	SLID                   uint16 // __be16
	RawTraffic             uint32
	FlowLabel              uint32 // __be32
	Reversible             uint32
	MTU                    uint32
	Pkey                   uint16 // __be16
	HopLimit               uint8
	TrafficClass           uint8
	NumbPath               uint8
	SL                     uint8
	MTUSelector            uint8
	RateSelector           uint8
	Rate                   uint8
	PacketLifeTimeSelector uint8
	PacketLifeTime         uint8
	Preference             uint8
}

// UCMQueryRouteResp is struct rdma_ucm_query_route_resp.
type UCMQueryRouteResp struct {
	NodeGUID   uint64
	IBRoute    [2]IBUserPathRec
	SrcAddr    [SockaddrIn6]byte
	DstAddr    [SockaddrIn6]byte
	NumPaths   uint32
	PortNum    uint8
	Reserved   [3]uint8
	IBDevIndex uint32
	Reserved1  uint32
}

// UCMQueryPathResp is struct rdma_ucm_query_path_resp, the header of QUERY
// PATH's reply; NumPaths IBPathRecData records follow it.
type UCMQueryPathResp struct {
	NumPaths uint32
	Reserved uint32
}

// IBPathRecData is struct ib_path_rec_data: PathRec is the packed
// big-endian SA PathRecord.
type IBPathRecData struct {
	Flags    uint32
	Reserved uint32
	PathRec  [64]uint8
}

// UCMConnParam is struct rdma_ucm_conn_param.
type UCMConnParam struct {
	QPNum              uint32
	Qkey               uint32
	PrivateData        [UCMMaxPrivateData]uint8
	PrivateDataLen     uint8
	SRQ                uint8
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        uint8
	RetryCount         uint8
	RNRRetryCount      uint8
	Valid              uint8
}

// UCMUDParam is struct rdma_ucm_ud_param.
type UCMUDParam struct {
	QPNum          uint32
	Qkey           uint32
	AHAttr         AHAttr
	PrivateData    [UCMMaxPrivateData]uint8
	PrivateDataLen uint8
	Reserved       [7]uint8
}

// UCMECE is struct rdma_ucm_ece (enhanced connection establishment).
type UCMECE struct {
	VendorID uint32
	AttrMod  uint32
}

// UCMConnect is struct rdma_ucm_connect.
type UCMConnect struct {
	ConnParam UCMConnParam
	ID        uint32
	Reserved  uint32
	ECE       UCMECE
}

// UCMListen is struct rdma_ucm_listen.
type UCMListen struct {
	ID      uint32
	Backlog uint32
}

// UCMAccept is struct rdma_ucm_accept.
type UCMAccept struct {
	UID       uint64
	ConnParam UCMConnParam
	ID        uint32
	Reserved  uint32
	ECE       UCMECE
}

// UCMReject is struct rdma_ucm_reject.
type UCMReject struct {
	ID             uint32
	PrivateDataLen uint8
	Reason         uint8
	Reserved       [2]uint8
	PrivateData    [UCMMaxPrivateData]uint8
}

// UCMDisconnect is struct rdma_ucm_disconnect.
type UCMDisconnect struct {
	ID uint32
}

// UCMInitQPAttr is struct rdma_ucm_init_qp_attr.
type UCMInitQPAttr struct {
	Response uint64
	ID       uint32
	QPState  uint32
}

// QPAttr is struct ib_uverbs_qp_attr, INIT_QP_ATTR's reply. QPAttrMask
// holds the verbs IB_QP_* bits (QPAttrState ...).
type QPAttr struct {
	QPAttrMask       uint32
	QPState          uint32
	CurQPState       uint32
	PathMTU          uint32
	PathMigState     uint32
	Qkey             uint32
	RQPSN            uint32
	SQPSN            uint32
	DestQPNum        uint32
	QPAccessFlags    uint32
	AHAttr           AHAttr
	AltAHAttr        AHAttr
	MaxSendWr        uint32
	MaxRecvWr        uint32
	MaxSendSGE       uint32
	MaxRecvSGE       uint32
	MaxInlineData    uint32
	PkeyIndex        uint16
	AltPkeyIndex     uint16
	EnSQDAsyncNotify uint8
	SQDraining       uint8
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRNRTimer      uint8
	PortNum          uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
	AltPortNum       uint8
	AltTimeout       uint8
	Reserved         [5]uint8
}

// UCMNotify is struct rdma_ucm_notify.
type UCMNotify struct {
	ID    uint32
	Event uint32
}

// UCMJoinIPMcast is struct rdma_ucm_join_ip_mcast.
type UCMJoinIPMcast struct {
	Response uint64
	UID      uint64
	Addr     [SockaddrIn6]byte
	ID       uint32
}

// UCMJoinMcast is struct rdma_ucm_join_mcast.
type UCMJoinMcast struct {
	Response  uint64
	UID       uint64
	ID        uint32
	AddrSize  uint16
	JoinFlags uint16
	Addr      [SockaddrStoreN]byte
}

// UCMGetEvent is struct rdma_ucm_get_event.
type UCMGetEvent struct {
	Response uint64
}

// UCMEventResp is struct rdma_ucm_event_resp. Param is the union of
// UCMConnParam (RC and connected ids; only its first 271 bytes, without
// Valid) and UCMUDParam (UD ids): decode it with ConnParam or UDParam.
type UCMEventResp struct {
	UID      uint64
	ID       uint32
	Event    uint32
	Status   int32
	Param    [304]uint8
	Reserved uint32
	ECE      UCMECE
}

// UCMSetOption is struct rdma_ucm_set_option.
type UCMSetOption struct {
	OptVal  uint64
	ID      uint32
	Level   uint32
	OptName uint32
	OptLen  uint32
}

// UCMMigrateID is struct rdma_ucm_migrate_id.
type UCMMigrateID struct {
	Response uint64
	ID       uint32
	FD       uint32
}

// UCMMigrateResp is struct rdma_ucm_migrate_resp.
type UCMMigrateResp struct {
	EventsReported uint32
}
