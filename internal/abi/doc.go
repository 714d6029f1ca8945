// Package abi is the one home of every kernel number goverbs uses: the uverbs
// ioctl object, method and attribute IDs, the write() command numbers, the
// driver IDs, and Go mirrors of the kernel's UAPI structs.
//
// The values come from the kernel's UAPI headers (<rdma/ib_user_verbs.h>,
// <rdma/ib_user_ioctl_cmds.h>, <rdma/ib_user_ioctl_verbs.h>,
// <rdma/rdma_user_rxe.h>, <rdma/mlx5-abi.h>) of the Linux 6.1 ABI, which is
// additive-only. Every struct listed in Layouts is checked field by field
// against the kernel's own BTF: offline against BTF extracted from Debian's
// 6.1 and 6.12 modules (testdata/btf), and live against /sys/kernel/btf inside
// the test VM. Nothing outside this package hard-codes an ID or an offset.
//
// Go field names are the C member names in CamelCase (case and underscores are
// ignored when the layout test matches them), so a field can be found in the
// kernel header by its name. Multi-byte fields are host (little) endian unless
// the C type is __be*, in which case the Go field holds the raw big-endian
// bytes as a uint and its name or comment says so.
package abi
