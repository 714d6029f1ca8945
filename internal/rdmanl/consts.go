package rdmanl

// Netlink numbers used here, from <linux/netlink.h> and <rdma/rdma_netlink.h>
// (the 6.1 UAPI headers, as Debian 12's linux-libc-dev ships them). They
// are netlink, not uverbs, so they live here rather than in internal/abi.
const (
	NETLINK_RDMA = 20 // socket protocol

	RDMA_NL_NLDEV = 5 // netlink client of the RDMA core

	RDMA_NLDEV_CMD_GET         = 1
	RDMA_NLDEV_CMD_PORT_GET    = 5
	RDMA_NLDEV_CMD_SYS_GET     = 6
	RDMA_NLDEV_CMD_GET_CHARDEV = 15

	RDMA_NLDEV_ATTR_DEV_INDEX        = 1  // u32
	RDMA_NLDEV_ATTR_DEV_NAME         = 2  // string
	RDMA_NLDEV_ATTR_PORT_INDEX       = 3  // u32; in the device dump: the number of ports
	RDMA_NLDEV_ATTR_FW_VERSION       = 5  // string
	RDMA_NLDEV_ATTR_NODE_GUID        = 6  // u64, host order
	RDMA_NLDEV_ATTR_SYS_IMAGE_GUID   = 7  // u64, host order
	RDMA_NLDEV_ATTR_DEV_NODE_TYPE    = 14 // u8, enum rdma_node_type
	RDMA_NLDEV_ATTR_NDEV_INDEX       = 50 // u32
	RDMA_NLDEV_ATTR_NDEV_NAME        = 51 // string
	RDMA_NLDEV_SYS_ATTR_NETNS_MODE   = 66 // u8
	RDMA_NLDEV_ATTR_DEV_PROTOCOL     = 67 // string
	RDMA_NLDEV_ATTR_CHARDEV_TYPE     = 69 // string
	RDMA_NLDEV_ATTR_CHARDEV_NAME     = 70 // string
	RDMA_NLDEV_ATTR_CHARDEV_ABI      = 71 // u64; low 32 bits: the driver's uverbs ABI
	RDMA_NLDEV_ATTR_CHARDEV          = 72 // u64, huge_encode_dev format
	RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID = 73 // u32, enum rdma_driver_id
	RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK = 93 // u8
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
