// fakekernel.c: an LD_PRELOAD shim that plays the mlx5_ib kernel driver for
// rdma-core's libibverbs/libmlx5, so the real libmlx5 can run without
// hardware and its queue bytes can be recorded as golden vectors.
//
// What it fakes:
//   - discovery: NETLINK_RDMA sockets fail, so libibverbs falls back to sysfs,
//     which SYSFS_PATH points at the fake tree in sysfs/;
//   - /dev/infiniband/uverbs0: opened as /dev/null, made to look like the
//     uverbs char device 231:192 to stat/fstat;
//   - write(): the uverbs write commands, answered with the canned values
//     below (kept fixed so that golden.json needs no masking of keys/numbers);
//   - ioctl(RDMA_VERBS_IOCTL): ENOTTY for every core method (libibverbs then
//     uses write() for everything), except mlx5's UAR object alloc/destroy,
//     which has no write equivalent and which libmlx5 needs for dynamic UARs;
//   - mmap() of the uverbs fd: ordinary anonymous memory (UARs, clock pages).
// Every command's driver data (in and out) is recorded; the driver program
// reads the records through fake_last_cmd() and the UAR pages through
// fake_uar_*().
//
// Built with gcc at test time by gen.sh; nothing here is used by Go code.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <linux/netlink.h>

#include <rdma/ib_user_verbs.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/rdma_user_ioctl_cmds.h>
#include <rdma/mlx5-abi.h>
#include <rdma/mlx5_user_ioctl_cmds.h>
#include <rdma/mlx5_user_ioctl_verbs.h>

#include "fakekernel.h"

#define UVERBS_PATH "/dev/infiniband/uverbs0"
#define UVERBS_MAJOR 231
#define UVERBS_MINOR 192

static int fake_fd = -1;
static int (*real_open)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_close)(int);
static ssize_t (*real_write)(int, const void *, size_t);
static int (*real_ioctl)(int, unsigned long, ...);
static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
static int (*real_stat)(const char *, struct stat *);
static int (*real_fstat)(int, struct stat *);
static int (*real_socket)(int, int, int);

static void resolve(void)
{
	if (real_open)
		return;
	real_open = dlsym(RTLD_NEXT, "open");
	real_openat = dlsym(RTLD_NEXT, "openat");
	real_close = dlsym(RTLD_NEXT, "close");
	real_write = dlsym(RTLD_NEXT, "write");
	real_ioctl = dlsym(RTLD_NEXT, "ioctl");
	real_mmap = dlsym(RTLD_NEXT, "mmap");
	real_stat = dlsym(RTLD_NEXT, "stat");
	real_fstat = dlsym(RTLD_NEXT, "fstat");
	real_socket = dlsym(RTLD_NEXT, "socket");
}

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "fakekernel: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(3);
}

/* ---- records ---- */

static struct fake_cmd_rec recs[FAKE_MAX_CMD];
static struct fake_uar uars[FAKE_MAX_UARS];
static int nuars;
static uint64_t cmd_seq;
static uint32_t fail_next_cmd = 0xffffffff;
static int fail_next_errno;

const struct fake_cmd_rec *fake_last_cmd(uint32_t cmd)
{
	if (cmd >= FAKE_MAX_CMD || !recs[cmd].seen)
		return NULL;
	return &recs[cmd];
}

int fake_uar_count(void) { return nuars; }
const struct fake_uar *fake_uar(int i) { return &uars[i]; }

void fake_fail_next(uint32_t cmd, int err)
{
	fail_next_cmd = cmd;
	fail_next_errno = err;
}

/* ---- canned kernel values ---- */

static uint32_t next_handle = 1;
static uint32_t next_cqn = FAKE_FIRST_CQN;
static uint32_t next_qpn = FAKE_FIRST_QPN;
static uint32_t next_srqn = FAKE_FIRST_SRQN;
static uint32_t next_pdn = FAKE_FIRST_PDN;
static uint32_t next_mr = 0;
static uint32_t next_uar_page = FAKE_FIRST_UAR_PAGE_ID;

static void fill_context_resp(struct mlx5_ib_alloc_ucontext_resp *r, size_t len)
{
	memset(r, 0, sizeof(*r));
	r->qp_tab_size = 1 << 18;
	r->bf_reg_size = 512;
	r->tot_bfregs = 0; /* dynamic UARs: the kernel allocates no static ones */
	r->cache_line_size = 64;
	r->max_sq_desc_sz = 512;
	r->max_rq_desc_sz = 512;
	r->max_send_wqebb = 1 << 15;
	r->max_recv_wr = 1 << 15;
	r->max_srq_recv_wr = 1 << 15;
	r->num_ports = 1;
	r->flow_action_flags = 0;
	r->comp_mask = MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_CORE_CLOCK_OFFSET |
		       MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_DUMP_FILL_MKEY;
	r->response_length = len < sizeof(*r) ? len : sizeof(*r);
	r->cqe_version = 1;
	r->cmds_supp_uhw = MLX5_USER_CMDS_SUPP_UHW_QUERY_DEVICE |
			   MLX5_USER_CMDS_SUPP_UHW_CREATE_AH;
	/* min inline mode L2 (+1 encoded): raw packet sends carry the
	 * 18-byte Ethernet header inline in the Ethernet segment */
	r->eth_min_inline = MLX5_USER_INLINE_MODE_L2 + 1;
	r->clock_info_versions = 1 << MLX5_IB_CLOCK_INFO_V1;
	r->hca_core_clock_offset = 0x10;
	r->log_uar_size = 12;
	r->num_uars_per_page = 1;
	r->num_dyn_bfregs = 0;
	r->dump_fill_mkey = FAKE_DUMP_FILL_MKEY;
}

static void fill_query_device(struct ib_uverbs_query_device_resp *r)
{
	memset(r, 0, sizeof(*r));
	r->fw_ver = (16ULL << 32) | (35ULL << 16) | 2000; /* 16.35.2000 */
	r->node_guid = htobe64(0x0c42a10300a1b2c3ULL);
	r->sys_image_guid = htobe64(0x0c42a10300a1b2c3ULL);
	r->max_mr_size = ~0ULL;
	r->page_size_cap = 0xfffffffffffff000ULL;
	r->vendor_id = 0x02c9;
	r->vendor_part_id = 4119; /* ConnectX-5 */
	r->hw_ver = 0;
	r->max_qp = 1 << 18;
	r->max_qp_wr = 1 << 15;
	/* a ConnectX-5's capabilities, among them UD_IP_CSUM (1 << 18) and
	 * RAW_IP_CSUM (1 << 26), which make libmlx5 offer checksum offload
	 * on raw packet QPs */
	r->device_cap_flags = 0x25f1d36 | 1 << 18 | 1 << 26;
	r->max_sge = 30;
	r->max_sge_rd = 30;
	r->max_cq = 1 << 24;
	r->max_cqe = (1 << 22) - 1;
	r->max_mr = 1 << 24;
	r->max_pd = 1 << 24;
	r->max_qp_rd_atom = 16;
	r->max_res_rd_atom = 16 << 18;
	r->max_qp_init_rd_atom = 16;
	r->atomic_cap = 1; /* IBV_ATOMIC_HCA */
	r->max_srq = 1 << 23;
	r->max_srq_wr = (1 << 15) - 1;
	r->max_srq_sge = 31;
	r->max_pkeys = 128;
	r->local_ca_ack_delay = 16;
	r->phys_port_cnt = 1;
}

static void fill_query_port(struct ib_uverbs_query_port_resp *r)
{
	memset(r, 0, sizeof(*r));
	r->port_cap_flags = 0x04010000; /* CM_SUP | IP_BASED_GIDS */
	r->max_msg_sz = 1 << 30;
	r->bad_pkey_cntr = 0;
	r->qkey_viol_cntr = 0;
	r->gid_tbl_len = 256;
	r->pkey_tbl_len = 1;
	r->lid = 0;
	r->sm_lid = 0;
	r->state = 4;      /* ACTIVE */
	r->max_mtu = 5;    /* 4096 */
	r->active_mtu = 3; /* 1024 */
	r->lmc = 0;
	r->max_vl_num = 0;
	r->sm_sl = 0;
	r->subnet_timeout = 0;
	r->init_type_reply = 0;
	r->active_width = 2;   /* 4X */
	r->active_speed = 32;  /* EDR: 100 Gb/s */
	r->phys_state = 5;     /* LinkUp */
	r->link_layer = 2;     /* IBV_LINK_LAYER_ETHERNET */
	r->flags = 0;
}

/* ---- the write() ABI ---- */

static size_t core_in_size(uint32_t cmd, int ex)
{
	if (ex) {
		switch (cmd) {
		case IB_USER_VERBS_EX_CMD_QUERY_DEVICE: return sizeof(struct ib_uverbs_ex_query_device);
		case IB_USER_VERBS_EX_CMD_CREATE_CQ: return sizeof(struct ib_uverbs_ex_create_cq);
		case IB_USER_VERBS_EX_CMD_CREATE_QP: return sizeof(struct ib_uverbs_ex_create_qp);
		case IB_USER_VERBS_EX_CMD_MODIFY_QP: return sizeof(struct ib_uverbs_ex_modify_qp);
		}
		return 0;
	}
	switch (cmd) {
	case IB_USER_VERBS_CMD_GET_CONTEXT: return sizeof(struct ib_uverbs_get_context);
	case IB_USER_VERBS_CMD_QUERY_DEVICE: return sizeof(struct ib_uverbs_query_device);
	case IB_USER_VERBS_CMD_QUERY_PORT: return sizeof(struct ib_uverbs_query_port);
	case IB_USER_VERBS_CMD_ALLOC_PD: return sizeof(struct ib_uverbs_alloc_pd);
	case IB_USER_VERBS_CMD_DEALLOC_PD: return sizeof(struct ib_uverbs_dealloc_pd);
	case IB_USER_VERBS_CMD_CREATE_AH: return sizeof(struct ib_uverbs_create_ah);
	case IB_USER_VERBS_CMD_DESTROY_AH: return sizeof(struct ib_uverbs_destroy_ah);
	case IB_USER_VERBS_CMD_REG_MR: return sizeof(struct ib_uverbs_reg_mr);
	case IB_USER_VERBS_CMD_DEREG_MR: return sizeof(struct ib_uverbs_dereg_mr);
	case IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL: return sizeof(struct ib_uverbs_create_comp_channel);
	case IB_USER_VERBS_CMD_CREATE_CQ: return sizeof(struct ib_uverbs_create_cq);
	case IB_USER_VERBS_CMD_DESTROY_CQ: return sizeof(struct ib_uverbs_destroy_cq);
	case IB_USER_VERBS_CMD_CREATE_QP: return sizeof(struct ib_uverbs_create_qp);
	case IB_USER_VERBS_CMD_MODIFY_QP: return sizeof(struct ib_uverbs_modify_qp);
	case IB_USER_VERBS_CMD_DESTROY_QP: return sizeof(struct ib_uverbs_destroy_qp);
	case IB_USER_VERBS_CMD_CREATE_SRQ: return sizeof(struct ib_uverbs_create_srq);
	case IB_USER_VERBS_CMD_CREATE_XSRQ: return sizeof(struct ib_uverbs_create_xsrq);
	case IB_USER_VERBS_CMD_MODIFY_SRQ: return sizeof(struct ib_uverbs_modify_srq);
	case IB_USER_VERBS_CMD_DESTROY_SRQ: return sizeof(struct ib_uverbs_destroy_srq);
	case IB_USER_VERBS_CMD_OPEN_XRCD: return sizeof(struct ib_uverbs_open_xrcd);
	case IB_USER_VERBS_CMD_CLOSE_XRCD: return sizeof(struct ib_uverbs_close_xrcd);
	case IB_USER_VERBS_CMD_REQ_NOTIFY_CQ: return sizeof(struct ib_uverbs_req_notify_cq);
	}
	return 0;
}

static size_t core_out_size(uint32_t cmd, int ex)
{
	if (ex) {
		switch (cmd) {
		case IB_USER_VERBS_EX_CMD_QUERY_DEVICE: return sizeof(struct ib_uverbs_ex_query_device_resp);
		case IB_USER_VERBS_EX_CMD_CREATE_CQ: return sizeof(struct ib_uverbs_ex_create_cq_resp);
		case IB_USER_VERBS_EX_CMD_CREATE_QP: return sizeof(struct ib_uverbs_ex_create_qp_resp);
		case IB_USER_VERBS_EX_CMD_MODIFY_QP: return sizeof(struct ib_uverbs_ex_modify_qp_resp);
		}
		return 0;
	}
	switch (cmd) {
	case IB_USER_VERBS_CMD_GET_CONTEXT: return sizeof(struct ib_uverbs_get_context_resp);
	case IB_USER_VERBS_CMD_QUERY_DEVICE: return sizeof(struct ib_uverbs_query_device_resp);
	case IB_USER_VERBS_CMD_QUERY_PORT: return sizeof(struct ib_uverbs_query_port_resp);
	case IB_USER_VERBS_CMD_ALLOC_PD: return sizeof(struct ib_uverbs_alloc_pd_resp);
	case IB_USER_VERBS_CMD_CREATE_AH: return sizeof(struct ib_uverbs_create_ah_resp);
	case IB_USER_VERBS_CMD_REG_MR: return sizeof(struct ib_uverbs_reg_mr_resp);
	case IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL: return sizeof(struct ib_uverbs_create_comp_channel_resp);
	case IB_USER_VERBS_CMD_CREATE_CQ: return sizeof(struct ib_uverbs_create_cq_resp);
	case IB_USER_VERBS_CMD_DESTROY_CQ: return sizeof(struct ib_uverbs_destroy_cq_resp);
	case IB_USER_VERBS_CMD_CREATE_QP: return sizeof(struct ib_uverbs_create_qp_resp);
	case IB_USER_VERBS_CMD_DESTROY_QP: return sizeof(struct ib_uverbs_destroy_qp_resp);
	case IB_USER_VERBS_CMD_CREATE_SRQ:
	case IB_USER_VERBS_CMD_CREATE_XSRQ: return sizeof(struct ib_uverbs_create_srq_resp);
	case IB_USER_VERBS_CMD_DESTROY_SRQ: return sizeof(struct ib_uverbs_destroy_srq_resp);
	case IB_USER_VERBS_CMD_OPEN_XRCD: return sizeof(struct ib_uverbs_open_xrcd_resp);
	}
	return 0;
}

static void clip_copy(void *dst, size_t dstlen, const void *src, size_t srclen)
{
	size_t n = dstlen < srclen ? dstlen : srclen;

	memset(dst, 0, dstlen);
	memcpy(dst, src, n);
}

/* answer fills core (the core response) and drv (the driver response) for
 * one command; both are zeroed first and have the sizes the caller gave. */
static int answer(uint32_t cmd, int ex, const void *in, const void *drv_in,
		  size_t drv_in_len, void *out, size_t out_len, void *drv,
		  size_t drv_len)
{
	(void)drv_in;
	(void)drv_in_len;
	if (ex) {
		switch (cmd) {
		case IB_USER_VERBS_EX_CMD_QUERY_DEVICE: {
			struct ib_uverbs_ex_query_device_resp r = {};

			fill_query_device(&r.base);
			r.response_length = out_len < sizeof(r) ? out_len : sizeof(r);
			r.timestamp_mask = (1ULL << 63) - 1;
			r.hca_core_clock = 156250; /* kHz */
			r.max_wq_type_rq = 1 << 20;
			r.raw_packet_caps = 0xf; /* CVLAN strip, scatter FCS, IP csum, delay drop */
			clip_copy(out, out_len, &r, sizeof(r));
			if (drv_len) {
				struct mlx5_ib_query_device_resp d = {};

				d.response_length = drv_len < sizeof(d) ? drv_len : sizeof(d);
				clip_copy(drv, drv_len, &d, sizeof(d));
			}
			return 0;
		}
		case IB_USER_VERBS_EX_CMD_CREATE_CQ: {
			const struct ib_uverbs_ex_create_cq *c = in;
			struct ib_uverbs_ex_create_cq_resp r = {};
			struct mlx5_ib_create_cq_resp d = {};
			uint32_t entries = 1;

			while (entries < c->cqe + 1)
				entries <<= 1;
			r.base.cq_handle = next_handle++;
			r.base.cqe = entries - 1;
			r.response_length = out_len < sizeof(r) ? out_len : sizeof(r);
			d.cqn = next_cqn++;
			clip_copy(out, out_len, &r, sizeof(r));
			clip_copy(drv, drv_len, &d, sizeof(d));
			return 0;
		}
		case IB_USER_VERBS_EX_CMD_CREATE_QP:
		case IB_USER_VERBS_EX_CMD_MODIFY_QP:
			break;
		}
		return -EOPNOTSUPP;
	}
	switch (cmd) {
	case IB_USER_VERBS_CMD_GET_CONTEXT: {
		struct ib_uverbs_get_context_resp r = {};
		struct mlx5_ib_alloc_ucontext_resp d;

		r.async_fd = real_open("/dev/null", O_RDONLY | O_CLOEXEC);
		r.num_comp_vectors = 8;
		fill_context_resp(&d, drv_len);
		clip_copy(out, out_len, &r, sizeof(r));
		clip_copy(drv, drv_len, &d, sizeof(d));
		return 0;
	}
	case IB_USER_VERBS_CMD_QUERY_DEVICE: {
		struct ib_uverbs_query_device_resp r;

		fill_query_device(&r);
		clip_copy(out, out_len, &r, sizeof(r));
		return 0;
	}
	case IB_USER_VERBS_CMD_QUERY_PORT: {
		struct ib_uverbs_query_port_resp r;

		fill_query_port(&r);
		clip_copy(out, out_len, &r, sizeof(r));
		return 0;
	}
	case IB_USER_VERBS_CMD_ALLOC_PD: {
		struct ib_uverbs_alloc_pd_resp r = {.pd_handle = next_handle++};
		struct mlx5_ib_alloc_pd_resp d = {.pdn = next_pdn++};

		clip_copy(out, out_len, &r, sizeof(r));
		clip_copy(drv, drv_len, &d, sizeof(d));
		return 0;
	}
	case IB_USER_VERBS_CMD_REG_MR: {
		struct ib_uverbs_reg_mr_resp r = {};

		r.mr_handle = next_handle++;
		r.lkey = FAKE_MR_LKEY + (next_mr << 8);
		r.rkey = FAKE_MR_RKEY + (next_mr << 8);
		next_mr++;
		clip_copy(out, out_len, &r, sizeof(r));
		return 0;
	}
	case IB_USER_VERBS_CMD_CREATE_CQ: {
		const struct ib_uverbs_create_cq *c = in;
		struct ib_uverbs_create_cq_resp r = {};
		struct mlx5_ib_create_cq_resp d = {};
		uint32_t entries = 1;

		while (entries < c->cqe + 1)
			entries <<= 1;
		r.cq_handle = next_handle++;
		r.cqe = entries - 1;
		d.cqn = next_cqn++;
		clip_copy(out, out_len, &r, sizeof(r));
		clip_copy(drv, drv_len, &d, sizeof(d));
		return 0;
	}
	case IB_USER_VERBS_CMD_CREATE_QP: {
		const struct ib_uverbs_create_qp *c = in;
		const struct mlx5_ib_create_qp *dq = drv_in;
		struct ib_uverbs_create_qp_resp r = {};
		struct mlx5_ib_create_qp_resp d = {};

		r.qp_handle = next_handle++;
		r.qpn = next_qpn++;
		r.max_send_wr = c->max_send_wr;
		r.max_recv_wr = c->max_recv_wr;
		r.max_send_sge = c->max_send_sge;
		r.max_recv_sge = c->max_recv_sge;
		r.max_inline_data = c->max_inline_data;
		/* with MLX5_QP_FLAG_UAR_PAGE_INDEX the kernel answers the bfreg
		 * index it was given (the dynamic UAR's page id) */
		d.bfreg_index = drv_in_len >= 40 ? dq->bfreg_index : 0;
		if (c->qp_type == IB_UVERBS_QPT_RAW_PACKET) {
			d.comp_mask = MLX5_IB_CREATE_QP_RESP_MASK_TIRN |
				      MLX5_IB_CREATE_QP_RESP_MASK_TISN |
				      MLX5_IB_CREATE_QP_RESP_MASK_RQN |
				      MLX5_IB_CREATE_QP_RESP_MASK_SQN;
			d.tirn = r.qpn; /* the kernel reports the QP number as the raw QP's TIR */
			d.tisn = FAKE_RAW_TISN;
			d.rqn = FAKE_RAW_RQN;
			d.sqn = FAKE_RAW_SQN;
		}
		clip_copy(out, out_len, &r, sizeof(r));
		clip_copy(drv, drv_len, &d, sizeof(d));
		return 0;
	}
	case IB_USER_VERBS_CMD_CREATE_SRQ:
	case IB_USER_VERBS_CMD_CREATE_XSRQ: {
		const struct ib_uverbs_create_srq *c = in;
		struct ib_uverbs_create_srq_resp r = {};
		struct mlx5_ib_create_srq_resp d = {};

		r.srq_handle = next_handle++;
		r.max_wr = c->max_wr;
		r.max_sge = c->max_sge;
		r.srqn = next_srqn;
		d.srqn = next_srqn++;
		clip_copy(out, out_len, &r, sizeof(r));
		clip_copy(drv, drv_len, &d, sizeof(d));
		return 0;
	}
	case IB_USER_VERBS_CMD_CREATE_AH: {
		struct ib_uverbs_create_ah_resp r = {.ah_handle = next_handle++};
		struct mlx5_ib_create_ah_resp d = {};
		static const uint8_t dmac[6] = {0x0c, 0x42, 0xa1, 0x5e, 0x77, 0x01};

		d.response_length = drv_len < sizeof(d) ? drv_len : sizeof(d);
		memcpy(d.dmac, dmac, 6);
		clip_copy(out, out_len, &r, sizeof(r));
		clip_copy(drv, drv_len, &d, sizeof(d));
		return 0;
	}
	case IB_USER_VERBS_CMD_OPEN_XRCD: {
		struct ib_uverbs_open_xrcd_resp r = {.xrcd_handle = next_handle++};

		clip_copy(out, out_len, &r, sizeof(r));
		return 0;
	}
	case IB_USER_VERBS_CMD_DESTROY_CQ:
	case IB_USER_VERBS_CMD_DESTROY_QP:
	case IB_USER_VERBS_CMD_DESTROY_SRQ:
		memset(out, 0, out_len);
		return 0;
	case IB_USER_VERBS_CMD_MODIFY_QP:
	case IB_USER_VERBS_CMD_MODIFY_SRQ:
	case IB_USER_VERBS_CMD_DEALLOC_PD:
	case IB_USER_VERBS_CMD_DEREG_MR:
	case IB_USER_VERBS_CMD_DESTROY_AH:
	case IB_USER_VERBS_CMD_CLOSE_XRCD:
	case IB_USER_VERBS_CMD_REQ_NOTIFY_CQ:
		return 0;
	}
	return -EOPNOTSUPP;
}

static ssize_t uverbs_write(const void *buf, size_t count)
{
	const struct ib_uverbs_cmd_hdr *hdr = buf;
	uint32_t cmd = hdr->command & IB_USER_VERBS_CMD_COMMAND_MASK;
	int ex = !!(hdr->command & IB_USER_VERBS_CMD_FLAG_EXTENDED);
	const uint8_t *core_in, *drv_in;
	size_t core_in_len, drv_in_len, core_out_len, drv_out_len;
	uint8_t *core_out, *drv_out;
	struct fake_cmd_rec *rec;
	int slot, ret;

	if (count < sizeof(*hdr))
		return -EINVAL;
	if (ex) {
		const struct ib_uverbs_ex_cmd_hdr *exh = (const void *)(hdr + 1);

		core_in = (const uint8_t *)(exh + 1);
		core_in_len = hdr->in_words * 8;
		drv_in = core_in + core_in_len;
		drv_in_len = exh->provider_in_words * 8;
		core_out = (uint8_t *)(uintptr_t)exh->response;
		core_out_len = hdr->out_words * 8;
		drv_out = core_out + core_out_len;
		drv_out_len = exh->provider_out_words * 8;
		if (sizeof(*hdr) + sizeof(*exh) + core_in_len + drv_in_len != count)
			return -EINVAL;
		slot = FAKE_EX(cmd);
	} else {
		size_t want = core_in_size(cmd, 0), out_want = core_out_size(cmd, 0);

		if (!want)
			die("write command %u not handled", cmd);
		core_in = (const uint8_t *)(hdr + 1);
		core_in_len = hdr->in_words * 4 - sizeof(*hdr);
		if (hdr->in_words * 4 != count || core_in_len < want)
			return -EINVAL;
		drv_in = core_in + want;
		drv_in_len = core_in_len - want;
		core_in_len = want;
		core_out = out_want ? (uint8_t *)(uintptr_t)*(const uint64_t *)core_in : NULL;
		if (out_want && hdr->out_words * 4 < out_want)
			return -ENOSPC;
		core_out_len = out_want;
		drv_out = core_out ? core_out + out_want : NULL;
		drv_out_len = out_want ? hdr->out_words * 4 - out_want : 0;
		slot = cmd;
	}
	if (slot >= FAKE_MAX_CMD)
		die("command slot %d", slot);
	rec = &recs[slot];
	memset(rec, 0, sizeof(*rec));
	rec->seen = 1;
	rec->seq = ++cmd_seq;
	rec->ex = ex;
	if (core_in_len > sizeof(rec->core_in) || drv_in_len > sizeof(rec->drv_in) ||
	    core_out_len > sizeof(rec->core_out) || drv_out_len > sizeof(rec->drv_out))
		die("command %u too long for the record", cmd);
	memcpy(rec->core_in, core_in, core_in_len);
	rec->core_in_len = core_in_len;
	memcpy(rec->drv_in, drv_in, drv_in_len);
	rec->drv_in_len = drv_in_len;

	if (fail_next_cmd == (uint32_t)slot) {
		fail_next_cmd = 0xffffffff;
		rec->ret = fail_next_errno;
		return -fail_next_errno;
	}

	/* answer into local buffers, then copy out: the response may overlap
	 * the request (libibverbs puts them in one buffer) */
	{
		uint8_t co[512], dout[512];

		if (core_out_len > sizeof(co) || drv_out_len > sizeof(dout))
			die("response too long");
		memset(co, 0, sizeof(co));
		memset(dout, 0, sizeof(dout));
		ret = answer(cmd, ex, rec->core_in, rec->drv_in, rec->drv_in_len,
			     co, core_out_len, dout, drv_out_len);
		if (ret == -EOPNOTSUPP && getenv("FAKEKERNEL_DEBUG"))
			fprintf(stderr, "fakekernel: command %u ex %d refused\n", cmd, ex);
		if (ret)
			return ret;
		if (core_out_len)
			memcpy(core_out, co, core_out_len);
		if (drv_out_len)
			memcpy(drv_out, dout, drv_out_len);
		memcpy(rec->core_out, co, core_out_len);
		rec->core_out_len = core_out_len;
		memcpy(rec->drv_out, dout, drv_out_len);
		rec->drv_out_len = drv_out_len;
	}
	if (getenv("FAKEKERNEL_DEBUG"))
		fprintf(stderr, "fakekernel: write cmd %u ex %d in %zu+%zu out %zu+%zu\n",
			cmd, ex, core_in_len, drv_in_len, core_out_len, drv_out_len);
	return count;
}

/* ---- the ioctl ABI: only mlx5's UAR object ---- */

static int uverbs_ioctl(struct ib_uverbs_ioctl_hdr *hdr)
{
	struct ib_uverbs_attr *a = hdr->attrs;
	int i;

	if (getenv("FAKEKERNEL_DEBUG"))
		fprintf(stderr, "fakekernel: ioctl object %#x method %#x attrs %u\n",
			hdr->object_id, hdr->method_id, hdr->num_attrs);
	if (hdr->object_id == MLX5_IB_OBJECT_UAR &&
	    hdr->method_id == MLX5_IB_METHOD_UAR_OBJ_ALLOC) {
		uint32_t page = next_uar_page++;
		uint64_t off = (uint64_t)(FAKE_UAR_MMAP_PGOFF + (page - FAKE_FIRST_UAR_PAGE_ID)) << 12;
		uint32_t type = 0xffffffff;

		for (i = 0; i < hdr->num_attrs; i++)
			if (a[i].attr_id == MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE)
				type = (uint32_t)a[i].data;
		for (i = 0; i < hdr->num_attrs; i++) {
			switch (a[i].attr_id) {
			case MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE:
				a[i].data = next_handle++;
				break;
			case MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET:
				memcpy((void *)(uintptr_t)a[i].data, &off, 8);
				a[i].flags |= UVERBS_ATTR_F_VALID_OUTPUT;
				break;
			case MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH: {
				uint32_t len = 4096;

				memcpy((void *)(uintptr_t)a[i].data, &len, 4);
				a[i].flags |= UVERBS_ATTR_F_VALID_OUTPUT;
				break;
			}
			case MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID:
				memcpy((void *)(uintptr_t)a[i].data, &page, 4);
				a[i].flags |= UVERBS_ATTR_F_VALID_OUTPUT;
				break;
			}
		}
		if (nuars >= FAKE_MAX_UARS)
			die("too many UARs");
		uars[nuars].page_id = page;
		uars[nuars].mmap_offset = off;
		uars[nuars].nc = type == MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC;
		uars[nuars].addr = NULL;
		nuars++;
		return 0;
	}
	if (hdr->object_id == MLX5_IB_OBJECT_UAR &&
	    hdr->method_id == MLX5_IB_METHOD_UAR_OBJ_DESTROY)
		return 0;
	/* no ioctl framework: libibverbs falls back to write() */
	return -ENOTTY;
}

/* ---- interposed libc functions ---- */

static int is_uverbs(const char *path)
{
	return path && strcmp(path, UVERBS_PATH) == 0;
}

static void fake_stat(struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_mode = S_IFCHR | 0666;
	st->st_rdev = makedev(UVERBS_MAJOR, UVERBS_MINOR);
	st->st_nlink = 1;
}

int open(const char *path, int flags, ...)
{
	mode_t mode = 0;
	va_list ap;

	resolve();
	va_start(ap, flags);
	if (flags & (O_CREAT | O_TMPFILE))
		mode = va_arg(ap, mode_t);
	va_end(ap);
	if (is_uverbs(path)) {
		if (fake_fd >= 0) {
			errno = EBUSY;
			return -1;
		}
		fake_fd = real_open("/dev/null", O_RDWR | O_CLOEXEC);
		return fake_fd;
	}
	return real_open(path, flags, mode);
}
int open64(const char *path, int flags, ...) __attribute__((alias("open")));

int openat(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	va_list ap;

	resolve();
	va_start(ap, flags);
	if (flags & (O_CREAT | O_TMPFILE))
		mode = va_arg(ap, mode_t);
	va_end(ap);
	if (is_uverbs(path))
		return open(path, flags);
	return real_openat(dirfd, path, flags, mode);
}
int openat64(int dirfd, const char *path, int flags, ...) __attribute__((alias("openat")));

int close(int fd)
{
	resolve();
	if (fd >= 0 && fd == fake_fd)
		fake_fd = -1;
	return real_close(fd);
}

int stat(const char *path, struct stat *st)
{
	resolve();
	if (is_uverbs(path)) {
		fake_stat(st);
		return 0;
	}
	return real_stat(path, st);
}

int fstat(int fd, struct stat *st)
{
	resolve();
	if (fd >= 0 && fd == fake_fd) {
		fake_stat(st);
		return 0;
	}
	return real_fstat(fd, st);
}

int socket(int domain, int type, int protocol)
{
	resolve();
	/* no RDMA netlink: libibverbs falls back to sysfs discovery */
	if (domain == AF_NETLINK && protocol == NETLINK_RDMA) {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	return real_socket(domain, type, protocol);
}

ssize_t write(int fd, const void *buf, size_t count)
{
	ssize_t ret;

	resolve();
	if (fd < 0 || fd != fake_fd)
		return real_write(fd, buf, count);
	ret = uverbs_write(buf, count);
	if (ret < 0) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

int ioctl(int fd, unsigned long request, ...)
{
	va_list ap;
	void *arg;
	int ret;

	resolve();
	va_start(ap, request);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (fd < 0 || fd != fake_fd)
		return real_ioctl(fd, request, arg);
	if (request != RDMA_VERBS_IOCTL) {
		errno = ENOTTY;
		return -1;
	}
	ret = uverbs_ioctl(arg);
	if (ret < 0) {
		errno = -ret;
		return -1;
	}
	return 0;
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	void *p;
	int i;

	resolve();
	if (fd < 0 || fd != fake_fd)
		return real_mmap(addr, len, prot, flags, fd, off);
	p = real_mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return p;
	for (i = 0; i < nuars; i++) {
		if ((uint64_t)off == uars[i].mmap_offset && !uars[i].addr) {
			uint64_t *q = p;

			for (size_t k = 0; k < len / 8; k++)
				q[k] = FAKE_UAR_POISON;
			uars[i].addr = p;
			uars[i].len = len;
			return p;
		}
	}
	/* core clock / clock info pages and anything else: zeroed memory */
	if (getenv("FAKEKERNEL_DEBUG"))
		fprintf(stderr, "fakekernel: mmap offset %#lx len %zu (not a UAR)\n", (long)off, len);
	return p;
}
void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) __attribute__((alias("mmap")));
