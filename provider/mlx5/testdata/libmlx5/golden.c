// golden.c: drives rdma-core's real libmlx5 against the fake kernel
// (fakekernel.c) and prints golden.json (format: SCHEMA.md) on stdout.
//
// It creates CQs, AHs, SRQs and QPs, posts a table of work requests and
// records, after each post, the queue bytes libmlx5 wrote, the doorbell
// record and what landed in the UAR page; then it writes a table of CQEs into
// a CQ ring and records what ibv_poll_cq made of them.
//
// Usage: golden <sysfs dir>   (run with LD_PRELOAD=libfakekernel.so)
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/mlx5-abi.h>

#include "fakekernel.h"
#include "json.h"

/* All data buffers live at a fixed address, so SGE addresses are the same
 * on every run (and libmlx5 can read inline data and raw packet headers
 * from them). Byte i of the area is data_byte(i): never zero. */
#define DATA_BASE 0x10000000UL
#define DATA_LEN (1UL << 20)
#define LKEY FAKE_MR_LKEY
#define RKEY 0x00abcd01u

static uint8_t *data;

static uint8_t data_byte(uint64_t i) { return (uint8_t)(i * 7 + 1) | 1; }

static void fail(const char *what)
{
	fprintf(stderr, "golden: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void failx(const char *fmt, const char *arg)
{
	fprintf(stderr, "golden: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n");
	exit(2);
}

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_mr *mr;

/* ---- recorded kernel commands ---- */

static const struct fake_cmd_rec *last_of(uint32_t a, uint32_t b)
{
	const struct fake_cmd_rec *ra = fake_last_cmd(a), *rb = fake_last_cmd(b);

	if (!ra)
		return rb;
	if (!rb)
		return ra;
	return ra->seq > rb->seq ? ra : rb;
}

/* emit_drv writes the driver data with the 8-byte fields at the given
 * offsets (user pointers) zeroed. */
static void emit_masked(const char *key, const uint8_t *p, size_t n, const int *mask, int nmask)
{
	uint8_t buf[512];

	memcpy(buf, p, n);
	for (int i = 0; i < nmask; i++)
		if (mask[i] + 8 <= (int)n)
			memset(buf + mask[i], 0, 8);
	jk_hex(key, buf, n);
}

/* ---- CQs ---- */

struct cqrec {
	const char *name;
	int cqe;
	struct ibv_cq *cq;
	struct mlx5dv_cq dv;
	uint32_t ci; /* consumer index as this program tracks it */
};

static struct cqrec cqs[8];
static int ncqs;

static struct cqrec *new_cq(const char *name, int cqe)
{
	struct cqrec *c = &cqs[ncqs++];
	struct mlx5dv_obj obj = {};
	const struct fake_cmd_rec *r;
	static const int mask[] = {0, 8};

	c->name = name;
	c->cqe = cqe;
	c->cq = ibv_create_cq(ctx, cqe, NULL, NULL, 0);
	if (!c->cq)
		fail("ibv_create_cq");
	obj.cq.in = c->cq;
	obj.cq.out = &c->dv;
	if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ))
		fail("mlx5dv_init_obj cq");
	r = last_of(IB_USER_VERBS_CMD_CREATE_CQ, FAKE_EX(IB_USER_VERBS_CMD_CREATE_CQ));

	j_obj();
	jk_str("name", name);
	jk_i64("cqe", cqe);
	jk_u64("cqe_size", c->dv.cqe_size);
	jk_str("command", r->ex ? "CREATE_CQ_EX" : "CREATE_CQ");
	jk_u64("kernel_cqe", r->ex ? ((const struct ib_uverbs_ex_create_cq *)r->core_in)->cqe
				   : ((const struct ib_uverbs_create_cq *)r->core_in)->cqe);
	emit_masked("req_hex", r->drv_in, r->drv_in_len, mask, 2);
	jk_hex("resp_hex", r->drv_out, r->drv_out_len);
	jk_u64("cqn", c->dv.cqn);
	jk_u64("ncqe", c->dv.cqe_cnt);
	jk_u64("cq_uar_offset", (uintptr_t)c->dv.cq_uar & 0xfff);
	j_end();
	return c;
}

static struct cqrec *cq_by_ibv(struct ibv_cq *cq)
{
	for (int i = 0; i < ncqs; i++)
		if (cqs[i].cq == cq)
			return &cqs[i];
	return NULL;
}

/* ---- AHs ---- */

struct ahrec {
	const char *name;
	struct ibv_ah *ah;
	struct ibv_ah_attr attr;
};

static struct ahrec ahs[4];
static int nahs;

static void new_ah(const char *name, int sgid_index, uint32_t flow_label, uint8_t sl,
		   uint8_t tclass, uint8_t hop_limit, uint8_t last_gid_byte)
{
	struct ahrec *a = &ahs[nahs++];
	const struct fake_cmd_rec *r;
	struct ibv_ah_attr *at = &a->attr;
	struct mlx5dv_obj obj = {};
	struct mlx5dv_ah dv = {};

	a->name = name;
	memset(at, 0, sizeof(*at));
	at->is_global = 1;
	at->port_num = 1;
	at->sl = sl;
	at->grh.sgid_index = sgid_index;
	at->grh.flow_label = flow_label;
	at->grh.hop_limit = hop_limit;
	at->grh.traffic_class = tclass;
	/* ::ffff:10.99.0.x */
	at->grh.dgid.raw[10] = 0xff;
	at->grh.dgid.raw[11] = 0xff;
	at->grh.dgid.raw[12] = 10;
	at->grh.dgid.raw[13] = 99;
	at->grh.dgid.raw[14] = 0;
	at->grh.dgid.raw[15] = last_gid_byte;
	a->ah = ibv_create_ah(pd, at);
	if (!a->ah)
		fail("ibv_create_ah");
	obj.ah.in = a->ah;
	obj.ah.out = &dv;
	if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_AH))
		fail("mlx5dv_init_obj ah");
	r = fake_last_cmd(IB_USER_VERBS_CMD_CREATE_AH);

	j_obj();
	jk_str("name", name);
	j_key("attr");
	j_obj();
	jk_u64("dlid", at->dlid);
	jk_u64("sl", at->sl);
	jk_u64("src_path_bits", at->src_path_bits);
	jk_u64("static_rate", at->static_rate);
	jk_u64("port_num", at->port_num);
	jk_u64("is_global", at->is_global);
	j_key("grh");
	j_obj();
	jk_hex("dgid", at->grh.dgid.raw, 16);
	jk_u64("flow_label", at->grh.flow_label);
	jk_u64("sgid_index", at->grh.sgid_index);
	jk_u64("hop_limit", at->grh.hop_limit);
	jk_u64("traffic_class", at->grh.traffic_class);
	j_end();
	j_end();
	jk_str("gid_type", sgid_index & 1 ? "RoCE v2" : "IB/RoCE v1");
	jk_hex("resp_hex", r->drv_out, r->drv_out_len);
	jk_hex("av_hex", dv.av, sizeof(*dv.av));
	j_end();
}

static const char *ah_name(struct ibv_ah *ah)
{
	for (int i = 0; i < nahs; i++)
		if (ahs[i].ah == ah)
			return ahs[i].name;
	return "?";
}

/* ---- SRQs ---- */

struct srqrec {
	const char *name;
	struct ibv_srq *srq;
	struct mlx5dv_srq dv;
	uint32_t wqe_cnt;
	uint32_t srqn;
};

static struct srqrec srqs[4];
static int nsrqs;

static const char *srq_name(struct ibv_srq *s)
{
	for (int i = 0; i < nsrqs; i++)
		if (srqs[i].srq == s)
			return srqs[i].name;
	return NULL;
}

/* ---- QPs ---- */

struct qprec {
	const char *name;
	struct ibv_qp *qp;
	struct mlx5dv_qp dv;
	enum ibv_qp_type type;
	uint32_t uidx;
	struct cqrec *scq, *rcq;
	uint16_t last_ctrl_idx; /* WQE index of the last WQE libmlx5 built */
	int posted_since_drain;
	struct ibv_qp_cap cap;
};

static const char *qp_type_name(enum ibv_qp_type t)
{
	switch (t) {
	case IBV_QPT_RC: return "RC";
	case IBV_QPT_UC: return "UC";
	case IBV_QPT_UD: return "UD";
	case IBV_QPT_RAW_PACKET: return "RAW_PACKET";
	case IBV_QPT_XRC_SEND: return "XRC_SEND";
	case IBV_QPT_XRC_RECV: return "XRC_RECV";
	default: return "?";
	}
}

static const char *opcode_name(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND: return "SEND";
	case IBV_WR_SEND_WITH_IMM: return "SEND_WITH_IMM";
	case IBV_WR_SEND_WITH_INV: return "SEND_WITH_INV";
	case IBV_WR_RDMA_WRITE: return "RDMA_WRITE";
	case IBV_WR_RDMA_WRITE_WITH_IMM: return "RDMA_WRITE_WITH_IMM";
	case IBV_WR_RDMA_READ: return "RDMA_READ";
	case IBV_WR_ATOMIC_CMP_AND_SWP: return "ATOMIC_CMP_AND_SWP";
	case IBV_WR_ATOMIC_FETCH_AND_ADD: return "ATOMIC_FETCH_AND_ADD";
	case IBV_WR_LOCAL_INV: return "LOCAL_INV";
	default: return "?";
	}
}

static void modify(struct ibv_qp *qp, enum ibv_qp_type t)
{
	struct ibv_qp_attr a = {};

	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.pkey_index = 0;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	a.qkey = 0x11111111;
	int mask = IBV_QP_STATE | IBV_QP_PORT;
	if (t == IBV_QPT_UD)
		mask |= IBV_QP_PKEY_INDEX | IBV_QP_QKEY;
	else if (t != IBV_QPT_RAW_PACKET)
		mask |= IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS;
	if (ibv_modify_qp(qp, &a, mask))
		fail("modify INIT");

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (t == IBV_QPT_RC || t == IBV_QPT_UC || t == IBV_QPT_XRC_SEND) {
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = 0x2200;
		a.rq_psn = 0;
		a.ah_attr.is_global = 1;
		a.ah_attr.port_num = 1;
		a.ah_attr.grh.sgid_index = 1;
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.grh.dgid.raw[10] = 0xff;
		a.ah_attr.grh.dgid.raw[11] = 0xff;
		a.ah_attr.grh.dgid.raw[12] = 10;
		a.ah_attr.grh.dgid.raw[13] = 99;
		a.ah_attr.grh.dgid.raw[15] = 2;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (t != IBV_QPT_UC) {
			a.max_dest_rd_atomic = 16;
			a.min_rnr_timer = 12;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
	}
	if (ibv_modify_qp(qp, &a, mask))
		fail("modify RTR");

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	mask = IBV_QP_STATE;
	if (t != IBV_QPT_RAW_PACKET) {
		a.sq_psn = 0;
		mask |= IBV_QP_SQ_PSN;
	}
	if (t == IBV_QPT_RC || t == IBV_QPT_XRC_SEND) {
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 16;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	if (ibv_modify_qp(qp, &a, mask))
		fail("modify RTS");
}

static struct ibv_xrcd *xrcd __attribute__((unused));

struct qpspec {
	const char *name;
	enum ibv_qp_type type;
	struct cqrec *scq, *rcq;
	struct srqrec *srq;
	int sq_sig_all;
	struct ibv_qp_cap cap;
};

static void emit_cap(const char *key, const struct ibv_qp_cap *c)
{
	j_key(key);
	j_obj();
	jk_u64("max_send_wr", c->max_send_wr);
	jk_u64("max_recv_wr", c->max_recv_wr);
	jk_u64("max_send_sge", c->max_send_sge);
	jk_u64("max_recv_sge", c->max_recv_sge);
	jk_u64("max_inline_data", c->max_inline_data);
	j_end();
}

/* begin_qp creates the QP, brings it to RTS, writes its record up to and
 * including the opening of "posts"; end_qp closes it. */
static void begin_qp(struct qprec *q, const struct qpspec *s)
{
	struct ibv_qp_init_attr_ex ia = {};
	struct mlx5dv_obj obj = {};
	const struct fake_cmd_rec *r;
	const struct mlx5_ib_create_qp *req;
	static const int mask[] = {0, 8, 40};
	uint8_t *uar_page;

	memset(q, 0, sizeof(*q));
	q->name = s->name;
	q->type = s->type;
	q->scq = s->scq;
	q->rcq = s->rcq;
	ia.qp_type = s->type;
	ia.send_cq = s->scq->cq;
	ia.recv_cq = s->rcq ? s->rcq->cq : NULL;
	ia.srq = s->srq ? s->srq->srq : NULL;
	ia.sq_sig_all = s->sq_sig_all;
	ia.cap = s->cap;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD;
	ia.pd = pd;
	if (s->type == IBV_QPT_XRC_SEND) {
		ia.recv_cq = NULL;
		ia.cap.max_recv_wr = 0;
		ia.cap.max_recv_sge = 0;
	}
	q->qp = ibv_create_qp_ex(ctx, &ia);
	if (!q->qp)
		fail(s->name);
	q->cap = ia.cap;
	r = last_of(IB_USER_VERBS_CMD_CREATE_QP, FAKE_EX(IB_USER_VERBS_CMD_CREATE_QP));
	req = (const void *)r->drv_in;
	q->uidx = req->uidx;
	obj.qp.in = q->qp;
	obj.qp.out = &q->dv;
	if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP))
		fail("mlx5dv_init_obj qp");
	modify(q->qp, s->type);

	j_obj();
	jk_str("name", s->name);
	jk_str("qp_type", qp_type_name(s->type));
	jk_str("send_cq", s->scq->name);
	j_key("recv_cq");
	if (ia.recv_cq)
		j_str(s->rcq->name);
	else
		j_null();
	j_key("srq");
	if (s->srq)
		j_str(s->srq->name);
	else
		j_null();
	jk_u64("sq_sig_all", s->sq_sig_all);
	emit_cap("cap", &s->cap);
	emit_cap("cap_out", &ia.cap);
	jk_str("command", r->ex ? "CREATE_QP_EX" : "CREATE_QP");
	emit_masked("req_hex", r->drv_in, r->drv_in_len, mask, 3);
	jk_hex("resp_hex", r->drv_out, r->drv_out_len);
	jk_u64("qpn", q->qp->qp_num);
	jk_u64("uidx", q->uidx);
	j_key("sq");
	j_obj();
	jk_u64("wqe_cnt", q->dv.sq.wqe_cnt);
	jk_i64("offset", q->dv.sq.wqe_cnt && q->dv.rq.buf ? (int64_t)((uint8_t *)q->dv.sq.buf - (uint8_t *)q->dv.rq.buf) : 0);
	jk_u64("stride", q->dv.sq.stride);
	j_end();
	j_key("rq");
	j_obj();
	jk_u64("wqe_cnt", q->dv.rq.wqe_cnt);
	jk_u64("offset", 0);
	jk_u64("stride", q->dv.rq.stride);
	j_end();
	/* RAW_PACKET QPs have their SQ in a buffer of its own (sq_buf_addr) */
	jk_u64("buf_size", ((uint64_t)req->rq_wqe_count << req->rq_wqe_shift) +
				   (s->type == IBV_QPT_RAW_PACKET ? 0 : (uint64_t)req->sq_wqe_count * 64));
	j_key("bf");
	j_obj();
	uar_page = (uint8_t *)((uintptr_t)q->dv.bf.reg & ~0xfffUL);
	jk_u64("offset", (uint8_t *)q->dv.bf.reg - uar_page);
	jk_u64("size", q->dv.bf.size);
	for (int i = 0; i < fake_uar_count(); i++)
		if (fake_uar(i)->addr == uar_page)
			jk_u64("page_id", fake_uar(i)->page_id);
	j_end();
	j_key("posts");
	j_arr();
}

static void end_qp(struct qprec *q)
{
	(void)q;
	j_earr();
	j_end();
}

/* ---- snapshots of what libmlx5 writes ---- */

struct snap {
	uint8_t *sq, *rq, db[8];
};

static void take(struct qprec *q, struct snap *s)
{
	size_t sqn = (size_t)q->dv.sq.wqe_cnt * 64, rqn = (size_t)q->dv.rq.wqe_cnt * q->dv.rq.stride;

	s->sq = malloc(sqn + 1);
	s->rq = malloc(rqn + 1);
	if (sqn)
		memcpy(s->sq, q->dv.sq.buf, sqn);
	if (rqn)
		memcpy(s->rq, q->dv.rq.buf, rqn);
	memcpy(s->db, q->dv.dbrec, 8);
}

static void release(struct snap *s)
{
	free(s->sq);
	free(s->rq);
}

/* emit_blocks writes every block of the ring that changed, or whose index
 * lies in [from, to) (ring positions libmlx5 reported consuming), in ring
 * order starting at from. */
static void emit_blocks(const uint8_t *before, const uint8_t *now, uint32_t cnt, uint32_t stride,
			uint32_t from, uint32_t to)
{
	uint32_t n = (to - from) & 0xffff;
	uint8_t *mark = calloc(cnt, 1);

	j_key("wqebbs");
	j_arr();
	for (uint32_t i = 0; i < n && i < cnt; i++)
		mark[(from + i) & (cnt - 1)] = 1;
	for (uint32_t i = 0; i < cnt; i++)
		if (memcmp(before + (size_t)i * stride, now + (size_t)i * stride, stride))
			mark[i] = 1;
	for (uint32_t k = 0; k < cnt; k++) {
		uint32_t i = (from + k) & (cnt - 1);

		if (!mark[i])
			continue;
		j_obj();
		jk_u64("index", i);
		jk_hex("hex", now + (size_t)i * stride, stride);
		j_end();
	}
	j_earr();
	free(mark);
}

/* emit_uar writes what landed in the UAR pages since they were last zeroed,
 * and zeroes them. A doorbell is 8 bytes; a BlueFlame copy is whole 64-byte
 * chunks (a BlueFlame WQE always has nonzero bytes past its first 8). */
static void emit_uar(const uint8_t *qp_page)
{
	j_key("uar");
	j_arr();
	for (int u = 0; u < fake_uar_count(); u++) {
		uint8_t *p = fake_uar(u)->addr;
		int first = -1, last = -1;

		if (!p)
			continue;
		for (int i = 0; i < 4096; i++) {
			if (p[i]) {
				if (first < 0)
					first = i;
				last = i;
			}
		}
		if (first < 0)
			continue;
		first &= ~7;
		int len = last < first + 8 ? 8 : ((last - (first & ~63) + 64) & ~63);
		if (len > 8)
			first &= ~63;
		j_obj();
		if (p != qp_page)
			jk_u64("page_id", fake_uar(u)->page_id);
		jk_u64("offset", first);
		jk_hex("hex", p + first, len);
		j_end();
		memset(p, 0, 4096);
	}
	j_earr();
}

static void emit_sges(const struct ibv_sge *sg, int n, int with_data)
{
	j_key("sg_list");
	j_arr();
	for (int i = 0; i < n; i++) {
		j_obj();
		jk_u64("addr", sg[i].addr);
		jk_u64("length", sg[i].length);
		jk_u64("lkey", sg[i].lkey);
		if (with_data) {
			if (sg[i].addr < DATA_BASE || sg[i].addr + sg[i].length > DATA_BASE + DATA_LEN)
				failx("SGE outside the data area in %s", "a WR with data");
			jk_hex("data_hex", (void *)(uintptr_t)sg[i].addr, sg[i].length);
		}
		j_end();
	}
	j_earr();
}

static void emit_send_wr(struct qprec *q, const struct ibv_send_wr *w)
{
	static const struct { unsigned flag; const char *name; } flags[] = {
		{IBV_SEND_FENCE, "FENCE"}, {IBV_SEND_SIGNALED, "SIGNALED"},
		{IBV_SEND_SOLICITED, "SOLICITED"}, {IBV_SEND_INLINE, "INLINE"},
		{IBV_SEND_IP_CSUM, "IP_CSUM"},
	};

	j_obj();
	jk_u64("wr_id", w->wr_id);
	jk_str("opcode", opcode_name(w->opcode));
	j_key("send_flags");
	j_arr();
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		if (w->send_flags & flags[i].flag)
			j_str(flags[i].name);
	j_earr();
	switch (w->opcode) {
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		jk_u64("imm_data", w->imm_data);
		break;
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_LOCAL_INV:
		jk_u64("invalidate_rkey", w->invalidate_rkey);
		break;
	default:
		break;
	}
	switch (w->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		jk_u64("remote_addr", w->wr.rdma.remote_addr);
		jk_u64("rkey", w->wr.rdma.rkey);
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		jk_u64("remote_addr", w->wr.atomic.remote_addr);
		jk_u64("rkey", w->wr.atomic.rkey);
		jk_u64("compare_add", w->wr.atomic.compare_add);
		jk_u64("swap", w->wr.atomic.swap);
		break;
	default:
		break;
	}
	if (q->type == IBV_QPT_UD) {
		jk_str("ah", ah_name(w->wr.ud.ah));
		jk_u64("remote_qpn", w->wr.ud.remote_qpn);
		jk_u64("remote_qkey", w->wr.ud.remote_qkey);
	}
	if (q->type == IBV_QPT_XRC_SEND)
		jk_u64("xrc_remote_srq_num", w->qp_type.xrc.remote_srqn);
	emit_sges(w->sg_list, w->num_sge,
		  (w->send_flags & IBV_SEND_INLINE) || q->type == IBV_QPT_RAW_PACKET);
	j_end();
}

static void emit_recv_wr(const struct ibv_recv_wr *w)
{
	j_obj();
	jk_u64("wr_id", w->wr_id);
	emit_sges(w->sg_list, w->num_sge, 0);
	j_end();
}

static int list_index(const void *head, const void *bad, size_t next_off)
{
	int i = 0;

	for (const uint8_t *p = head; p; p = *(const void *const *)(p + next_off), i++)
		if (p == bad)
			return i;
	return -1;
}

static const uint8_t *qp_uar_page(struct qprec *q)
{
	return (const uint8_t *)((uintptr_t)q->dv.bf.reg & ~0xfffUL);
}

static void post_send(struct qprec *q, struct ibv_send_wr *list)
{
	struct snap s;
	struct ibv_send_wr *bad = NULL;
	int ret;
	uint16_t from, to;

	take(q, &s);
	ret = ibv_post_send(q->qp, list, &bad);
	from = be32toh(((uint32_t *)s.db)[1]);
	to = be32toh(q->dv.dbrec[1]);

	j_obj();
	jk_str("kind", "send");
	j_key("wrs");
	j_arr();
	for (struct ibv_send_wr *w = list; w; w = w->next)
		emit_send_wr(q, w);
	j_earr();
	jk_i64("ret", ret);
	jk_i64("bad_wr", ret ? list_index(list, bad, offsetof(struct ibv_send_wr, next)) : -1);
	emit_blocks(s.sq, q->dv.sq.buf, q->dv.sq.wqe_cnt, 64, from, to);
	jk_hex("dbrec_hex", q->dv.dbrec, 8);
	emit_uar(qp_uar_page(q));
	j_end();

	if (to != from) {
		/* the last WQE built starts where its control segment says */
		uint32_t idx = 0;
		uint16_t pos = from;

		while (pos != to) {
			const uint8_t *ctrl = (uint8_t *)q->dv.sq.buf + (size_t)(pos & (q->dv.sq.wqe_cnt - 1)) * 64;
			uint32_t ds = be32toh(*(const uint32_t *)(ctrl + 4)) & 0x3f;

			idx = pos;
			pos += (ds * 16 + 63) / 64;
		}
		q->last_ctrl_idx = idx;
		q->posted_since_drain = 1;
	}
	release(&s);
}

static void post_recv(struct qprec *q, struct ibv_recv_wr *list)
{
	struct snap s;
	struct ibv_recv_wr *bad = NULL;
	int ret;
	uint16_t from, to;

	take(q, &s);
	ret = ibv_post_recv(q->qp, list, &bad);
	from = be32toh(((uint32_t *)s.db)[0]);
	to = be32toh(q->dv.dbrec[0]);

	j_obj();
	jk_str("kind", "recv");
	j_key("wrs");
	j_arr();
	for (struct ibv_recv_wr *w = list; w; w = w->next)
		emit_recv_wr(w);
	j_earr();
	jk_i64("ret", ret);
	jk_i64("bad_wr", ret ? list_index(list, bad, offsetof(struct ibv_recv_wr, next)) : -1);
	emit_blocks(s.rq, q->dv.rq.buf, q->dv.rq.wqe_cnt, q->dv.rq.stride, from, to);
	jk_hex("dbrec_hex", q->dv.dbrec, 8);
	emit_uar(qp_uar_page(q));
	j_end();
	release(&s);
}

/* ---- CQEs ---- */

#define CQE_OWNER_OF(c, ci) (((ci) & (c)->dv.cqe_cnt) ? 1 : 0)

static uint8_t *cqe_at(struct cqrec *c, uint32_t ci)
{
	uint8_t *p = (uint8_t *)c->dv.buf + (size_t)(ci & (c->dv.cqe_cnt - 1)) * c->dv.cqe_size;

	return c->dv.cqe_size == 128 ? p + 64 : p;
}

static void build_req_cqe(uint8_t *cqe, struct qprec *q, uint16_t wqe_counter, uint8_t send_opcode,
			  uint32_t byte_cnt, int owner)
{
	memset(cqe, 0, 64);
	*(uint32_t *)(cqe + 32) = htobe32(q->uidx & 0xffffff);
	*(uint32_t *)(cqe + 44) = htobe32(byte_cnt);
	*(uint32_t *)(cqe + 56) = htobe32((uint32_t)send_opcode << 24 | q->qp->qp_num);
	*(uint16_t *)(cqe + 60) = htobe16(wqe_counter);
	cqe[63] = (MLX5_CQE_REQ << 4) | owner;
}

static void build_resp_cqe(uint8_t *cqe, struct qprec *q, uint8_t opcode, uint16_t wqe_counter,
			   uint32_t byte_cnt, int owner)
{
	memset(cqe, 0, 64);
	*(uint32_t *)(cqe + 32) = htobe32(q->uidx & 0xffffff);
	*(uint32_t *)(cqe + 44) = htobe32(byte_cnt);
	*(uint32_t *)(cqe + 56) = htobe32(q->qp->qp_num);
	*(uint16_t *)(cqe + 60) = htobe16(wqe_counter);
	cqe[63] = (opcode << 4) | owner;
}

/* drain completes everything posted on q's SQ with one requester CQE for
 * the last WQE (libmlx5 then retires all earlier ones), so later posts do
 * not overflow. Recorded as a post of kind "drain". */
static void drain(struct qprec *q)
{
	struct cqrec *c = q->scq;
	struct ibv_wc wc;
	uint8_t *cqe;
	int n;

	if (!q->posted_since_drain)
		return;
	cqe = cqe_at(c, c->ci);
	build_req_cqe(cqe, q, q->last_ctrl_idx, MLX5_OPCODE_SEND, 0, CQE_OWNER_OF(c, c->ci));
	n = ibv_poll_cq(c->cq, 1, &wc);
	if (n != 1 || wc.status != IBV_WC_SUCCESS)
		failx("drain of %s failed", q->name);
	c->ci++;
	q->posted_since_drain = 0;

	j_obj();
	jk_str("kind", "drain");
	jk_u64("wqe_counter", q->last_ctrl_idx);
	jk_u64("wr_id", wc.wr_id);
	j_end();
}

/* ---- work request building ---- */

static struct ibv_sge sge_pool[4096];
static int nsge_pool;
static struct ibv_send_wr swr_pool[1024];
static int nswr_pool;
static struct ibv_recv_wr rwr_pool[256];
static int nrwr_pool;
static uint64_t next_wr_id = 0x1000;
static uint64_t next_data_off;

static void reset_pools(void)
{
	nsge_pool = nswr_pool = nrwr_pool = 0;
}

/* sges returns n SGEs of the given lengths at fresh places in the data area. */
static struct ibv_sge *sges(int n, const uint32_t *lens)
{
	struct ibv_sge *s = &sge_pool[nsge_pool];

	nsge_pool += n;
	for (int i = 0; i < n; i++) {
		if (next_data_off + lens[i] + 64 > DATA_LEN)
			next_data_off = 0;
		s[i].addr = DATA_BASE + next_data_off;
		s[i].length = lens[i];
		s[i].lkey = LKEY + (uint32_t)(i << 8);
		next_data_off += (lens[i] + 0x47) & ~0x3fULL;
	}
	return s;
}

static struct ibv_send_wr *swr(enum ibv_wr_opcode op, unsigned flags, int nsge, const uint32_t *lens)
{
	struct ibv_send_wr *w = &swr_pool[nswr_pool++];
	static const uint32_t one[1] = {64};
	uint64_t id = next_wr_id++;

	memset(w, 0, sizeof(*w));
	w->wr_id = id;
	w->opcode = op;
	w->send_flags = flags;
	if (!lens)
		lens = one;
	w->num_sge = nsge;
	w->sg_list = nsge ? sges(nsge, lens) : NULL;
	switch (op) {
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		w->imm_data = htobe32(0x11223344 + (uint32_t)id);
		break;
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_LOCAL_INV:
		w->invalidate_rkey = 0x00beef00 + (uint32_t)(id & 0xff);
		break;
	default:
		break;
	}
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		w->wr.rdma.remote_addr = 0x7f0012340000ULL + id * 0x100;
		w->wr.rdma.rkey = RKEY;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		w->wr.atomic.remote_addr = 0x7f0012340000ULL + id * 0x100;
		w->wr.atomic.rkey = RKEY;
		w->wr.atomic.compare_add = 0x0102030405060708ULL + id;
		w->wr.atomic.swap = 0x1112131415161718ULL + id;
		break;
	default:
		break;
	}
	return w;
}

static struct ibv_send_wr *chain(int n, struct ibv_send_wr **ws)
{
	for (int i = 0; i + 1 < n; i++)
		ws[i]->next = ws[i + 1];
	return ws[0];
}

static struct ibv_recv_wr *rwr(int nsge, const uint32_t *lens)
{
	struct ibv_recv_wr *w = &rwr_pool[nrwr_pool++];
	static const uint32_t one[1] = {256};

	memset(w, 0, sizeof(*w));
	w->wr_id = next_wr_id++;
	w->num_sge = nsge;
	w->sg_list = nsge ? sges(nsge, lens ? lens : one) : NULL;
	return w;
}

static const uint32_t L4[] = {64, 128, 256, 512, 1024, 32, 16, 8};

/* ---- the tables ---- */

static void rc_opcodes(struct qprec *q)
{
	static const enum ibv_wr_opcode ops[] = {
		IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_SEND_WITH_INV, IBV_WR_RDMA_WRITE,
		IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP,
		IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_LOCAL_INV,
	};
	static const unsigned flagsets[] = {
		0, IBV_SEND_SIGNALED, IBV_SEND_SOLICITED, IBV_SEND_FENCE,
		IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_FENCE,
	};
	static const uint32_t eight[] = {8};

	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
		int atomic = ops[o] == IBV_WR_ATOMIC_CMP_AND_SWP || ops[o] == IBV_WR_ATOMIC_FETCH_AND_ADD;
		int nsge = ops[o] == IBV_WR_LOCAL_INV ? 0 : 1;

		for (size_t f = 0; f < sizeof(flagsets) / sizeof(flagsets[0]); f++) {
			reset_pools();
			post_send(q, swr(ops[o], flagsets[f], nsge, atomic ? eight : NULL));
			drain(q);
		}
	}
}

static void rc_sges(struct qprec *q)
{
	static const enum ibv_wr_opcode ops[] = {IBV_WR_SEND, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ,
						 IBV_WR_SEND_WITH_IMM};
	int max = q->cap.max_send_sge;

	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
		for (int n = 0; n <= max + 1; n++) {
			if (n != 0 && n != 1 && n != 2 && n < max - 1)
				continue;
			reset_pools();
			post_send(q, swr(ops[o], IBV_SEND_SIGNALED, n, L4));
			drain(q);
		}
	}
	/* a zero-length SGE in the middle is skipped */
	{
		static const uint32_t lens[] = {16, 0, 32};

		reset_pools();
		post_send(q, swr(IBV_WR_SEND, IBV_SEND_SIGNALED, 3, lens));
		drain(q);
	}
}

static void rc_inline(struct qprec *q)
{
	static const enum ibv_wr_opcode ops[] = {IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_SEND_WITH_INV,
						 IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM};
	int lim = q->cap.max_inline_data;
	const uint32_t lens[] = {0, 1, 12, 13, 28, 29, (uint32_t)lim - 1, (uint32_t)lim, (uint32_t)lim + 1};

	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
		for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
			if (o != 0 && lens[l] != 1 && lens[l] < (uint32_t)lim - 1)
				continue;
			reset_pools();
			post_send(q, swr(ops[o], IBV_SEND_INLINE | IBV_SEND_SIGNALED, 1, &lens[l]));
			drain(q);
		}
	}
	/* inline with no SGE at all */
	reset_pools();
	post_send(q, swr(IBV_WR_SEND, IBV_SEND_INLINE | IBV_SEND_SIGNALED, 0, NULL));
	drain(q);
	/* several SGEs gathered into one inline segment: within and over the limit */
	{
		uint32_t a[] = {5, 7, (uint32_t)lim - 12}, b[] = {5, 7, (uint32_t)lim - 11};

		reset_pools();
		post_send(q, swr(IBV_WR_SEND, IBV_SEND_INLINE, 3, a));
		drain(q);
		reset_pools();
		post_send(q, swr(IBV_WR_RDMA_WRITE, IBV_SEND_INLINE, 3, b));
		drain(q);
	}
}

static void rc_lists(struct qprec *q)
{
	static const uint32_t eight[] = {8};
	struct ibv_send_wr *ws[8];
	uint32_t over = q->cap.max_inline_data + 1;

	reset_pools();
	ws[0] = swr(IBV_WR_SEND, 0, 1, NULL);
	ws[1] = swr(IBV_WR_RDMA_WRITE, 0, 2, L4);
	ws[2] = swr(IBV_WR_SEND_WITH_IMM, IBV_SEND_SIGNALED, 1, NULL);
	post_send(q, chain(3, ws));
	drain(q);

	reset_pools();
	ws[0] = swr(IBV_WR_RDMA_READ, 0, 1, NULL);
	ws[1] = swr(IBV_WR_ATOMIC_FETCH_AND_ADD, 0, 1, eight);
	ws[2] = swr(IBV_WR_ATOMIC_CMP_AND_SWP, IBV_SEND_FENCE, 1, eight);
	ws[3] = swr(IBV_WR_SEND, IBV_SEND_INLINE, 1, NULL);
	ws[4] = swr(IBV_WR_LOCAL_INV, IBV_SEND_SIGNALED, 0, NULL);
	post_send(q, chain(5, ws));
	drain(q);

	/* the second of three fails (inline over the limit) */
	reset_pools();
	ws[0] = swr(IBV_WR_SEND, 0, 1, NULL);
	ws[1] = swr(IBV_WR_SEND, IBV_SEND_INLINE, 1, &over);
	ws[2] = swr(IBV_WR_SEND, IBV_SEND_SIGNALED, 1, NULL);
	post_send(q, chain(3, ws));
	drain(q);

	/* the third of three has too many SGEs */
	reset_pools();
	ws[0] = swr(IBV_WR_SEND, 0, 1, NULL);
	ws[1] = swr(IBV_WR_SEND, 0, 1, NULL);
	ws[2] = swr(IBV_WR_SEND, IBV_SEND_SIGNALED, q->cap.max_send_sge + 1, L4);
	post_send(q, chain(3, ws));
	drain(q);
}

/* rc_overflow fills the SQ without draining until libmlx5 refuses. */
static void rc_overflow(struct qprec *q)
{
	int posted = 0;

	for (;;) {
		int before;

		reset_pools();
		before = be32toh(q->dv.dbrec[1]);
		post_send(q, swr(IBV_WR_SEND, 0, 1, NULL));
		if ((int)be32toh(q->dv.dbrec[1]) == before)
			break;
		if (++posted > 4096)
			failx("%s: the SQ never filled", q->name);
	}
	drain(q);
}

static void recv_table(struct qprec *q)
{
	struct ibv_recv_wr *a, *b, *c;
	int max = q->cap.max_recv_sge;

	for (int n = 0; n <= max + 1; n++) {
		reset_pools();
		post_recv(q, rwr(n, L4));
	}
	reset_pools();
	a = rwr(1, NULL);
	b = rwr(2, L4);
	c = rwr(1, NULL);
	a->next = b;
	b->next = c;
	post_recv(q, a);
	/* a zero-length SGE is skipped */
	{
		static const uint32_t lens[] = {16, 0, 32};

		reset_pools();
		post_recv(q, rwr(3, lens));
	}
}

static void rc_wrap(struct qprec *q)
{
	/* WQEs of 1, 2, 3 and 4 basic blocks in turn, each alone, and lists
	 * of two; several laps of the ring */
	static const uint32_t inl[] = {60, 100, 160};
	int laps = 0;
	uint16_t start = be32toh(q->dv.dbrec[1]);

	for (int i = 0; laps < 3; i++) {
		reset_pools();
		switch (i % 6) {
		case 0:
			post_send(q, swr(IBV_WR_SEND, IBV_SEND_SIGNALED, 1, NULL));
			break;
		case 1:
			post_send(q, swr(IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, 3, L4));
			break;
		case 2:
			post_send(q, swr(IBV_WR_SEND, IBV_SEND_INLINE, 1, &inl[i % 3]));
			break;
		case 3:
			post_send(q, swr(IBV_WR_RDMA_WRITE_WITH_IMM, IBV_SEND_INLINE | IBV_SEND_SIGNALED, 1,
					 &inl[(i + 1) % 3]));
			break;
		case 4: {
			struct ibv_send_wr *ws[2];

			ws[0] = swr(IBV_WR_SEND, 0, 4, L4);
			ws[1] = swr(IBV_WR_RDMA_READ, IBV_SEND_SIGNALED, 2, L4);
			post_send(q, chain(2, ws));
			break;
		}
		case 5:
			post_send(q, swr(IBV_WR_SEND_WITH_IMM, IBV_SEND_INLINE, 1, &inl[2]));
			break;
		}
		drain(q);
		laps = (uint16_t)(be32toh(q->dv.dbrec[1]) - start) / q->dv.sq.wqe_cnt;
	}
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	int n;
	const struct fake_cmd_rec *r;

	if (argc != 2) {
		fprintf(stderr, "usage: golden <sysfs dir>\n");
		return 2;
	}
	/* a fixed environment: libmlx5 reads these when the device is opened */
	for (char **e = environ; *e;) {
		if (!strncmp(*e, "MLX5_", 5) || !strncmp(*e, "RDMAV_", 6) || !strncmp(*e, "IBV_", 4)) {
			char name[128];
			size_t k = strcspn(*e, "=");

			snprintf(name, sizeof(name), "%.*s", (int)k, *e);
			unsetenv(name);
			continue;
		}
		e++;
	}
	setenv("SYSFS_PATH", argv[1], 1);

	data = mmap((void *)DATA_BASE, DATA_LEN, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (data != (void *)DATA_BASE)
		fail("mmap of the data area");
	for (uint64_t i = 0; i < DATA_LEN; i++)
		data[i] = data_byte(i);

	list = ibv_get_device_list(&n);
	if (!list || n != 1)
		failx("expected one device, found %s", list && n ? "more" : "none");
	ctx = ibv_open_device(list[0]);
	if (!ctx)
		fail("ibv_open_device");
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		fail("ibv_alloc_pd");
	mr = ibv_reg_mr(pd, data, DATA_LEN, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		fail("ibv_reg_mr");

	j_obj();
	jk_str("generator", "libmlx5 " GENERATOR_VERSION);
	j_key("context");
	j_obj();
	r = fake_last_cmd(IB_USER_VERBS_CMD_GET_CONTEXT);
	jk_hex("req_hex", r->drv_in, r->drv_in_len);
	jk_hex("resp_hex", r->drv_out, r->drv_out_len);
	jk_u64("page_size", sysconf(_SC_PAGESIZE));
	j_key("env");
	j_obj();
	j_end();
	j_key("uars");
	j_arr();
	for (int i = 0; i < fake_uar_count(); i++) {
		j_obj();
		jk_u64("page_id", fake_uar(i)->page_id);
		jk_str("type", fake_uar(i)->nc ? "NC" : "BF");
		j_end();
	}
	j_earr();
	jk_u64("pdn", FAKE_FIRST_PDN);
	jk_u64("mr_lkey", mr->lkey);
	jk_u64("mr_rkey", mr->rkey);
	jk_u64("data_base", DATA_BASE);
	j_end();

	struct cqrec *cq0;
	j_key("cqs");
	j_arr();
	cq0 = new_cq("cq0", 255);
	j_earr();

	j_key("qps");
	j_arr();
	{
		struct qprec q;
		struct qpspec s = {.name = "rc", .type = IBV_QPT_RC, .scq = cq0, .rcq = cq0,
				   .cap = {.max_send_wr = 64, .max_recv_wr = 32, .max_send_sge = 4,
					   .max_recv_sge = 4, .max_inline_data = 64}};

		begin_qp(&q, &s);
		rc_opcodes(&q);
		rc_sges(&q);
		rc_inline(&q);
		rc_lists(&q);
		recv_table(&q);
		end_qp(&q);
	}
	{
		struct qprec q;
		struct qpspec s = {.name = "rc-wrap", .type = IBV_QPT_RC, .scq = cq0, .rcq = cq0,
				   .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 4,
					   .max_recv_sge = 1, .max_inline_data = 160}};

		begin_qp(&q, &s);
		rc_wrap(&q);
		rc_overflow(&q);
		end_qp(&q);
	}
	j_earr();
	(void)cq_by_ibv;
	(void)srq_name;
	(void)build_resp_cqe;
	(void)new_ah;
	j_end();
	return 0;
}
