package abi

// RDMA_VERBS_IOCTL is _IOWR(RDMA_IOCTL_MAGIC=0x1b, 1, struct ib_uverbs_ioctl_hdr).
const VerbsIoctl = 0xc0181b01

// Attribute flags (ib_uverbs_attr.flags).
const (
	AttrFlagMandatory   = 1 // UVERBS_ATTR_F_MANDATORY
	AttrFlagValidOutput = 2 // UVERBS_ATTR_F_VALID_OUTPUT, set by the kernel
)

// Driver-namespace attributes shared by every method: the provider's udata.
const (
	AttrUHWIn  = 0x1000 // UVERBS_ATTR_UHW_IN
	AttrUHWOut = 0x1001 // UVERBS_ATTR_UHW_OUT
)

// IDNamespaceMask selects the driver namespace bit of object, method and
// attribute IDs (UVERBS_ID_NS_MASK).
const IDNamespaceMask = 0xf000

// IoctlHdr is struct ib_uverbs_ioctl_hdr; the attributes follow it.
type IoctlHdr struct {
	Length    uint16
	ObjectID  uint16
	MethodID  uint16
	NumAttrs  uint16
	Reserved1 uint64
	DriverID  uint32
	Reserved2 uint32
}

// Attr is struct ib_uverbs_attr.
type Attr struct {
	AttrID uint16
	Len    uint16
	Flags  uint16
	// AttrData is the attr_data union: enum_data.elem_id in the low byte for
	// ENUM_IN attributes, otherwise zero.
	AttrData uint16
	// Data is an inline value (len <= 8 for PTR_IN, CONST_IN, handles, fds) or
	// a user pointer.
	Data uint64
}

// Objects (enum uverbs_default_objects).
const (
	ObjectDevice      = 0
	ObjectPD          = 1
	ObjectCompChannel = 2
	ObjectCQ          = 3
	ObjectQP          = 4
	ObjectSRQ         = 5
	ObjectAH          = 6
	ObjectMR          = 7
	ObjectMW          = 8
	ObjectFlow        = 9
	ObjectXRCD        = 10
	ObjectRWQIndTbl   = 11
	ObjectWQ          = 12
	ObjectFlowAction  = 13
	ObjectDM          = 14
	ObjectCounters    = 15
	ObjectAsyncEvent  = 16
)

// Methods of ObjectDevice (enum uverbs_methods_device) and their attributes.
const (
	MethodInvokeWrite   = 0
	MethodInfoHandles   = 1
	MethodQueryPort     = 2
	MethodGetContext    = 3
	MethodQueryContext  = 4
	MethodQueryGIDTable = 5
	MethodQueryGIDEntry = 6

	AttrCoreIn   = 0 // UVERBS_ATTR_CORE_IN
	AttrCoreOut  = 1 // UVERBS_ATTR_CORE_OUT
	AttrWriteCmd = 2 // UVERBS_ATTR_WRITE_CMD

	AttrQueryPortPortNum = 0
	AttrQueryPortResp    = 1

	AttrGetContextNumCompVectors = 0
	AttrGetContextCoreSupport    = 1

	AttrQueryContextNumCompVectors = 0
	AttrQueryContextCoreSupport    = 1

	AttrQueryGIDTableEntrySize      = 0
	AttrQueryGIDTableFlags          = 1
	AttrQueryGIDTableRespEntries    = 2
	AttrQueryGIDTableRespNumEntries = 3

	AttrQueryGIDEntryPort      = 0
	AttrQueryGIDEntryGIDIndex  = 1
	AttrQueryGIDEntryFlags     = 2
	AttrQueryGIDEntryRespEntry = 3
)

// ObjectAsyncEvent.
const (
	MethodAsyncEventAlloc       = 0
	AttrAsyncEventAllocFDHandle = 0
)

// ObjectPD, ObjectAH, ObjectMW, ObjectXRCD: destroy is method 0, handle attr 0.
const (
	MethodPDDestroy       = 0
	AttrDestroyPDHandle   = 0
	MethodAHDestroy       = 0
	AttrDestroyAHHandle   = 0
	MethodMWDestroy       = 0
	AttrDestroyMWHandle   = 0
	MethodXRCDDestroy     = 0
	AttrDestroyXRCDHandle = 0
)

// ObjectMR.
const (
	MethodDMMRReg       = 0
	MethodMRDestroy     = 1
	MethodAdviseMR      = 2
	MethodQueryMR       = 3
	MethodRegDmabufMR   = 4
	AttrDestroyMRHandle = 0

	AttrRegDmabufMRHandle      = 0
	AttrRegDmabufMRPDHandle    = 1
	AttrRegDmabufMROffset      = 2
	AttrRegDmabufMRLength      = 3
	AttrRegDmabufMRIOVA        = 4
	AttrRegDmabufMRFD          = 5
	AttrRegDmabufMRAccessFlags = 6
	AttrRegDmabufMRRespLkey    = 7
	AttrRegDmabufMRRespRkey    = 8

	AttrQueryMRHandle     = 0
	AttrQueryMRRespLkey   = 1
	AttrQueryMRRespRkey   = 2
	AttrQueryMRRespLength = 3
	AttrQueryMRRespIOVA   = 4
)

// ObjectCQ.
const (
	MethodCQCreate  = 0
	MethodCQDestroy = 1

	AttrCreateCQHandle      = 0
	AttrCreateCQCQE         = 1
	AttrCreateCQUserHandle  = 2
	AttrCreateCQCompChannel = 3
	AttrCreateCQCompVector  = 4
	AttrCreateCQFlags       = 5
	AttrCreateCQRespCQE     = 6
	AttrCreateCQEventFD     = 7

	AttrDestroyCQHandle = 0
	AttrDestroyCQResp   = 1
)

// ObjectQP.
const (
	MethodQPCreate  = 0
	MethodQPDestroy = 1

	AttrCreateQPHandle         = 0
	AttrCreateQPXRCDHandle     = 1
	AttrCreateQPPDHandle       = 2
	AttrCreateQPSRQHandle      = 3
	AttrCreateQPSendCQHandle   = 4
	AttrCreateQPRecvCQHandle   = 5
	AttrCreateQPIndTableHandle = 6
	AttrCreateQPUserHandle     = 7
	AttrCreateQPCap            = 8
	AttrCreateQPType           = 9
	AttrCreateQPFlags          = 10
	AttrCreateQPSourceQPN      = 11
	AttrCreateQPEventFD        = 12
	AttrCreateQPRespCap        = 13
	AttrCreateQPRespQPNum      = 14

	AttrDestroyQPHandle = 0
	AttrDestroyQPResp   = 1
)

// ObjectSRQ.
const (
	MethodSRQCreate  = 0
	MethodSRQDestroy = 1

	AttrCreateSRQHandle     = 0
	AttrCreateSRQPDHandle   = 1
	AttrCreateSRQXRCDHandle = 2
	AttrCreateSRQCQHandle   = 3
	AttrCreateSRQUserHandle = 4
	AttrCreateSRQMaxWR      = 5
	AttrCreateSRQMaxSGE     = 6
	AttrCreateSRQLimit      = 7
	AttrCreateSRQMaxNumTags = 8
	AttrCreateSRQType       = 9
	AttrCreateSRQEventFD    = 10
	AttrCreateSRQRespMaxWR  = 11
	AttrCreateSRQRespMaxSGE = 12
	AttrCreateSRQRespSRQNum = 13

	AttrDestroySRQHandle = 0
	AttrDestroySRQResp   = 1
)

// DriverID is enum rdma_driver_id: the value every ioctl header must carry.
type DriverID uint32

// Driver IDs. Counting enum lines by hand goes wrong here: IRDMA aliases
// I40IW, so RXE is 14, not 15.
const (
	DriverUnknown   DriverID = 0
	DriverMLX5      DriverID = 1
	DriverMLX4      DriverID = 2
	DriverCXGB3     DriverID = 3
	DriverCXGB4     DriverID = 4
	DriverMTHCA     DriverID = 5
	DriverBNXTRE    DriverID = 6
	DriverOCRDMA    DriverID = 7
	DriverNES       DriverID = 8
	DriverI40IW     DriverID = 9
	DriverIRDMA     DriverID = 9
	DriverVMWPVRDMA DriverID = 10
	DriverQEDR      DriverID = 11
	DriverHNS       DriverID = 12
	DriverUSNIC     DriverID = 13
	DriverRXE       DriverID = 14
	DriverHFI1      DriverID = 15
	DriverQIB       DriverID = 16
	DriverEFA       DriverID = 17
	DriverSIW       DriverID = 18
	DriverERDMA     DriverID = 19
	DriverMANA      DriverID = 20
)

// GID types (enum ib_uverbs_gid_type).
const (
	GIDTypeIB     = 0
	GIDTypeRoCEv1 = 1
	GIDTypeRoCEv2 = 2
)

// GIDEntry is struct ib_uverbs_gid_entry.
type GIDEntry struct {
	GID           [2]uint64 // raw bytes of the GID, in network order in memory
	GIDIndex      uint32
	PortNum       uint32
	GIDType       uint32
	NetdevIfindex uint32
}

// QueryPortRespEx is struct ib_uverbs_query_port_resp_ex, the ioctl
// QUERY_PORT answer. 6.12 took four of 6.1's six reserved bytes for
// active_speed_ex; 6.1 leaves them zero.
type QueryPortRespEx struct {
	LegacyResp    QueryPortResp
	PortCapFlags2 uint16
	Reserved      [2]uint8
	ActiveSpeedEx uint32
}

// GetContext core-support bits (UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT).
const CoreSupportOptionalMRAccess = 1
