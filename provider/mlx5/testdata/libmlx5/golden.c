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
#include <fcntl.h>
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
	/* CREATE_CQ: the response pointer and user_handle; CREATE_CQ_EX:
	 * user_handle */
	static const int core_mask[] = {0, 8};

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
	emit_masked("core_req_hex", r->core_in, r->core_in_len, core_mask, r->ex ? 1 : 2);
	emit_masked("req_hex", r->drv_in, r->drv_in_len, mask, 2);
	jk_hex("resp_hex", r->drv_out, r->drv_out_len);
	jk_u64("cqn", c->dv.cqn);
	jk_u64("ncqe", c->dv.cqe_cnt);
	jk_u64("cq_uar_offset", (uintptr_t)c->dv.cq_uar & 0xfff);
	j_end();
	return c;
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
	uint32_t uidx;
	int xrc;
	uint32_t max_wr, max_sge;
	struct fake_cmd_rec rec;
	int posted[1024]; /* WQE indexes posted and not yet completed, in order */
	int nposted;
};

static struct srqrec srqs[4];
static int nsrqs;

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
	uint16_t wqe_log[4096]; /* start index of every WQE built, in order */
	int nwqe_log;
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

static struct ibv_xrcd *xrcd;

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
	{
		/* the response pointer and user_handle */
		static const int core_mask[] = {0, 8};

		emit_masked("core_req_hex", r->core_in, r->core_in_len, core_mask, 2);
	}
	emit_masked("req_hex", r->drv_in, r->drv_in_len, mask, 3);
	jk_hex("resp_hex", r->drv_out, r->drv_out_len);
	jk_u64("qpn", q->qp->qp_num);
	jk_u64("uidx", q->uidx);
	j_key("sq");
	j_obj();
	jk_u64("wqe_cnt", q->dv.sq.wqe_cnt);
	/* RAW_PACKET: the SQ is a buffer of its own (sq_buf_addr), offset 0 in it */
	jk_i64("offset", q->dv.sq.wqe_cnt && q->dv.rq.buf && s->type != IBV_QPT_RAW_PACKET
				 ? (int64_t)((uint8_t *)q->dv.sq.buf - (uint8_t *)q->dv.rq.buf) : 0);
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

/* emit_uar writes what landed in the UAR pages since they were last
 * filled with FAKE_UAR_POISON, and fills them again: every run of 8-byte
 * words that differ from the pattern, with its offset in the page (a
 * doorbell is one word, a BlueFlame copy whole 64-byte chunks). */
static void emit_uar(const uint8_t *qp_page)
{
	j_key("uar");
	j_arr();
	for (int u = 0; u < fake_uar_count(); u++) {
		uint64_t *p = fake_uar(u)->addr;
		int i = 0;

		if (!p)
			continue;
		while (i < 512) {
			int start;

			if (p[i] == FAKE_UAR_POISON) {
				i++;
				continue;
			}
			start = i;
			while (i < 512 && p[i] != FAKE_UAR_POISON)
				i++;
			j_obj();
			if ((uint8_t *)p != qp_page)
				jk_u64("page_id", fake_uar(u)->page_id);
			jk_u64("offset", (uint64_t)start * 8);
			jk_hex("hex", p + start, (size_t)(i - start) * 8);
			j_end();
			for (int k = start; k < i; k++)
				p[k] = FAKE_UAR_POISON;
		}
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
			if (q->nwqe_log < 4096)
				q->wqe_log[q->nwqe_log++] = pos;
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


/* drain_recv completes the n oldest receives of q's RQ with responder
 * CQEs (a RQ completes in order, whatever the counter says). Recorded as a
 * post of kind "drain_recv". */
static void drain_recv(struct qprec *q, int n)
{
	struct cqrec *c = q->rcq;
	struct ibv_wc wc;

	j_obj();
	jk_str("kind", "drain_recv");
	jk_i64("count", n);
	j_key("wr_ids");
	j_arr();
	for (int i = 0; i < n; i++) {
		uint8_t *cqe = cqe_at(c, c->ci);

		build_resp_cqe(cqe, q, MLX5_CQE_RESP_SEND, 0, 64, CQE_OWNER_OF(c, c->ci));
		if (ibv_poll_cq(c->cq, 1, &wc) != 1 || wc.status != IBV_WC_SUCCESS)
			failx("drain_recv of %s failed", q->name);
		c->ci++;
		j_u64(wc.wr_id);
	}
	j_earr();
	j_end();
}

/* ---- SRQs ---- */

static struct srqrec *new_srq(const char *name, uint32_t max_wr, uint32_t max_sge, int xrc,
			      struct ibv_xrcd *xd, struct cqrec *cq)
{
	struct srqrec *s = &srqs[nsrqs++];
	struct mlx5dv_obj obj = {};
	const struct fake_cmd_rec *r;

	s->name = name;
	s->xrc = xrc;
	s->max_wr = max_wr;
	s->max_sge = max_sge;
	if (xrc) {
		struct ibv_srq_init_attr_ex a = {};

		a.attr.max_wr = max_wr;
		a.attr.max_sge = max_sge;
		a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
			      IBV_SRQ_INIT_ATTR_CQ;
		a.srq_type = IBV_SRQT_XRC;
		a.pd = pd;
		a.xrcd = xd;
		a.cq = cq->cq;
		s->srq = ibv_create_srq_ex(ctx, &a);
	} else {
		struct ibv_srq_init_attr a = {};

		a.attr.max_wr = max_wr;
		a.attr.max_sge = max_sge;
		s->srq = ibv_create_srq(pd, &a);
	}
	if (!s->srq)
		fail(name);
	r = last_of(IB_USER_VERBS_CMD_CREATE_SRQ, IB_USER_VERBS_CMD_CREATE_XSRQ);
	s->rec = *r;
	s->uidx = ((const struct mlx5_ib_create_srq *)r->drv_in)->uidx;
	obj.srq.in = s->srq;
	obj.srq.out = &s->dv;
	if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_SRQ))
		fail("mlx5dv_init_obj srq");
	/* the ring has every WQE linked to the next; tail is the last one */
	s->wqe_cnt = s->dv.tail + 1;
	s->srqn = ((const struct mlx5_ib_create_srq_resp *)r->drv_out)->srqn;
	return s;
}

static void begin_srq(struct srqrec *s)
{
	static const int mask[] = {0, 8};
	const struct fake_cmd_rec *r = &s->rec;

	j_obj();
	jk_str("name", s->name);
	j_key("attr");
	j_obj();
	jk_u64("max_wr", s->max_wr);
	jk_u64("max_sge", s->max_sge);
	j_end();
	jk_u64("xrc", s->xrc);
	jk_str("command", r->core_in_len == sizeof(struct ib_uverbs_create_xsrq) ? "CREATE_XSRQ" : "CREATE_SRQ");
	emit_masked("core_req_hex", r->core_in, r->core_in_len, mask, 2); /* response, user_handle */
	emit_masked("req_hex", r->drv_in, r->drv_in_len, mask, 2);
	jk_hex("resp_hex", r->drv_out, r->drv_out_len);
	jk_u64("srqn", s->srqn);
	jk_u64("uidx", s->uidx);
	jk_u64("wqe_cnt", s->wqe_cnt);
	jk_u64("stride", s->dv.stride);
	jk_u64("head", s->dv.head);
	jk_u64("tail", s->dv.tail);
	j_key("posts");
	j_arr();
}

static void post_srq(struct srqrec *s, struct ibv_recv_wr *list)
{
	size_t n = (size_t)s->wqe_cnt * s->dv.stride;
	uint8_t *before = malloc(n);
	struct ibv_recv_wr *bad = NULL;
	int ret;

	memcpy(before, s->dv.buf, n);
	ret = ibv_post_srq_recv(s->srq, list, &bad);

	j_obj();
	jk_str("kind", "recv");
	j_key("wrs");
	j_arr();
	for (struct ibv_recv_wr *w = list; w; w = w->next)
		emit_recv_wr(w);
	j_earr();
	jk_i64("ret", ret);
	jk_i64("bad_wr", ret ? list_index(list, bad, offsetof(struct ibv_recv_wr, next)) : -1);
	/* SRQ WQEs are taken from a free list, not in ring order: list the
	 * changed ones in the order they were used (every post writes a fresh
	 * data address, so every used WQE changes) */
	j_key("wqebbs");
	j_arr();
	{
		int used[256], nused = 0;

		for (uint32_t i = 0; i < s->wqe_cnt; i++)
			if (memcmp(before + i * s->dv.stride, (uint8_t *)s->dv.buf + i * s->dv.stride, s->dv.stride))
				used[nused++] = (int)i;
		/* order of use: follow the next pointers from the first WQE used;
		 * the WQEs used are those whose data segments changed, and the
		 * free list is a chain, so the used ones are a prefix of it */
		int order[256], norder = 0;
		for (int k = 0; k < nused; k++) {
			int cand = -1;
			for (int m = 0; m < nused; m++) {
				int is_next_of_other = 0;
				if (used[m] < 0)
					continue;
				for (int o = 0; o < nused; o++) {
					if (used[o] < 0 || o == m)
						continue;
					const uint8_t *prev = before + used[o] * s->dv.stride;
					if (be16toh(*(const uint16_t *)(prev + 2)) == used[m])
						is_next_of_other = 1;
				}
				if (!is_next_of_other) {
					cand = m;
					break;
				}
			}
			if (cand < 0)
				cand = 0;
			order[norder++] = used[cand];
			used[cand] = -1;
			/* drop the chosen one from further consideration */
			for (int m = 0; m < nused; m++)
				if (used[m] == order[norder - 1])
					used[m] = -1;
		}
		for (int k = 0; k < norder; k++) {
			j_obj();
			jk_u64("index", order[k]);
			jk_hex("hex", (uint8_t *)s->dv.buf + order[k] * s->dv.stride, s->dv.stride);
			j_end();
			if (s->nposted < 1024)
				s->posted[s->nposted++] = order[k];
		}
	}
	j_earr();
	jk_hex("dbrec_hex", s->dv.dbrec, 4);
	j_key("uar");
	j_arr();
	j_earr();
	j_end();
	free(before);
}

/* drain_srq completes the SRQ WQE at posted position k (0 = oldest) through
 * a responder CQE of QP q (whose SRQ it is), or of the XRC SRQ itself. */
static void drain_srq(struct srqrec *s, struct qprec *q, struct cqrec *c, int k)
{
	struct ibv_wc wc;
	uint8_t *cqe = cqe_at(c, c->ci);
	int idx = s->posted[k];

	memset(cqe, 0, 64);
	if (q)
		build_resp_cqe(cqe, q, MLX5_CQE_RESP_SEND, (uint16_t)idx, 64, CQE_OWNER_OF(c, c->ci));
	else {
		*(uint32_t *)(cqe + 32) = htobe32(s->uidx);
		*(uint32_t *)(cqe + 44) = htobe32(64);
		*(uint16_t *)(cqe + 60) = htobe16((uint16_t)idx);
		cqe[63] = (MLX5_CQE_RESP_SEND << 4) | CQE_OWNER_OF(c, c->ci);
	}
	if (ibv_poll_cq(c->cq, 1, &wc) != 1 || wc.status != IBV_WC_SUCCESS)
		failx("drain of %s failed", s->name);
	c->ci++;
	memmove(&s->posted[k], &s->posted[k + 1], (size_t)(s->nposted - k - 1) * sizeof(int));
	s->nposted--;

	j_obj();
	jk_str("kind", "drain");
	jk_u64("wqe_counter", (uint64_t)idx);
	jk_u64("wr_id", wc.wr_id);
	j_end();
}

static void srq_table(struct srqrec *s, struct qprec *user, struct cqrec *c)
{
	struct ibv_recv_wr *a, *b, *d;

	for (uint32_t n = 0; n <= s->max_sge + 1; n++) {
		reset_pools();
		post_srq(s, rwr((int)n, L4));
	}
	reset_pools();
	a = rwr(1, NULL);
	b = rwr(2, L4);
	d = rwr(1, NULL);
	a->next = b;
	b->next = d;
	post_srq(s, a);
	if (!c)
		return;
	/* complete some out of order, post again, until full, complete all, refill */
	drain_srq(s, user, c, 1);
	drain_srq(s, user, c, 0);
	drain_srq(s, user, c, 2);
	for (int i = 0; i < 64; i++) {
		int before = s->nposted;

		reset_pools();
		post_srq(s, rwr(1, NULL));
		if (s->nposted == before)
			break;
	}
	while (s->nposted > 0)
		drain_srq(s, user, c, s->nposted > 3 ? 3 : s->nposted - 1);
	for (int i = 0; i < 5; i++) {
		reset_pools();
		post_srq(s, rwr(2, L4));
	}
}

/* ---- more QP tables ---- */

/* ud_dest addresses a UD send through the AHs in turn. */
static struct ibv_send_wr *ud_dest(struct ibv_send_wr *w, int a)
{
	w->wr.ud.ah = ahs[a % nahs].ah;
	w->wr.ud.remote_qpn = 0x3300 + (uint32_t)a;
	w->wr.ud.remote_qkey = 0x11111111;
	return w;
}

static void ud_table(struct qprec *q)
{
	int lim = q->cap.max_inline_data, max = q->cap.max_send_sge;
	uint32_t lens[] = {0, 1, 16, (uint32_t)lim - 1, (uint32_t)lim, (uint32_t)lim + 1};
	static const unsigned flagsets[] = {0, IBV_SEND_SIGNALED, IBV_SEND_SOLICITED,
					    IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_FENCE};
	int a = 0;

#define UD(w) ud_dest((w), a++)
	for (int op = 0; op < 2; op++) {
		enum ibv_wr_opcode o = op ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;

		for (size_t f = 0; f < sizeof(flagsets) / sizeof(flagsets[0]); f++) {
			reset_pools();
			post_send(q, UD(swr(o, flagsets[f], 1, NULL)));
			drain(q);
		}
		for (int n = 0; n <= max + 1; n++) {
			reset_pools();
			post_send(q, UD(swr(o, IBV_SEND_SIGNALED, n, L4)));
			drain(q);
		}
		for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
			reset_pools();
			post_send(q, UD(swr(o, IBV_SEND_INLINE | IBV_SEND_SIGNALED, 1, &lens[l])));
			drain(q);
		}
	}
	{
		struct ibv_send_wr *ws[3];

		reset_pools();
		ws[0] = UD(swr(IBV_WR_SEND, 0, 1, NULL));
		ws[1] = UD(swr(IBV_WR_SEND_WITH_IMM, IBV_SEND_INLINE, 1, &lens[2]));
		ws[2] = UD(swr(IBV_WR_SEND, IBV_SEND_SIGNALED, 2, L4));
		post_send(q, chain(3, ws));
		drain(q);
	}
	/* wrap: datagram WQEs of 2 to 4 basic blocks, several laps */
	{
		uint16_t start = be32toh(q->dv.dbrec[1]);

		for (int i = 0; (uint16_t)(be32toh(q->dv.dbrec[1]) - start) < 3 * q->dv.sq.wqe_cnt; i++) {
			reset_pools();
			if (i % 3 == 2)
				post_send(q, UD(swr(IBV_WR_SEND, IBV_SEND_INLINE, 1, &lens[i % 5])));
			else
				post_send(q, UD(swr(i % 2 ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, IBV_SEND_SIGNALED,
						    1 + i % max, L4)));
			drain(q);
		}
	}
#undef UD
	recv_table(q);
}

static void uc_table(struct qprec *q)
{
	static const enum ibv_wr_opcode ops[] = {IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE,
						 IBV_WR_RDMA_WRITE_WITH_IMM};
	static const unsigned flagsets[] = {0, IBV_SEND_SIGNALED, IBV_SEND_SOLICITED, IBV_SEND_FENCE,
					    IBV_SEND_INLINE | IBV_SEND_SIGNALED};
	uint32_t lim = q->cap.max_inline_data;

	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
		for (size_t f = 0; f < sizeof(flagsets) / sizeof(flagsets[0]); f++) {
			reset_pools();
			post_send(q, swr(ops[o], flagsets[f], 1, NULL));
			drain(q);
		}
		reset_pools();
		post_send(q, swr(ops[o], IBV_SEND_SIGNALED, (int)q->cap.max_send_sge, L4));
		drain(q);
		reset_pools();
		post_send(q, swr(ops[o], IBV_SEND_INLINE, 1, &lim));
		drain(q);
	}
	recv_table(q);
}

static void xrc_table(struct qprec *q, uint32_t srqn)
{
	static const enum ibv_wr_opcode ops[] = {
		IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_SEND_WITH_INV, IBV_WR_RDMA_WRITE,
		IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP,
		IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_LOCAL_INV,
	};
	static const uint32_t eight[] = {8};
	uint32_t lim = q->cap.max_inline_data, over = lim + 1;

	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
		int atomic = ops[o] == IBV_WR_ATOMIC_CMP_AND_SWP || ops[o] == IBV_WR_ATOMIC_FETCH_AND_ADD;
		struct ibv_send_wr *w;

		reset_pools();
		w = swr(ops[o], IBV_SEND_SIGNALED, ops[o] == IBV_WR_LOCAL_INV ? 0 : 1, atomic ? eight : NULL);
		w->qp_type.xrc.remote_srqn = srqn;
		post_send(q, w);
		drain(q);
	}
	for (int i = 0; i < 3; i++) {
		struct ibv_send_wr *w;

		reset_pools();
		if (i == 0)
			w = swr(IBV_WR_SEND, IBV_SEND_SIGNALED, (int)q->cap.max_send_sge, L4);
		else
			w = swr(IBV_WR_SEND, IBV_SEND_INLINE, 1, i == 1 ? &lim : &over);
		w->qp_type.xrc.remote_srqn = srqn + (uint32_t)i;
		post_send(q, w);
		drain(q);
	}
	/* wrap */
	{
		uint16_t start = be32toh(q->dv.dbrec[1]);

		for (int i = 0; (uint16_t)(be32toh(q->dv.dbrec[1]) - start) < 3 * q->dv.sq.wqe_cnt; i++) {
			struct ibv_send_wr *w;

			reset_pools();
			w = i % 2 ? swr(IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, 1 + i % 4 / 2, L4)
				  : swr(IBV_WR_SEND, IBV_SEND_INLINE, 1, &lim);
			w->qp_type.xrc.remote_srqn = srqn;
			post_send(q, w);
			drain(q);
		}
	}
}

static void raw_table(struct qprec *q)
{
	uint32_t lim = q->cap.max_inline_data;
	static const uint32_t one64[] = {64}, exact[] = {18}, split[] = {10, 50}, split3[] = {6, 6, 30},
			      short14[] = {14}, big[] = {1514}, hdrdata[] = {18, 100, 200};
	struct ibv_send_wr *ws[3];

	reset_pools();
	post_send(q, swr(IBV_WR_SEND, IBV_SEND_SIGNALED, 1, one64));
	drain(q);
	reset_pools();
	post_send(q, swr(IBV_WR_SEND, 0, 1, exact));
	drain(q);
	reset_pools();
	post_send(q, swr(IBV_WR_SEND, IBV_SEND_SIGNALED, 2, split));
	drain(q);
	reset_pools();
	post_send(q, swr(IBV_WR_SEND, IBV_SEND_SIGNALED, 3, split3));
	drain(q);
	reset_pools();
	post_send(q, swr(IBV_WR_SEND, IBV_SEND_SIGNALED, 1, short14));
	drain(q);
	reset_pools();
	post_send(q, swr(IBV_WR_SEND, IBV_SEND_SIGNALED | IBV_SEND_IP_CSUM, 1, big));
	drain(q);
	reset_pools();
	post_send(q, swr(IBV_WR_SEND, IBV_SEND_SIGNALED, 3, hdrdata));
	drain(q);
	reset_pools();
	post_send(q, swr(IBV_WR_SEND, IBV_SEND_SIGNALED, (int)q->cap.max_send_sge, L4));
	drain(q);
	reset_pools();
	post_send(q, swr(IBV_WR_SEND, IBV_SEND_SIGNALED, (int)q->cap.max_send_sge + 1, L4));
	drain(q);
	{
		uint32_t l[] = {18 + 1, lim, lim + 1, 60};

		for (int i = 0; i < 4; i++) {
			reset_pools();
			post_send(q, swr(IBV_WR_SEND, IBV_SEND_INLINE | IBV_SEND_SIGNALED, 1, &l[i]));
			drain(q);
		}
	}
	reset_pools();
	ws[0] = swr(IBV_WR_SEND, 0, 1, one64);
	ws[1] = swr(IBV_WR_SEND, IBV_SEND_SOLICITED, 2, split);
	ws[2] = swr(IBV_WR_SEND, IBV_SEND_SIGNALED, 1, big);
	post_send(q, chain(3, ws));
	drain(q);
	{
		uint16_t start = be32toh(q->dv.dbrec[1]);

		for (int i = 0; (uint16_t)(be32toh(q->dv.dbrec[1]) - start) < 3 * q->dv.sq.wqe_cnt; i++) {
			reset_pools();
			post_send(q, swr(IBV_WR_SEND, IBV_SEND_SIGNALED, 1 + i % (int)q->cap.max_send_sge,
					 i % 2 ? L4 : hdrdata));
			drain(q);
		}
	}
	recv_table(q);
}

static void sigall_table(struct qprec *q)
{
	static const uint32_t eight[] = {8};

	reset_pools();
	post_send(q, swr(IBV_WR_SEND, 0, 1, NULL));
	reset_pools();
	post_send(q, swr(IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, 1, NULL));
	reset_pools();
	post_send(q, swr(IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_SEND_FENCE, 1, eight));
	drain(q);
}

static void rq_wrap(struct qprec *q)
{
	uint16_t start = be32toh(q->dv.dbrec[0]);
	static const uint32_t two[] = {100, 200};

	for (int i = 0; (uint16_t)(be32toh(q->dv.dbrec[0]) - start) < 3 * q->dv.rq.wqe_cnt; i++) {
		int n = 1 + i % 3;
		struct ibv_recv_wr *ws[3];

		reset_pools();
		for (int k = 0; k < n; k++)
			ws[k] = rwr(1 + (i + k) % 2, two);
		for (int k = 0; k + 1 < n; k++)
			ws[k]->next = ws[k + 1];
		post_recv(q, ws[0]);
		drain_recv(q, n);
	}
	/* fill until libmlx5 refuses */
	for (int i = 0; i < 64; i++) {
		uint16_t before = be32toh(q->dv.dbrec[0]);

		reset_pools();
		post_recv(q, rwr(1, NULL));
		if (be32toh(q->dv.dbrec[0]) == before)
			break;
	}
}

/* ---- WQEs that straddle the end of the ring ---- */

/* A filler is a WR one basic block long; a big one spans several. */
typedef struct ibv_send_wr *(*wr_maker)(struct qprec *q, int variant);

static uint16_t sq_pos(struct qprec *q)
{
	return (uint16_t)be32toh(q->dv.dbrec[1]);
}

/* align_to posts one-block WQEs until the next WQE starts k blocks before
 * the end of the ring. */
static void align_to(struct qprec *q, wr_maker filler, uint32_t k)
{
	while ((sq_pos(q) & (q->dv.sq.wqe_cnt - 1)) != q->dv.sq.wqe_cnt - k) {
		uint16_t before = sq_pos(q);

		reset_pools();
		post_send(q, filler(q, 0));
		drain(q);
		if (sq_pos(q) != (uint16_t)(before + 1))
			failx("%s: the filler is not one basic block", q->name);
	}
}

/* straddles puts each big WR variant across the end of the ring, starting
 * 1, 2 and 3 blocks before it, alone (BlueFlame copy) and as the second of
 * a list of two (doorbell only). */
static void straddles(struct qprec *q, wr_maker filler, wr_maker big, int nvariants)
{
	for (int v = 0; v < nvariants; v++) {
		for (uint32_t k = 1; k <= 3; k++) {
			align_to(q, filler, k);
			reset_pools();
			post_send(q, big(q, v));
			drain(q);
			align_to(q, filler, k + 1);
			reset_pools();
			{
				struct ibv_send_wr *ws[2] = {filler(q, 1), big(q, v)};

				post_send(q, chain(2, ws));
			}
			drain(q);
		}
	}
}

static struct ibv_send_wr *rc_filler(struct qprec *q, int v)
{
	(void)q;
	return swr(v ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_SEND, 0, v ? 0 : 1, NULL);
}

static struct ibv_send_wr *rc_big(struct qprec *q, int v)
{
	static const uint32_t eight[] = {8};
	uint32_t inl = q->cap.max_inline_data;

	switch (v) {
	case 0: return swr(IBV_WR_SEND, IBV_SEND_SIGNALED, (int)q->cap.max_send_sge, L4);
	case 1: return swr(IBV_WR_RDMA_WRITE, IBV_SEND_INLINE | IBV_SEND_SIGNALED, 1, &inl);
	case 2: return swr(IBV_WR_ATOMIC_CMP_AND_SWP, IBV_SEND_SIGNALED, 1, eight);
	case 3: return swr(IBV_WR_LOCAL_INV, IBV_SEND_SIGNALED, 0, NULL);
	default: return swr(IBV_WR_SEND_WITH_IMM, IBV_SEND_INLINE, 1, &inl);
	}
}

static struct ibv_send_wr *ud_filler(struct qprec *q, int v)
{
	(void)q;
	return ud_dest(swr(v ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, 0, 0, NULL), v);
}

static struct ibv_send_wr *ud_big(struct qprec *q, int v)
{
	uint32_t inl = q->cap.max_inline_data;

	switch (v) {
	case 0: return ud_dest(swr(IBV_WR_SEND, IBV_SEND_SIGNALED, (int)q->cap.max_send_sge, L4), 0);
	case 1: return ud_dest(swr(IBV_WR_SEND_WITH_IMM, IBV_SEND_INLINE | IBV_SEND_SIGNALED, 1, &inl), 1);
	default: return ud_dest(swr(IBV_WR_SEND, 0, 1, NULL), 2);
	}
}

static struct ibv_send_wr *raw_filler(struct qprec *q, int v)
{
	static const uint32_t exact[] = {18};

	(void)q;
	(void)v;
	return swr(IBV_WR_SEND, 0, 1, exact);
}

static struct ibv_send_wr *raw_big(struct qprec *q, int v)
{
	static const uint32_t hdrdata[] = {60, 100, 200};
	uint32_t inl = q->cap.max_inline_data;

	if (v == 0)
		return swr(IBV_WR_SEND, IBV_SEND_SIGNALED, (int)q->cap.max_send_sge, hdrdata);
	return swr(IBV_WR_SEND, IBV_SEND_INLINE | IBV_SEND_SIGNALED, 1, &inl);
}

static uint32_t xrc_srqn;

static struct ibv_send_wr *xrc_filler(struct qprec *q, int v)
{
	struct ibv_send_wr *w = swr(IBV_WR_SEND, 0, 1, NULL);

	(void)q;
	(void)v;
	w->qp_type.xrc.remote_srqn = xrc_srqn;
	return w;
}

static struct ibv_send_wr *xrc_big(struct qprec *q, int v)
{
	static const uint32_t eight[] = {8};
	uint32_t inl = q->cap.max_inline_data;
	struct ibv_send_wr *w;

	if (v == 0)
		w = swr(IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_SEND_SIGNALED, 1, eight);
	else
		w = swr(IBV_WR_SEND, IBV_SEND_INLINE | IBV_SEND_SIGNALED, 1, &inl);
	w->qp_type.xrc.remote_srqn = xrc_srqn;
	return w;
}

/* ---- the CQE table ---- */

struct cqe_case {
	const char *name;
	struct qprec *qp;
	uint8_t cqe[64];
	int written_owner_ok; /* the case was built for the current index */
};

static void emit_wc(const struct ibv_wc *wc)
{
	j_key("wc");
	j_obj();
	jk_u64("wr_id", wc->wr_id);
	jk_u64("status", wc->status);
	jk_u64("opcode", wc->opcode);
	jk_u64("vendor_err", wc->vendor_err);
	jk_u64("byte_len", wc->byte_len);
	jk_u64("imm_data", wc->imm_data);
	jk_u64("qp_num", wc->qp_num);
	jk_u64("src_qp", wc->src_qp);
	jk_u64("wc_flags", wc->wc_flags);
	jk_u64("pkey_index", wc->pkey_index);
	jk_u64("slid", wc->slid);
	jk_u64("sl", wc->sl);
	jk_u64("dlid_path_bits", wc->dlid_path_bits);
	j_end();
}

/* poll_case writes cqe at the CQ's consumer index (the owner bit in
 * cqe[63] bit 0 is set here from the index unless keep_owner), polls one
 * completion and records it. */
/* a receive buffer a scatter-to-CQE case fills, recorded with the case */
static uint64_t scatter_addr;
static size_t scatter_len;

static void poll_case(struct cqrec *c, const char *name, struct qprec *q, uint8_t *cqe, int keep_owner)
{
	struct ibv_wc wc;
	uint8_t *slot = cqe_at(c, c->ci);
	int n;

	if (!keep_owner)
		cqe[63] = (cqe[63] & ~1) | CQE_OWNER_OF(c, c->ci);
	memcpy(slot, cqe, 64);
	memset(&wc, 0, sizeof(wc));
	n = ibv_poll_cq(c->cq, 1, &wc);

	j_obj();
	jk_str("name", name);
	jk_str("cq", c->name);
	jk_str("qp", q ? q->name : "");
	jk_u64("index", c->ci);
	jk_hex("cqe_hex", cqe, 64);
	jk_i64("ret", n);
	if (n == 1)
		emit_wc(&wc);
	jk_hex("cq_dbrec_hex", c->dv.dbrec, 8);
	if (scatter_len) {
		j_key("scatter");
		j_obj();
		jk_u64("addr", scatter_addr);
		jk_hex("hex", (void *)(uintptr_t)scatter_addr, scatter_len);
		j_end();
	}
	j_end();
	if (n == 1)
		c->ci++;
	else if (n < 0)
		/* refused: libmlx5 consumed the entry (its doorbell record says how far) */
		c->ci = be32toh(c->dv.dbrec[0]) & 0xffffff;
	else
		/* nothing consumed: put the slot back to what libmlx5 initialised */
		memset(slot, 0, 64), slot[63] = MLX5_CQE_INVALID << 4;
}

static void err_cqe(uint8_t *cqe, struct qprec *q, uint8_t opcode, uint8_t syndrome, uint8_t vendor,
		    uint16_t wqe_counter, uint8_t send_op)
{
	memset(cqe, 0, 64);
	*(uint32_t *)(cqe + 32) = htobe32(q->uidx);
	cqe[54] = vendor;
	cqe[55] = syndrome;
	*(uint32_t *)(cqe + 56) = htobe32((uint32_t)send_op << 24 | q->qp->qp_num);
	*(uint16_t *)(cqe + 60) = htobe16(wqe_counter);
	cqe[63] = opcode << 4;
}

static void cqe_table(struct cqrec *c, struct qprec *rc, struct qprec *ud, struct qprec *srqqp,
		      struct qprec *raw, struct srqrec *srq, struct srqrec *xsrq, int first_op_wqe)
{
	static const struct { const char *name; uint8_t mlx5_op; uint32_t byte_cnt; } req[] = {
		{"req-send", MLX5_OPCODE_SEND, 0}, {"req-send-imm", MLX5_OPCODE_SEND_IMM, 0},
		{"req-send-inv", MLX5_OPCODE_SEND_INVAL, 0}, {"req-rdma-write", MLX5_OPCODE_RDMA_WRITE, 0},
		{"req-rdma-write-imm", MLX5_OPCODE_RDMA_WRITE_IMM, 0},
		{"req-rdma-read", MLX5_OPCODE_RDMA_READ, 1024},
		{"req-atomic-cs", MLX5_OPCODE_ATOMIC_CS, 8}, {"req-atomic-fa", MLX5_OPCODE_ATOMIC_FA, 8},
		{"req-local-inv", MLX5_OPCODE_UMR, 0},
	};
	static const struct { const char *name; uint8_t syndrome; } errs[] = {
		{"err-local-length", 0x01}, {"err-local-qp-op", 0x02}, {"err-local-protection", 0x04},
		{"err-wr-flushed", 0x05}, {"err-mw-bind", 0x06}, {"err-bad-response", 0x10},
		{"err-local-access", 0x11}, {"err-remote-invalid-request", 0x12},
		{"err-remote-access", 0x13}, {"err-remote-op", 0x14},
		{"err-transport-retry-exceeded", 0x15}, {"err-rnr-retry-exceeded", 0x16},
		{"err-remote-abort", 0x22}, {"err-unknown-syndrome", 0x42},
	};
	uint8_t cqe[64];
	int w = first_op_wqe;

	j_key("cqes");
	j_arr();
	/* requester completions of the opcodes, in the order posted */
	for (size_t i = 0; i < sizeof(req) / sizeof(req[0]); i++) {
		build_req_cqe(cqe, rc, rc->wqe_log[w++], req[i].mlx5_op, req[i].byte_cnt, 0);
		poll_case(c, req[i].name, rc, cqe, 0);
	}
	/* the same WQE completed twice is not a case: skip ahead */
	/* responder completions on the RC QP's RQ */
	build_resp_cqe(cqe, rc, MLX5_CQE_RESP_SEND, 0, 100, 0);
	poll_case(c, "resp-send", rc, cqe, 0);
	build_resp_cqe(cqe, rc, MLX5_CQE_RESP_SEND_IMM, 1, 0, 0);
	*(uint32_t *)(cqe + 36) = htobe32(0xa1b2c3d4);
	poll_case(c, "resp-send-imm", rc, cqe, 0);
	build_resp_cqe(cqe, rc, MLX5_CQE_RESP_WR_IMM, 2, 4096, 0);
	*(uint32_t *)(cqe + 36) = htobe32(0x01020304);
	poll_case(c, "resp-rdma-write-imm", rc, cqe, 0);
	build_resp_cqe(cqe, rc, MLX5_CQE_RESP_SEND_INV, 3, 64, 0);
	*(uint32_t *)(cqe + 36) = htobe32(0x00beef77);
	poll_case(c, "resp-send-inv", rc, cqe, 0);
	build_resp_cqe(cqe, rc, MLX5_CQE_RESP_SEND, 4, 1500, 0);
	cqe[28] = 0x06; /* hds_ip_ext: L3 and L4 checksums ok */
	cqe[29] = 0x20; /* l4_hdr_type_etc: IPv4 TCP */
	cqe[63] |= 2;   /* solicited event */
	poll_case(c, "resp-send-csum-solicited", rc, cqe, 0);
	/* scatter to CQE: a small message arrives inside the CQE (the QP was
	 * created with MLX5_QP_FLAG_SCATTER_CQE) and libmlx5 copies it to
	 * the receive buffer */
	{
		const uint8_t *wqe = (uint8_t *)rc->dv.rq.buf + 5 * rc->dv.rq.stride;
		uint64_t addr = be64toh(*(const uint64_t *)(wqe + 8));

		build_resp_cqe(cqe, rc, MLX5_CQE_RESP_SEND, 5, 20, 0);
		for (int i = 0; i < 32; i++)
			cqe[i] = (uint8_t)(0xc0 + i);
		cqe[63] |= MLX5_INLINE_SCATTER_32;
		memset((void *)(uintptr_t)addr, 0, 32);
		scatter_addr = addr;
		scatter_len = 32;
		poll_case(c, "resp-send-scatter-32", rc, cqe, 0);
		scatter_len = 0;
	}
	/* raw packet receives with checksum results */
	build_resp_cqe(cqe, raw, MLX5_CQE_RESP_SEND, 0, 1514, 0);
	cqe[28] = 0x06; /* hds_ip_ext: L3 and L4 ok */
	cqe[29] = 0x18; /* l4_hdr_type_etc: TCP (bits 4-6), IPv4 (bits 2-3) */
	poll_case(c, "raw-resp-csum-ok", raw, cqe, 0);
	build_resp_cqe(cqe, raw, MLX5_CQE_RESP_SEND, 1, 60, 0);
	cqe[28] = 0x04; /* L4 ok only */
	cqe[29] = 0x18;
	poll_case(c, "raw-resp-csum-l3-bad", raw, cqe, 0);
	/* UD responder: GRH, source QP, SL, pkey index */
	build_resp_cqe(cqe, ud, MLX5_CQE_RESP_SEND, 0, 40 + 256, 0);
	*(uint32_t *)(cqe + 24) = htobe32(1u << 28 | 5u << 24 | 0x123456);
	*(uint32_t *)(cqe + 36) = htobe32(0x0000);
	poll_case(c, "ud-resp-send-grh", ud, cqe, 0);
	build_resp_cqe(cqe, ud, MLX5_CQE_RESP_SEND_IMM, 1, 40 + 8, 0);
	*(uint32_t *)(cqe + 24) = htobe32(1u << 28 | 3u << 24 | 0x000abc);
	*(uint32_t *)(cqe + 36) = htobe32(0xfeedf00d);
	*(uint16_t *)(cqe + 22) = htobe16(0x0017);
	cqe[17] = 0x85;
	poll_case(c, "ud-resp-send-imm-grh", ud, cqe, 0);
	build_resp_cqe(cqe, ud, MLX5_CQE_RESP_SEND, 2, 40, 0);
	*(uint32_t *)(cqe + 24) = htobe32(0u << 28 | 0u << 24 | 0x000001);
	poll_case(c, "ud-resp-send-no-grh", ud, cqe, 0);
	/* SRQ completions, out of order */
	build_resp_cqe(cqe, srqqp, MLX5_CQE_RESP_SEND, (uint16_t)srq->posted[1], 77, 0);
	poll_case(c, "srq-resp-send", srqqp, cqe, 0);
	build_resp_cqe(cqe, srqqp, MLX5_CQE_RESP_SEND_IMM, (uint16_t)srq->posted[0], 78, 0);
	*(uint32_t *)(cqe + 36) = htobe32(0x55667788);
	poll_case(c, "srq-resp-send-imm", srqqp, cqe, 0);
	/* an XRC SRQ completion carries the SRQ's own user index */
	memset(cqe, 0, 64);
	*(uint32_t *)(cqe + 32) = htobe32(xsrq->uidx);
	*(uint32_t *)(cqe + 44) = htobe32(99);
	*(uint32_t *)(cqe + 56) = htobe32(rc->qp->qp_num + 0x100);
	*(uint16_t *)(cqe + 60) = htobe16((uint16_t)xsrq->posted[0]);
	cqe[63] = MLX5_CQE_RESP_SEND << 4;
	poll_case(c, "xrc-srq-resp-send", NULL, cqe, 0);
	/* nothing there: an entry still owned by the hardware, then an invalid one */
	build_req_cqe(cqe, rc, rc->wqe_log[w], MLX5_OPCODE_SEND, 0, 0);
	cqe[63] ^= 0; /* owner set below to the wrong value */
	cqe[63] = (cqe[63] & ~1) | (CQE_OWNER_OF(c, c->ci) ^ 1);
	poll_case(c, "owner-mismatch", rc, cqe, 1);
	build_req_cqe(cqe, rc, rc->wqe_log[w], MLX5_OPCODE_SEND, 0, 0);
	cqe[63] = (MLX5_CQE_INVALID << 4);
	poll_case(c, "invalid-opcode-owner-ok", rc, cqe, 0);
	/* a NO_PACKET CQE that is not a tag-matching one: libmlx5 refuses it */
	build_req_cqe(cqe, rc, rc->wqe_log[w], MLX5_OPCODE_SEND, 0, 0);
	cqe[63] = MLX5_CQE_NO_PACKET << 4;
	poll_case(c, "no-packet-not-tag-matching", rc, cqe, 0);
	/* error completions of the send queue, one WQE each */
	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
		err_cqe(cqe, rc, MLX5_CQE_REQ_ERR, errs[i].syndrome, (uint8_t)(0x80 + i), rc->wqe_log[w++],
			MLX5_OPCODE_SEND);
		poll_case(c, errs[i].name, rc, cqe, 0);
	}
	/* a responder error (flush) on the RQ */
	err_cqe(cqe, rc, MLX5_CQE_RESP_ERR, 0x05, 0x99, 5, 0);
	poll_case(c, "resp-err-wr-flushed", rc, cqe, 0);
	err_cqe(cqe, rc, MLX5_CQE_RESP_ERR, 0x04, 0x9a, 6, 0);
	poll_case(c, "resp-err-local-protection", rc, cqe, 0);
	/* a requester completion that retires several unsignaled WQEs at once */
	build_req_cqe(cqe, rc, rc->wqe_log[w + 2], MLX5_OPCODE_SEND, 0, 0);
	w += 3;
	poll_case(c, "req-send-after-unsignaled", rc, cqe, 0);
	j_earr();
	(void)w;
}

static void arm_table(struct cqrec *c)
{
	j_key("arms");
	j_arr();
	for (int sol = 0; sol < 2; sol++) {
		if (ibv_req_notify_cq(c->cq, sol))
			fail("ibv_req_notify_cq");
		j_obj();
		jk_str("cq", c->name);
		jk_u64("solicited_only", sol);
		jk_u64("ci", c->ci);
		jk_hex("cq_dbrec_hex", c->dv.dbrec, 8);
		emit_uar((const uint8_t *)((uintptr_t)c->dv.cq_uar & ~0xfffUL));
		j_end();
	}
	j_earr();
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
	r = fake_last_cmd(IB_USER_VERBS_CMD_ALLOC_PD);
	jk_hex("pd_resp_hex", r->drv_out, r->drv_out_len);
	jk_u64("mr_lkey", mr->lkey);
	jk_u64("mr_rkey", mr->rkey);
	jk_u64("data_base", DATA_BASE);
	j_end();

	struct cqrec *cq0, *cq1;
	j_key("cqs");
	j_arr();
	cq0 = new_cq("cq0", 255);
	cq1 = new_cq("cq1", 7);
	j_earr();

	j_key("ahs");
	j_arr();
	new_ah("ah0", 1, 0x12345, 0, 0, 64, 2);     /* RoCE v2, flow label gives the UDP port */
	new_ah("ah1", 0, 0, 3, 0x20, 255, 3);       /* RoCE v1 */
	new_ah("ah2", 3, 0xfffff, 7, 0xb8, 1, 4);   /* RoCE v2, IPv4-mapped source GID */
	j_earr();

	struct ibv_xrcd_init_attr xa = {.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
					.fd = -1, .oflags = O_CREAT};
	xrcd = ibv_open_xrcd(ctx, &xa);
	if (!xrcd)
		fail("ibv_open_xrcd");
	struct srqrec *srq0 = new_srq("srq0", 16, 2, 0, NULL, NULL);
	struct srqrec *srq1 = new_srq("srq1", 8, 1, 0, NULL, NULL);
	struct srqrec *xsrq = new_srq("xsrq", 8, 1, 1, xrcd, cq1);

	static struct qprec rc, rcwrap, ud, uc, raw, xrc, sigall, rcsrq, rqwrap, cqrc, cqud, cqsrq, cqraw;
	int first_op_wqe;

	j_key("qps");
	j_arr();
	{
		struct qpspec s = {.name = "rc", .type = IBV_QPT_RC, .scq = cq0, .rcq = cq0,
				   .cap = {.max_send_wr = 64, .max_recv_wr = 32, .max_send_sge = 4,
					   .max_recv_sge = 4, .max_inline_data = 64}};

		begin_qp(&rc, &s);
		rc_opcodes(&rc);
		rc_sges(&rc);
		rc_inline(&rc);
		rc_lists(&rc);
		recv_table(&rc);
		end_qp(&rc);
	}
	{
		struct qpspec s = {.name = "rc-wrap", .type = IBV_QPT_RC, .scq = cq0, .rcq = cq0,
				   .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 4,
					   .max_recv_sge = 1, .max_inline_data = 160}};

		begin_qp(&rcwrap, &s);
		rc_wrap(&rcwrap);
		rc_overflow(&rcwrap);
		end_qp(&rcwrap);
	}
	{
		struct qpspec s = {.name = "ud", .type = IBV_QPT_UD, .scq = cq0, .rcq = cq0,
				   .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 3,
					   .max_recv_sge = 2, .max_inline_data = 100}};

		begin_qp(&ud, &s);
		ud_table(&ud);
		end_qp(&ud);
	}
	{
		struct qpspec s = {.name = "uc", .type = IBV_QPT_UC, .scq = cq0, .rcq = cq0,
				   .cap = {.max_send_wr = 16, .max_recv_wr = 8, .max_send_sge = 2,
					   .max_recv_sge = 2, .max_inline_data = 32}};

		begin_qp(&uc, &s);
		uc_table(&uc);
		end_qp(&uc);
	}
	{
		struct qpspec s = {.name = "raw", .type = IBV_QPT_RAW_PACKET, .scq = cq0, .rcq = cq0,
				   .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 3,
					   .max_recv_sge = 1, .max_inline_data = 64}};

		begin_qp(&raw, &s);
		raw_table(&raw);
		end_qp(&raw);
	}
	{
		struct qpspec s = {.name = "xrc", .type = IBV_QPT_XRC_SEND, .scq = cq0, .rcq = NULL,
				   .cap = {.max_send_wr = 16, .max_send_sge = 2, .max_inline_data = 48}};

		begin_qp(&xrc, &s);
		xrc_table(&xrc, xsrq->srqn);
		end_qp(&xrc);
	}
	/* small rings (8 basic blocks) where WQEs of every kind are put
	 * across the end */
	{
		static struct qprec q;
		struct qpspec s = {.name = "rc-straddle", .type = IBV_QPT_RC, .scq = cq0, .rcq = cq0,
				   .cap = {.max_send_wr = 2, .max_recv_wr = 1, .max_send_sge = 4,
					   .max_recv_sge = 1, .max_inline_data = 160}};

		begin_qp(&q, &s);
		straddles(&q, rc_filler, rc_big, 5);
		end_qp(&q);
	}
	{
		static struct qprec q;
		struct qpspec s = {.name = "ud-straddle", .type = IBV_QPT_UD, .scq = cq0, .rcq = cq0,
				   .cap = {.max_send_wr = 2, .max_recv_wr = 1, .max_send_sge = 4,
					   .max_recv_sge = 1, .max_inline_data = 100}};

		begin_qp(&q, &s);
		straddles(&q, ud_filler, ud_big, 3);
		end_qp(&q);
	}
	{
		static struct qprec q;
		struct qpspec s = {.name = "raw-straddle", .type = IBV_QPT_RAW_PACKET, .scq = cq0, .rcq = cq0,
				   .cap = {.max_send_wr = 2, .max_recv_wr = 1, .max_send_sge = 3,
					   .max_recv_sge = 1, .max_inline_data = 100}};

		begin_qp(&q, &s);
		straddles(&q, raw_filler, raw_big, 2);
		end_qp(&q);
	}
	{
		static struct qprec q;
		struct qpspec s = {.name = "xrc-straddle", .type = IBV_QPT_XRC_SEND, .scq = cq0,
				   .cap = {.max_send_wr = 2, .max_send_sge = 2, .max_inline_data = 100}};

		xrc_srqn = xsrq->srqn;
		begin_qp(&q, &s);
		straddles(&q, xrc_filler, xrc_big, 2);
		end_qp(&q);
	}
	{
		struct qpspec s = {.name = "rc-sig-all", .type = IBV_QPT_RC, .scq = cq0, .rcq = cq0,
				   .sq_sig_all = 1,
				   .cap = {.max_send_wr = 4, .max_recv_wr = 1, .max_send_sge = 1,
					   .max_recv_sge = 1, .max_inline_data = 0}};

		begin_qp(&sigall, &s);
		sigall_table(&sigall);
		end_qp(&sigall);
	}
	{
		struct qpspec s = {.name = "rc-srq", .type = IBV_QPT_RC, .scq = cq0, .rcq = cq0, .srq = srq0,
				   .cap = {.max_send_wr = 4, .max_send_sge = 1, .max_inline_data = 16}};

		begin_qp(&rcsrq, &s);
		reset_pools();
		post_send(&rcsrq, swr(IBV_WR_SEND, IBV_SEND_SIGNALED, 1, NULL));
		drain(&rcsrq);
		end_qp(&rcsrq);
	}
	{
		struct qpspec s = {.name = "rc-rq-wrap", .type = IBV_QPT_RC, .scq = cq0, .rcq = cq0,
				   .cap = {.max_send_wr = 1, .max_recv_wr = 4, .max_send_sge = 1,
					   .max_recv_sge = 2}};

		begin_qp(&rqwrap, &s);
		rq_wrap(&rqwrap);
		end_qp(&rqwrap);
	}
	{
		static const enum ibv_wr_opcode ops[] = {
			IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_SEND_WITH_INV, IBV_WR_RDMA_WRITE,
			IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP,
			IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_LOCAL_INV,
		};
		static const uint32_t eight[] = {8};
		struct qpspec s = {.name = "cq-rc", .type = IBV_QPT_RC, .scq = cq1, .rcq = cq1,
				   .cap = {.max_send_wr = 32, .max_recv_wr = 8, .max_send_sge = 1,
					   .max_recv_sge = 1, .max_inline_data = 0}};

		begin_qp(&cqrc, &s);
		first_op_wqe = cqrc.nwqe_log;
		for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
			int atomic = ops[o] == IBV_WR_ATOMIC_CMP_AND_SWP ||
				     ops[o] == IBV_WR_ATOMIC_FETCH_AND_ADD;

			reset_pools();
			post_send(&cqrc, swr(ops[o], IBV_SEND_SIGNALED, ops[o] == IBV_WR_LOCAL_INV ? 0 : 1,
					      atomic ? eight : NULL));
		}
		for (int i = 0; i < 17; i++) {
			reset_pools();
			post_send(&cqrc, swr(IBV_WR_SEND, i >= 14 ? 0 : IBV_SEND_SIGNALED, 1, NULL));
		}
		for (int i = 0; i < 8; i++) {
			reset_pools();
			post_recv(&cqrc, rwr(1, NULL));
		}
		end_qp(&cqrc);
	}
	{
		struct qpspec s = {.name = "cq-ud", .type = IBV_QPT_UD, .scq = cq1, .rcq = cq1,
				   .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
					   .max_recv_sge = 1}};

		begin_qp(&cqud, &s);
		for (int i = 0; i < 3; i++) {
			reset_pools();
			post_recv(&cqud, rwr(1, NULL));
		}
		end_qp(&cqud);
	}
	{
		struct qpspec s = {.name = "cq-srq", .type = IBV_QPT_RC, .scq = cq1, .rcq = cq1, .srq = srq1,
				   .cap = {.max_send_wr = 4, .max_send_sge = 1}};

		begin_qp(&cqsrq, &s);
		end_qp(&cqsrq);
	}
	{
		struct qpspec s = {.name = "cq-raw", .type = IBV_QPT_RAW_PACKET, .scq = cq1, .rcq = cq1,
				   .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
					   .max_recv_sge = 1}};

		begin_qp(&cqraw, &s);
		for (int i = 0; i < 2; i++) {
			reset_pools();
			post_recv(&cqraw, rwr(1, NULL));
		}
		end_qp(&cqraw);
	}
	j_earr();

	j_key("srqs");
	j_arr();
	begin_srq(srq0);
	srq_table(srq0, &rcsrq, cq0);
	j_earr();
	j_end();
	begin_srq(srq1);
	srq_table(srq1, NULL, NULL);
	j_earr();
	j_end();
	begin_srq(xsrq);
	srq_table(xsrq, NULL, NULL);
	j_earr();
	j_end();
	j_earr();

	cqe_table(cq1, &cqrc, &cqud, &cqsrq, &cqraw, srq1, xsrq, first_op_wqe);
	arm_table(cq1);
	j_end();
	return 0;
}
