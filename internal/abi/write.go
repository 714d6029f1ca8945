package abi

// ABIVersion is IB_USER_VERBS_ABI_VERSION, the core uverbs ABI exported in
// /sys/class/infiniband_verbs/abi_version; rdma-core accepts 3..6.
const (
	ABIVersion    = 6
	MinABIVersion = 3
	MaxABIVersion = 6
)

// Write command framing.
const (
	CmdCommandMask  = 0xff       // IB_USER_VERBS_CMD_COMMAND_MASK
	CmdFlagExtended = 0x80000000 // IB_USER_VERBS_CMD_FLAG_EXTENDED
)

// Write commands (enum ib_uverbs_write_cmds).
const (
	CmdGetContext        = 0
	CmdQueryDevice       = 1
	CmdQueryPort         = 2
	CmdAllocPD           = 3
	CmdDeallocPD         = 4
	CmdCreateAH          = 5
	CmdModifyAH          = 6
	CmdQueryAH           = 7
	CmdDestroyAH         = 8
	CmdRegMR             = 9
	CmdRegSMR            = 10
	CmdReregMR           = 11
	CmdQueryMR           = 12
	CmdDeregMR           = 13
	CmdAllocMW           = 14
	CmdBindMW            = 15
	CmdDeallocMW         = 16
	CmdCreateCompChannel = 17
	CmdCreateCQ          = 18
	CmdResizeCQ          = 19
	CmdDestroyCQ         = 20
	CmdPollCQ            = 21
	CmdPeekCQ            = 22
	CmdReqNotifyCQ       = 23
	CmdCreateQP          = 24
	CmdQueryQP           = 25
	CmdModifyQP          = 26
	CmdDestroyQP         = 27
	CmdPostSend          = 28
	CmdPostRecv          = 29
	CmdAttachMcast       = 30
	CmdDetachMcast       = 31
	CmdCreateSRQ         = 32
	CmdModifySRQ         = 33
	CmdQuerySRQ          = 34
	CmdDestroySRQ        = 35
	CmdPostSRQRecv       = 36
	CmdOpenXRCD          = 37
	CmdCloseXRCD         = 38
	CmdCreateXSRQ        = 39
	CmdOpenQP            = 40
)

// Extended write commands; send them OR'ed with CmdFlagExtended.
const (
	ExCmdQueryDevice      = 1
	ExCmdCreateCQ         = 18
	ExCmdCreateQP         = 24
	ExCmdModifyQP         = 26
	ExCmdCreateFlow       = 50
	ExCmdDestroyFlow      = 51
	ExCmdCreateWQ         = 52
	ExCmdModifyWQ         = 53
	ExCmdDestroyWQ        = 54
	ExCmdCreateRWQIndTbl  = 55
	ExCmdDestroyRWQIndTbl = 56
	ExCmdModifyCQ         = 57
)

// CmdHdr is struct ib_uverbs_cmd_hdr.
type CmdHdr struct {
	Command  uint32
	InWords  uint16
	OutWords uint16
}

// ExCmdHdr is struct ib_uverbs_ex_cmd_hdr, after CmdHdr in extended commands.
type ExCmdHdr struct {
	Response         uint64
	ProviderInWords  uint16
	ProviderOutWords uint16
	CmdHdrReserved   uint32
}

// GetContext is struct ib_uverbs_get_context (driver data follows).
type GetContext struct {
	Response uint64
}

// GetContextResp is struct ib_uverbs_get_context_resp.
type GetContextResp struct {
	AsyncFD        uint32
	NumCompVectors uint32
}

// QueryDevice is struct ib_uverbs_query_device.
type QueryDevice struct {
	Response uint64
}

// QueryDeviceResp is struct ib_uverbs_query_device_resp.
type QueryDeviceResp struct {
	FWVer                 uint64
	NodeGUID              uint64 // __be64: raw network-order bytes
	SysImageGUID          uint64 // __be64: raw network-order bytes
	MaxMRSize             uint64
	PageSizeCap           uint64
	VendorID              uint32
	VendorPartID          uint32
	HWVer                 uint32
	MaxQP                 uint32
	MaxQPWr               uint32
	DeviceCapFlags        uint32
	MaxSGE                uint32
	MaxSGERd              uint32
	MaxCQ                 uint32
	MaxCQE                uint32
	MaxMR                 uint32
	MaxPD                 uint32
	MaxQPRdAtom           uint32
	MaxEERdAtom           uint32
	MaxResRdAtom          uint32
	MaxQPInitRdAtom       uint32
	MaxEEInitRdAtom       uint32
	AtomicCap             uint32
	MaxEE                 uint32
	MaxRDD                uint32
	MaxMW                 uint32
	MaxRawIPv6QP          uint32
	MaxRawEthyQP          uint32
	MaxMcastGrp           uint32
	MaxMcastQPAttach      uint32
	MaxTotalMcastQPAttach uint32
	MaxAH                 uint32
	MaxFMR                uint32
	MaxMapPerFMR          uint32
	MaxSRQ                uint32
	MaxSRQWr              uint32
	MaxSRQSGE             uint32
	MaxPkeys              uint16
	LocalCAAckDelay       uint8
	PhysPortCnt           uint8
	Reserved              [4]uint8
}

// ExQueryDevice is struct ib_uverbs_ex_query_device.
type ExQueryDevice struct {
	CompMask uint32
	Reserved uint32
}

// ODPCaps is struct ib_uverbs_odp_caps.
type ODPCaps struct {
	GeneralCaps      uint64
	PerTransportCaps ODPPerTransportCaps
	Reserved         uint32
}

// ODPPerTransportCaps is the anonymous per_transport_caps member of
// struct ib_uverbs_odp_caps.
type ODPPerTransportCaps struct {
	RCODPCaps uint32
	UCODPCaps uint32
	UDODPCaps uint32
}

// RSSCaps is struct ib_uverbs_rss_caps.
type RSSCaps struct {
	SupportedQPTs              uint32
	MaxRWQIndirectionTables    uint32
	MaxRWQIndirectionTableSize uint32
	Reserved                   uint32
}

// TMCaps is struct ib_uverbs_tm_caps.
type TMCaps struct {
	MaxRndvHdrSize uint32
	MaxNumTags     uint32
	Flags          uint32
	MaxOps         uint32
	MaxSGE         uint32
	Reserved       uint32
}

// CQModerationCaps is struct ib_uverbs_cq_moderation_caps.
type CQModerationCaps struct {
	MaxCQModerationCount  uint16
	MaxCQModerationPeriod uint16
	Reserved              uint32
}

// ExQueryDeviceResp is struct ib_uverbs_ex_query_device_resp.
type ExQueryDeviceResp struct {
	Base             QueryDeviceResp
	CompMask         uint32
	ResponseLength   uint32
	ODPCaps          ODPCaps
	TimestampMask    uint64
	HCACoreClock     uint64 // kHz
	DeviceCapFlagsEx uint64
	RSSCaps          RSSCaps
	MaxWQTypeRQ      uint32
	RawPacketCaps    uint32
	TMCaps           TMCaps
	CQModerationCaps CQModerationCaps
	MaxDMSize        uint64
	XRCODPCaps       uint32
	Reserved         uint32
}

// QueryPort is struct ib_uverbs_query_port.
type QueryPort struct {
	Response uint64
	PortNum  uint8
	Reserved [7]uint8
}

// QueryPortResp is struct ib_uverbs_query_port_resp.
type QueryPortResp struct {
	PortCapFlags  uint32
	MaxMsgSz      uint32
	BadPkeyCntr   uint32
	QkeyViolCntr  uint32
	GIDTblLen     uint32
	PkeyTblLen    uint16
	LID           uint16
	SMLID         uint16
	State         uint8
	MaxMTU        uint8
	ActiveMTU     uint8
	LMC           uint8
	MaxVLNum      uint8
	SMSL          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	ActiveWidth   uint8
	ActiveSpeed   uint8
	PhysState     uint8
	LinkLayer     uint8
	Flags         uint8
	Reserved      uint8
}

// AllocPD is struct ib_uverbs_alloc_pd.
type AllocPD struct {
	Response uint64
}

// AllocPDResp is struct ib_uverbs_alloc_pd_resp.
type AllocPDResp struct {
	PDHandle uint32
}

// DeallocPD is struct ib_uverbs_dealloc_pd.
type DeallocPD struct {
	PDHandle uint32
}

// Port link layers reported by QUERY_PORT (IB_LINK_LAYER_*).
const (
	LinkLayerUnspecified = 0
	LinkLayerInfiniBand  = 1
	LinkLayerEthernet    = 2
)

// Port states reported by QUERY_PORT, netlink and sysfs (enum
// ib_port_state).
const (
	PortNOP         = 0
	PortDown        = 1
	PortInit        = 2
	PortArmed       = 3
	PortActive      = 4
	PortActiveDefer = 5
)

// Physical port states reported by QUERY_PORT, netlink and sysfs (enum
// ib_port_phys_state).
const (
	PhysSleep                     = 1
	PhysPolling                   = 2
	PhysDisabled                  = 3
	PhysPortConfigurationTraining = 4
	PhysLinkUp                    = 5
	PhysLinkErrorRecovery         = 6
	PhysPhyTest                   = 7
)

// Query-port flags (enum ib_uverbs_query_port_flags).
const PortFlagGRHRequired = 1 << 1

// Extended query-device response comp_mask is filled by the kernel; its
// response_length says how much of the response it wrote.
