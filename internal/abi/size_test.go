package abi

import (
	"testing"
	"unsafe"
)

// TestSizes pins the sizes sizeof gives against the 6.1 UAPI headers (and
// rdma-core 44's), so a mistake shows up even where no BTF is at hand.
func TestSizes(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  uintptr
		want uintptr
	}{
		{"ib_uverbs_ioctl_hdr", unsafe.Sizeof(IoctlHdr{}), 24},
		{"ib_uverbs_attr", unsafe.Sizeof(Attr{}), 16},
		{"ib_uverbs_query_device_resp", unsafe.Sizeof(QueryDeviceResp{}), 176},
		{"ib_uverbs_ex_query_device_resp", unsafe.Sizeof(ExQueryDeviceResp{}), 304},
		{"ib_uverbs_query_port_resp", unsafe.Sizeof(QueryPortResp{}), 40},
		{"ib_uverbs_query_port_resp_ex", unsafe.Sizeof(QueryPortRespEx{}), 48},
		{"ib_uverbs_gid_entry", unsafe.Sizeof(GIDEntry{}), 32},
		{"ib_uverbs_wc", unsafe.Sizeof(WC{}), 48},
		{"ib_uverbs_create_qp", unsafe.Sizeof(CreateQP{}), 56},
		{"ib_uverbs_create_qp_resp", unsafe.Sizeof(CreateQPResp{}), 32},
		{"ib_uverbs_modify_qp", unsafe.Sizeof(ModifyQP{}), 112},
		{"ib_uverbs_query_qp_resp", unsafe.Sizeof(QueryQPResp{}), 128},
		{"ib_uverbs_send_wr", unsafe.Sizeof(SendWR{}), 56},
		{"ib_uverbs_create_ah", unsafe.Sizeof(CreateAH{}), 56},
		{"ib_uverbs_create_cq", unsafe.Sizeof(CreateCQ{}), 32},
		{"ib_uverbs_reg_mr", unsafe.Sizeof(RegMR{}), 40},
		{"rxe_queue_buf", unsafe.Sizeof(RXEQueueBuf{}), 384},
		{"rxe_send_wqe", unsafe.Sizeof(RXESendWQE{}), 208},
		{"rxe_recv_wqe", unsafe.Sizeof(RXERecvWQE{}), 40},
		{"rxe_av", unsafe.Sizeof(RXEAV{}), 88},
		{"rxe_send_wr", unsafe.Sizeof(RXESendWR{}), 144},
		{"mlx5_ib_alloc_ucontext_req_v2", unsafe.Sizeof(MLX5AllocUcontextReqV2{}), 32},
		{"mlx5_ib_alloc_ucontext_resp", unsafe.Sizeof(MLX5AllocUcontextResp{}), 72},
		{"mlx5_ib_create_cq", unsafe.Sizeof(MLX5CreateCQ{}), 32},
		{"mlx5_ib_create_cq_resp", unsafe.Sizeof(MLX5CreateCQResp{}), 8},
		{"mlx5_ib_create_qp", unsafe.Sizeof(MLX5CreateQP{}), 56},
		{"mlx5_ib_create_qp_resp", unsafe.Sizeof(MLX5CreateQPResp{}), 40},
		{"mlx5_ib_create_srq", unsafe.Sizeof(MLX5CreateSRQ{}), 32},
		{"ib_uverbs_create_xsrq", unsafe.Sizeof(CreateXSRQ{}), 48},
		{"ib_uverbs_open_xrcd", unsafe.Sizeof(OpenXRCD{}), 16},
		{"ib_uverbs_open_xrcd_resp", unsafe.Sizeof(OpenXRCDResp{}), 4},
		{"ib_uverbs_close_xrcd", unsafe.Sizeof(CloseXRCD{}), 4},
		{"mlx5_ib_create_ah_resp", unsafe.Sizeof(MLX5CreateAHResp{}), 16},
		{"mlx5_wqe_ctrl_seg", unsafe.Sizeof(MLX5WQECtrlSeg{}), 16},
		{"mlx5_wqe_av", unsafe.Sizeof(MLX5AV{}), 48},
		{"mlx5_wqe_atomic_seg", unsafe.Sizeof(MLX5WQEAtomicSeg{}), 16},
		{"mlx5_wqe_umr_ctrl_seg", unsafe.Sizeof(MLX5WQEUMRCtrlSeg{}), 48},
		{"mlx5_wqe_mkey_context_seg", unsafe.Sizeof(MLX5WQEMkeyContextSeg{}), 64},
	} {
		if tc.got != tc.want {
			t.Errorf("sizeof(%s) = %d, want %d", tc.name, tc.got, tc.want)
		}
	}
	if off := unsafe.Offsetof(RXESendWQE{}.IOVA); off != 152 {
		t.Errorf("rxe_send_wqe.iova at %d, want 152", off)
	}
	if off := unsafe.Offsetof(RXESendWQE{}.DMA); off != 184 {
		t.Errorf("rxe_send_wqe.dma at %d, want 184", off)
	}
	if off := unsafe.Offsetof(RXEQueueBuf{}.ConsumerIndex); off != 256 {
		t.Errorf("rxe_queue_buf.consumer_index at %d, want 256", off)
	}
}
