package rdmanl

// Netlink numbers of the RDMA subsystem: <rdma/rdma_netlink.h> enum
// rdma_nldev_command, enum rdma_nldev_attr, enum rdma_nl_notify_event_type,
// enum rdma_restrack_type and enum rdma_nl_counter_mode/mask, plus the
// generic ones of <linux/netlink.h>. They are netlink, not uverbs, so their
// one home is here rather than internal/abi; consts_test.go checks every
// kernel enum value against the BTF of ib_core in Debian 12's 6.1 and 6.12
// kernels (internal/abi/testdata/btf). Numbers only 6.12 has say so.
const (
	NETLINK_RDMA = 20 // socket protocol

	RDMA_NL_NLDEV = 5 // netlink client of the RDMA core

	// Multicast groups (enum rdma_nl_groups); NOTIFY carries
	// RDMA_NLDEV_CMD_MONITOR events (6.12, not 6.1).
	RDMA_NL_GROUP_IWPM   = 2
	RDMA_NL_GROUP_LS     = 3
	RDMA_NL_GROUP_NOTIFY = 4

	RDMA_NLDEV_CMD_GET             = 1
	RDMA_NLDEV_CMD_SET             = 2
	RDMA_NLDEV_CMD_NEWLINK         = 3
	RDMA_NLDEV_CMD_DELLINK         = 4
	RDMA_NLDEV_CMD_PORT_GET        = 5
	RDMA_NLDEV_CMD_SYS_GET         = 6
	RDMA_NLDEV_CMD_SYS_SET         = 7
	RDMA_NLDEV_CMD_RES_GET         = 9
	RDMA_NLDEV_CMD_RES_QP_GET      = 10
	RDMA_NLDEV_CMD_RES_CM_ID_GET   = 11
	RDMA_NLDEV_CMD_RES_CQ_GET      = 12
	RDMA_NLDEV_CMD_RES_MR_GET      = 13
	RDMA_NLDEV_CMD_RES_PD_GET      = 14
	RDMA_NLDEV_CMD_GET_CHARDEV     = 15
	RDMA_NLDEV_CMD_STAT_SET        = 16
	RDMA_NLDEV_CMD_STAT_GET        = 17
	RDMA_NLDEV_CMD_STAT_DEL        = 18
	RDMA_NLDEV_CMD_RES_QP_GET_RAW  = 19
	RDMA_NLDEV_CMD_RES_CQ_GET_RAW  = 20
	RDMA_NLDEV_CMD_RES_MR_GET_RAW  = 21
	RDMA_NLDEV_CMD_RES_CTX_GET     = 22
	RDMA_NLDEV_CMD_RES_SRQ_GET     = 23
	RDMA_NLDEV_CMD_STAT_GET_STATUS = 24
	RDMA_NLDEV_CMD_RES_SRQ_GET_RAW = 25 // 6.12
	RDMA_NLDEV_CMD_NEWDEV          = 26 // 6.12
	RDMA_NLDEV_CMD_DELDEV          = 27 // 6.12
	RDMA_NLDEV_CMD_MONITOR         = 28 // 6.12

	RDMA_NLDEV_ATTR_DEV_INDEX                  = 1
	RDMA_NLDEV_ATTR_DEV_NAME                   = 2
	RDMA_NLDEV_ATTR_PORT_INDEX                 = 3
	RDMA_NLDEV_ATTR_CAP_FLAGS                  = 4
	RDMA_NLDEV_ATTR_FW_VERSION                 = 5
	RDMA_NLDEV_ATTR_NODE_GUID                  = 6
	RDMA_NLDEV_ATTR_SYS_IMAGE_GUID             = 7
	RDMA_NLDEV_ATTR_SUBNET_PREFIX              = 8
	RDMA_NLDEV_ATTR_LID                        = 9
	RDMA_NLDEV_ATTR_SM_LID                     = 10
	RDMA_NLDEV_ATTR_LMC                        = 11
	RDMA_NLDEV_ATTR_PORT_STATE                 = 12
	RDMA_NLDEV_ATTR_PORT_PHYS_STATE            = 13
	RDMA_NLDEV_ATTR_DEV_NODE_TYPE              = 14
	RDMA_NLDEV_ATTR_RES_SUMMARY                = 15
	RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY          = 16
	RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME     = 17
	RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR     = 18
	RDMA_NLDEV_ATTR_RES_QP                     = 19
	RDMA_NLDEV_ATTR_RES_QP_ENTRY               = 20
	RDMA_NLDEV_ATTR_RES_LQPN                   = 21
	RDMA_NLDEV_ATTR_RES_RQPN                   = 22
	RDMA_NLDEV_ATTR_RES_RQ_PSN                 = 23
	RDMA_NLDEV_ATTR_RES_SQ_PSN                 = 24
	RDMA_NLDEV_ATTR_RES_PATH_MIG_STATE         = 25
	RDMA_NLDEV_ATTR_RES_TYPE                   = 26
	RDMA_NLDEV_ATTR_RES_STATE                  = 27
	RDMA_NLDEV_ATTR_RES_PID                    = 28
	RDMA_NLDEV_ATTR_RES_KERN_NAME              = 29
	RDMA_NLDEV_ATTR_RES_CM_ID                  = 30
	RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY            = 31
	RDMA_NLDEV_ATTR_RES_PS                     = 32
	RDMA_NLDEV_ATTR_RES_SRC_ADDR               = 33
	RDMA_NLDEV_ATTR_RES_DST_ADDR               = 34
	RDMA_NLDEV_ATTR_RES_CQ                     = 35
	RDMA_NLDEV_ATTR_RES_CQ_ENTRY               = 36
	RDMA_NLDEV_ATTR_RES_CQE                    = 37
	RDMA_NLDEV_ATTR_RES_USECNT                 = 38
	RDMA_NLDEV_ATTR_RES_POLL_CTX               = 39
	RDMA_NLDEV_ATTR_RES_MR                     = 40
	RDMA_NLDEV_ATTR_RES_MR_ENTRY               = 41
	RDMA_NLDEV_ATTR_RES_RKEY                   = 42
	RDMA_NLDEV_ATTR_RES_LKEY                   = 43
	RDMA_NLDEV_ATTR_RES_IOVA                   = 44
	RDMA_NLDEV_ATTR_RES_MRLEN                  = 45
	RDMA_NLDEV_ATTR_RES_PD                     = 46
	RDMA_NLDEV_ATTR_RES_PD_ENTRY               = 47
	RDMA_NLDEV_ATTR_RES_LOCAL_DMA_LKEY         = 48
	RDMA_NLDEV_ATTR_RES_UNSAFE_GLOBAL_RKEY     = 49
	RDMA_NLDEV_ATTR_NDEV_INDEX                 = 50
	RDMA_NLDEV_ATTR_NDEV_NAME                  = 51
	RDMA_NLDEV_ATTR_DRIVER                     = 52
	RDMA_NLDEV_ATTR_DRIVER_ENTRY               = 53
	RDMA_NLDEV_ATTR_DRIVER_STRING              = 54
	RDMA_NLDEV_ATTR_DRIVER_PRINT_TYPE          = 55
	RDMA_NLDEV_ATTR_DRIVER_S32                 = 56
	RDMA_NLDEV_ATTR_DRIVER_U32                 = 57
	RDMA_NLDEV_ATTR_DRIVER_S64                 = 58
	RDMA_NLDEV_ATTR_DRIVER_U64                 = 59
	RDMA_NLDEV_ATTR_RES_PDN                    = 60
	RDMA_NLDEV_ATTR_RES_CQN                    = 61
	RDMA_NLDEV_ATTR_RES_MRN                    = 62
	RDMA_NLDEV_ATTR_RES_CM_IDN                 = 63
	RDMA_NLDEV_ATTR_RES_CTXN                   = 64
	RDMA_NLDEV_ATTR_LINK_TYPE                  = 65
	RDMA_NLDEV_SYS_ATTR_NETNS_MODE             = 66
	RDMA_NLDEV_ATTR_DEV_PROTOCOL               = 67
	RDMA_NLDEV_NET_NS_FD                       = 68
	RDMA_NLDEV_ATTR_CHARDEV_TYPE               = 69
	RDMA_NLDEV_ATTR_CHARDEV_NAME               = 70
	RDMA_NLDEV_ATTR_CHARDEV_ABI                = 71
	RDMA_NLDEV_ATTR_CHARDEV                    = 72
	RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID           = 73
	RDMA_NLDEV_ATTR_STAT_MODE                  = 74
	RDMA_NLDEV_ATTR_STAT_RES                   = 75
	RDMA_NLDEV_ATTR_STAT_AUTO_MODE_MASK        = 76
	RDMA_NLDEV_ATTR_STAT_COUNTER               = 77
	RDMA_NLDEV_ATTR_STAT_COUNTER_ENTRY         = 78
	RDMA_NLDEV_ATTR_STAT_COUNTER_ID            = 79
	RDMA_NLDEV_ATTR_STAT_HWCOUNTERS            = 80
	RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY       = 81
	RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME  = 82
	RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE = 83
	RDMA_NLDEV_ATTR_DEV_DIM                    = 84
	RDMA_NLDEV_ATTR_RES_RAW                    = 85
	RDMA_NLDEV_ATTR_RES_CTX                    = 86
	RDMA_NLDEV_ATTR_RES_CTX_ENTRY              = 87
	RDMA_NLDEV_ATTR_RES_SRQ                    = 88
	RDMA_NLDEV_ATTR_RES_SRQ_ENTRY              = 89
	RDMA_NLDEV_ATTR_RES_SRQN                   = 90
	RDMA_NLDEV_ATTR_MIN_RANGE                  = 91
	RDMA_NLDEV_ATTR_MAX_RANGE                  = 92
	RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK           = 93
	RDMA_NLDEV_ATTR_STAT_HWCOUNTER_INDEX       = 94
	RDMA_NLDEV_ATTR_STAT_HWCOUNTER_DYNAMIC     = 95
	RDMA_NLDEV_SYS_ATTR_PRIVILEGED_QKEY_MODE   = 96
	RDMA_NLDEV_ATTR_DRIVER_DETAILS             = 97
	RDMA_NLDEV_ATTR_RES_SUBTYPE                = 98
	RDMA_NLDEV_ATTR_DEV_TYPE                   = 99  // 6.12
	RDMA_NLDEV_ATTR_PARENT_NAME                = 100 // 6.12
	RDMA_NLDEV_ATTR_NAME_ASSIGN_TYPE           = 101 // 6.12
	RDMA_NLDEV_ATTR_EVENT_TYPE                 = 102 // 6.12
	RDMA_NLDEV_SYS_ATTR_MONITOR_MODE           = 103 // 6.12

	RDMA_REGISTER_EVENT      = 0 // 6.12
	RDMA_UNREGISTER_EVENT    = 1 // 6.12
	RDMA_NETDEV_ATTACH_EVENT = 2 // 6.12
	RDMA_NETDEV_DETACH_EVENT = 3 // 6.12

	RDMA_RESTRACK_PD      = 0
	RDMA_RESTRACK_CQ      = 1
	RDMA_RESTRACK_QP      = 2
	RDMA_RESTRACK_CM_ID   = 3
	RDMA_RESTRACK_MR      = 4
	RDMA_RESTRACK_CTX     = 5
	RDMA_RESTRACK_COUNTER = 6
	RDMA_RESTRACK_SRQ     = 7

	RDMA_COUNTER_MODE_NONE    = 0
	RDMA_COUNTER_MODE_AUTO    = 1
	RDMA_COUNTER_MODE_MANUAL  = 2
	RDMA_COUNTER_MASK_QP_TYPE = 1
	RDMA_COUNTER_MASK_PID     = 2
)

// Generic netlink message numbers and flags from <linux/netlink.h>.
const (
	nlmsgHdrLen = 16 // struct nlmsghdr
	nlaHdrLen   = 4  // struct nlattr
	nlaAlignTo  = 4

	NLMSG_NOOP    = 1
	NLMSG_ERROR   = 2
	NLMSG_DONE    = 3
	NLMSG_OVERRUN = 4

	NLM_F_REQUEST   = 0x1
	NLM_F_MULTI     = 0x2
	NLM_F_ACK       = 0x4
	NLM_F_DUMP_INTR = 0x10
	NLM_F_DUMP      = 0x300 // NLM_F_ROOT | NLM_F_MATCH

	NLM_F_CAPPED   = 0x100 // in an NLMSG_ERROR: the request was not echoed
	NLM_F_ACK_TLVS = 0x200 // in an NLMSG_ERROR: extended-ack attributes follow

	NLMSGERR_ATTR_MSG = 1 // string: the kernel's explanation of the error

	nlaTypeMask = 0x3fff // nla_type without NLA_F_NESTED and NLA_F_NET_BYTEORDER
)

// MsgType is RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, op): the nlmsg_type of an nldev
// request or reply.
func MsgType(op uint16) uint16 { return RDMA_NL_NLDEV<<10 + op }

// Driver IDs from enum rdma_driver_id (<rdma/ib_user_ioctl_verbs.h>), for
// naming a device's driver when sysfs has no driver link. RXE is 14, not 15:
// IRDMA aliases I40IW at 9.
var driverNames = map[uint32]string{
	1: "mlx5", 2: "mlx4", 3: "cxgb3", 4: "cxgb4", 5: "mthca", 6: "bnxt_re", 7: "ocrdma", 8: "nes",
	9: "irdma", 10: "vmw_pvrdma", 11: "qedr", 12: "hns", 13: "usnic", 14: "rxe", 15: "hfi1",
	16: "qib", 17: "efa", 18: "siw", 19: "erdma", 20: "mana", 21: "ionic",
}

// DriverName names a UVERBS_DRIVER_ID value the way the kernel's
// RDMA_DRIVER_* constant does, lower case ("rxe" for 14); "" if unknown.
func DriverName(id uint32) string { return driverNames[id] }
