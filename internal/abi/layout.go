package abi

// Layout pairs a Go mirror with the kernel struct it mirrors.
type Layout struct {
	// C is the kernel's struct name, as it appears in BTF.
	C string
	// Go is a zero value of the mirroring Go struct.
	Go any
	// Module names the kernel module whose BTF carries the struct
	// (ib_uverbs, rdma_rxe or mlx5_ib).
	Module string
}

// Layouts lists every Go struct of this package that mirrors a kernel struct.
// The layout tests compare each one's size and field offsets with kernel BTF.
var Layouts = []Layout{
	{"ib_uverbs_ioctl_hdr", IoctlHdr{}, "ib_uverbs"},
	{"ib_uverbs_attr", Attr{}, "ib_uverbs"},
	{"ib_uverbs_gid_entry", GIDEntry{}, "ib_uverbs"},
	{"ib_uverbs_query_port_resp_ex", QueryPortRespEx{}, "ib_uverbs"},
	{"ib_uverbs_cmd_hdr", CmdHdr{}, "ib_uverbs"},
	{"ib_uverbs_ex_cmd_hdr", ExCmdHdr{}, "ib_uverbs"},
	{"ib_uverbs_get_context", GetContext{}, "ib_uverbs"},
	{"ib_uverbs_get_context_resp", GetContextResp{}, "ib_uverbs"},
	{"ib_uverbs_query_device", QueryDevice{}, "ib_uverbs"},
	{"ib_uverbs_query_device_resp", QueryDeviceResp{}, "ib_uverbs"},
	{"ib_uverbs_ex_query_device", ExQueryDevice{}, "ib_uverbs"},
	{"ib_uverbs_odp_caps", ODPCaps{}, "ib_uverbs"},
	{"ib_uverbs_rss_caps", RSSCaps{}, "ib_uverbs"},
	{"ib_uverbs_tm_caps", TMCaps{}, "ib_uverbs"},
	{"ib_uverbs_cq_moderation_caps", CQModerationCaps{}, "ib_uverbs"},
	{"ib_uverbs_ex_query_device_resp", ExQueryDeviceResp{}, "ib_uverbs"},
	{"ib_uverbs_query_port", QueryPort{}, "ib_uverbs"},
	{"ib_uverbs_query_port_resp", QueryPortResp{}, "ib_uverbs"},
	{"ib_uverbs_alloc_pd", AllocPD{}, "ib_uverbs"},
	{"ib_uverbs_alloc_pd_resp", AllocPDResp{}, "ib_uverbs"},
	{"ib_uverbs_dealloc_pd", DeallocPD{}, "ib_uverbs"},
	{"mlx5_ib_alloc_ucontext_req_v2", MLX5AllocUcontextReqV2{}, "mlx5_ib"},
	{"mlx5_ib_alloc_ucontext_resp", MLX5AllocUcontextResp{}, "mlx5_ib"},
}
