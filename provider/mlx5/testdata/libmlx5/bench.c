// bench.c: times rdma-core's real libmlx5 data path (ibv_post_send +
// ibv_poll_cq) against the fake kernel (fakekernel.c), on the same queue
// shapes as provider/mlx5's BenchmarkVsLibmlx5 (bench_vs_libmlx5_test.go).
//
// There is no HCA: the program plays its part the way the Go benchmark does.
// The CQEs of the WQEs about to be posted are written ahead into the CQ ring
// (which libmlx5 allocated and mlx5dv_init_obj hands out), one whole pass of
// the ring at a time with the clock stopped, each with the owner bit of its
// pass, so ibv_poll_cq finds exactly one (or sixteen) per iteration and the
// time measured is libmlx5's alone. The doorbell record and BlueFlame stores
// land in UAR pages of ordinary memory, as in the Go benchmark.
//
// Usage: bench <sysfs dir> <case> <iterations>   (LD_PRELOAD=libfakekernel.so)
// Cases: write inline64 ud list16 poll16 (or "all"). Prints one line per
// case: "<case> <iterations> <wall ns> <CPU ns of the thread>" over the
// timed parts. With BENCH_OPS set in the environment it also prints where
// the library's post_send and poll_cq lie in their file (see main).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/mlx5-abi.h>

#include "fakekernel.h"

#define RKEY 0x00abcd01u
#define PAYLOAD 64

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_mr *mr;
static uint8_t *data;

static void fail(const char *what)
{
	fprintf(stderr, "bench: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void failx(const char *what)
{
	fprintf(stderr, "bench: %s\n", what);
	exit(2);
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A timer of the timed parts, in wall time and in CPU time of the thread
 * (see the Go benchmark's cpuClock: on a shared host the comparison uses
 * the CPU time). */
struct timer {
	uint64_t wall, cpu, wall0, cpu0;
};

static void timer_start(struct timer *t)
{
	t->wall0 = clock_ns(CLOCK_MONOTONIC);
	t->cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

static void timer_stop(struct timer *t)
{
	t->cpu += clock_ns(CLOCK_THREAD_CPUTIME_ID) - t->cpu0;
	t->wall += clock_ns(CLOCK_MONOTONIC) - t->wall0;
}

/* ---- the CQ and what the HCA would write into it ---- */

struct cq {
	struct ibv_cq *cq;
	struct mlx5dv_cq dv;
};

static void new_cq(struct cq *c, int cqe)
{
	struct mlx5dv_obj obj = {};

	c->cq = ibv_create_cq(ctx, cqe, NULL, NULL, 0);
	if (!c->cq)
		fail("ibv_create_cq");
	obj.cq.in = c->cq;
	obj.cq.out = &c->dv;
	if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ))
		fail("mlx5dv_init_obj cq");
	if (c->dv.cqe_size != 64)
		failx("the benchmark writes 64-byte CQEs");
}

/* complete writes, at consumer index ci, a successful requester CQE for
 * the WQE with counter ctr: the body first, then the last word (counter,
 * signature, opcode and owner bit) with a release store, as the HCA hands
 * over an entry. */
static void complete(struct cq *c, uint32_t ci, uint32_t uidx, uint32_t qpn, uint8_t send_op,
		     uint16_t ctr)
{
	uint8_t *e = (uint8_t *)c->dv.buf + (size_t)(ci & (c->dv.cqe_cnt - 1)) * 64;
	uint8_t owner = (ci & c->dv.cqe_cnt) ? 1 : 0;
	uint32_t last;

	memset(e, 0, 60);
	*(uint32_t *)(e + 32) = htobe32(uidx & 0xffffff);
	*(uint32_t *)(e + 44) = htobe32(PAYLOAD);
	*(uint32_t *)(e + 56) = htobe32((uint32_t)send_op << 24 | (qpn & 0xffffff));
	last = htobe32((uint32_t)ctr << 16 | (uint32_t)MLX5_CQE_REQ << 4 | owner);
	__atomic_store_n((uint32_t *)(e + 60), last, __ATOMIC_RELEASE);
}

/* ---- QPs ---- */

struct qp {
	struct ibv_qp *qp;
	uint32_t uidx;
};

static uint32_t created_uidx(void)
{
	const struct fake_cmd_rec *a = fake_last_cmd(IB_USER_VERBS_CMD_CREATE_QP);
	const struct fake_cmd_rec *b = fake_last_cmd(FAKE_EX(IB_USER_VERBS_CMD_CREATE_QP));
	const struct fake_cmd_rec *r = !a ? b : !b ? a : a->seq > b->seq ? a : b;

	if (!r)
		failx("no CREATE_QP recorded");
	return ((const struct mlx5_ib_create_qp *)r->drv_in)->uidx;
}

static void to_rts(struct ibv_qp *qp, enum ibv_qp_type t)
{
	struct ibv_qp_attr a = {};
	int mask;

	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = 0x11111111;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	mask = IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX |
	       (t == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
	if (ibv_modify_qp(qp, &a, mask))
		fail("modify to INIT");

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (t == IBV_QPT_RC) {
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = 0x2200;
		a.ah_attr.is_global = 1;
		a.ah_attr.port_num = 1;
		a.ah_attr.grh.sgid_index = 1;
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.grh.dgid.raw[10] = 0xff;
		a.ah_attr.grh.dgid.raw[11] = 0xff;
		a.ah_attr.grh.dgid.raw[12] = 10;
		a.ah_attr.grh.dgid.raw[13] = 99;
		a.ah_attr.grh.dgid.raw[15] = 2;
		a.max_dest_rd_atomic = 16;
		a.min_rnr_timer = 12;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	}
	if (ibv_modify_qp(qp, &a, mask))
		fail("modify to RTR");

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (t == IBV_QPT_RC) {
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 16;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	if (ibv_modify_qp(qp, &a, mask))
		fail("modify to RTS");
}

static void new_qp(struct qp *q, enum ibv_qp_type t, struct cq *c, struct ibv_qp_cap cap)
{
	struct ibv_qp_init_attr ia = {};

	ia.qp_type = t;
	ia.send_cq = c->cq;
	ia.recv_cq = c->cq;
	ia.cap = cap;
	q->qp = ibv_create_qp(pd, &ia);
	if (!q->qp)
		fail("ibv_create_qp");
	q->uidx = created_uidx();
	to_rts(q->qp, t);
}

/* The caps of the Go benchmark's queue pairs (loopCaps), and of the one
 * the poll case fills 4096 WQEs at a time. */
static const struct ibv_qp_cap caps = {
	.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 4, .max_recv_sge = 4, .max_inline_data = 128,
};
static const struct ibv_qp_cap poll_caps = {
	.max_send_wr = 4096, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1,
};

static struct ibv_ah *new_ah(void)
{
	struct ibv_ah_attr at = {};
	struct ibv_ah *ah;

	at.is_global = 1;
	at.port_num = 1;
	at.sl = 3;
	at.grh.sgid_index = 1;
	at.grh.flow_label = 0x12345;
	at.grh.hop_limit = 64;
	at.grh.dgid.raw[10] = 0xff;
	at.grh.dgid.raw[11] = 0xff;
	at.grh.dgid.raw[12] = 10;
	at.grh.dgid.raw[13] = 99;
	at.grh.dgid.raw[15] = 2;
	ah = ibv_create_ah(pd, &at);
	if (!ah)
		fail("ibv_create_ah");
	return ah;
}

/* bbs returns the basic blocks (64 bytes) the WQE at counter ctr takes,
 * from the DS count libmlx5 wrote in its control segment. */
static unsigned bbs(struct ibv_qp *qp, uint16_t ctr)
{
	struct mlx5dv_qp dv;
	struct mlx5dv_obj obj = {};
	const uint8_t *ctrl;
	unsigned ds;

	obj.qp.in = qp;
	obj.qp.out = &dv;
	if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP))
		fail("mlx5dv_init_obj qp");
	ctrl = (const uint8_t *)dv.sq.buf + (size_t)(ctr & (dv.sq.wqe_cnt - 1)) * dv.sq.stride;
	ds = be32toh(*(const uint32_t *)(ctrl + 4)) & 0x3f;
	return (ds * 16 + 63) / 64;
}

/* ---- post + poll ---- */

/* post_poll times n iterations of ibv_post_send(list) + ibv_poll_cq(1): the
 * list's last WR is signaled and is the only one with a CQE; every WR of
 * the list takes bb blocks, so the CQE of iteration i names counter
 * (i+1)*len*bb - bb. One untimed pass of the ring first, as in the Go
 * benchmark. */
static void post_poll(struct qp *q, struct cq *c, struct ibv_send_wr *list, int len, uint8_t send_op,
		      unsigned bb, uint64_t n, struct timer *tm)
{
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	uint32_t ncqe = c->dv.cqe_cnt, ci = 1, step = (uint32_t)len * bb;

	/* CQE j completes list j (the probe was list 0): its last WQE starts bb
	 * blocks before the next list. The entries from 1 to the end of the
	 * first pass are written now; then a pass at a time, when the consumer
	 * index comes back to the ring's start. */
	for (uint32_t j = 1; j < ncqe; j++)
		complete(c, j, q->uidx, q->qp->qp_num, send_op, (uint16_t)((j + 1) * step - bb));
	for (int timed = 0; timed < 2; timed++) {
		uint64_t todo = timed ? n : ncqe;

		if (timed)
			timer_start(tm);
		for (uint64_t i = 0; i < todo; i++, ci++) {
			if ((ci & (ncqe - 1)) == 0) {
				if (timed)
					timer_stop(tm);
				for (uint32_t j = ci; j < ci + ncqe; j++)
					complete(c, j, q->uidx, q->qp->qp_num, send_op, (uint16_t)((j + 1) * step - bb));
				if (timed)
					timer_start(tm);
			}
			if (ibv_post_send(q->qp, list, &bad))
				fail("ibv_post_send");
			if (ibv_poll_cq(c->cq, 1, &wc) != 1 || wc.status != IBV_WC_SUCCESS)
				failx("ibv_poll_cq: no successful completion");
		}
		if (timed)
			timer_stop(tm);
	}
}

/* poll16 times n calls of ibv_poll_cq(16), each finding 16 CQEs: per pass
 * of the 4096-entry ring, with the clock stopped, 4096 signaled 1-SGE RDMA
 * WRITEs are posted in lists of 16 and their CQEs written. */
static void poll16(struct qp *q, struct cq *c, struct ibv_send_wr *list, uint64_t n, struct timer *tm)
{
	struct ibv_send_wr *bad;
	struct ibv_wc wc[16];
	uint32_t ncqe = c->dv.cqe_cnt, per = ncqe / 16, ci = 0;

	for (int timed = 0; timed < 2; timed++) {
		uint64_t todo = timed ? n : per;

		for (uint64_t i = 0; i < todo; i++) {
			if (i % per == 0) {
				uint64_t polls = todo - i < per ? todo - i : per;

				if (timed && i)
					timer_stop(tm);
				for (uint32_t k = 0; k < polls * 16; k++)
					complete(c, ci + k, q->uidx, q->qp->qp_num, MLX5_OPCODE_RDMA_WRITE,
						 (uint16_t)(ci + k));
				for (uint32_t k = 0; k < polls; k++)
					if (ibv_post_send(q->qp, list, &bad))
						fail("ibv_post_send");
				if (timed)
					timer_start(tm);
			}
			if (ibv_poll_cq(c->cq, 16, wc) != 16 || wc[15].status != IBV_WC_SUCCESS)
				failx("ibv_poll_cq: not 16 successful completions");
			ci += 16;
		}
		if (timed)
			timer_stop(tm);
	}
}

static struct ibv_sge sge(void)
{
	return (struct ibv_sge){.addr = (uintptr_t)data, .length = PAYLOAD, .lkey = mr->lkey};
}

static void run(const char *name, uint64_t n, struct timer *tm)
{
	struct cq c;
	struct qp q;
	struct ibv_sge sg[16];
	struct ibv_send_wr w[16];
	int len = 1;
	uint8_t send_op = MLX5_OPCODE_RDMA_WRITE;
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	unsigned bb;

	memset(w, 0, sizeof(w));
	for (int i = 0; i < 16; i++) {
		sg[i] = sge();
		w[i].wr_id = (uint64_t)i;
		w[i].sg_list = &sg[i];
		w[i].num_sge = 1;
		w[i].opcode = IBV_WR_RDMA_WRITE;
		w[i].wr.rdma.remote_addr = (uintptr_t)data + 4096;
		w[i].wr.rdma.rkey = RKEY;
	}
	w[0].wr_id = 7;
	w[0].send_flags = IBV_SEND_SIGNALED;
	new_cq(&c, 4095);
	if (!strcmp(name, "write") || !strcmp(name, "write-solo")) {
		new_qp(&q, IBV_QPT_RC, &c, caps);
	} else if (!strcmp(name, "inline64")) {
		new_qp(&q, IBV_QPT_RC, &c, caps);
		w[0].opcode = IBV_WR_SEND;
		w[0].send_flags |= IBV_SEND_INLINE;
		send_op = MLX5_OPCODE_SEND;
	} else if (!strcmp(name, "ud")) {
		new_qp(&q, IBV_QPT_UD, &c, caps);
		w[0].opcode = IBV_WR_SEND;
		w[0].wr.ud.ah = new_ah();
		w[0].wr.ud.remote_qpn = 5;
		w[0].wr.ud.remote_qkey = 6;
		send_op = MLX5_OPCODE_SEND;
	} else if (!strcmp(name, "list16")) {
		new_qp(&q, IBV_QPT_RC, &c, caps);
		len = 16;
		w[0].send_flags = 0;
		w[15].send_flags = IBV_SEND_SIGNALED;
	} else if (!strcmp(name, "poll16")) {
		new_qp(&q, IBV_QPT_RC, &c, poll_caps);
		for (int i = 0; i < 16; i++)
			w[i].send_flags = IBV_SEND_SIGNALED;
		for (int i = 0; i < 15; i++)
			w[i].next = &w[i + 1];
		poll16(&q, &c, w, n, tm);
		goto out;
	} else {
		failx("unknown case (write inline64 ud list16 poll16 write-solo)");
	}
	for (int i = 0; i < len - 1; i++)
		w[i].next = &w[i + 1];

	/* a first post, completed by hand, tells how many basic blocks a WR
	 * takes; the timed run goes on from CQ index 1 */
	if (ibv_post_send(q.qp, w, &bad))
		fail("ibv_post_send");
	bb = bbs(q.qp, 0);
	complete(&c, 0, q.uidx, q.qp->qp_num, send_op, (uint16_t)(len * bb - bb));
	if (ibv_poll_cq(c.cq, 1, &wc) != 1 || wc.status != IBV_WC_SUCCESS)
		failx("probe completion");
	post_poll(&q, &c, w, len, send_op, bb, n, tm);
out:
	if (ibv_destroy_qp(q.qp) || ibv_destroy_cq(c.cq))
		fail("destroy");
	if (!strcmp(name, "ud") && ibv_destroy_ah(w[0].wr.ud.ah))
		fail("ibv_destroy_ah");
}

int main(int argc, char **argv)
{
	static const char *all[] = {"write", "inline64", "ud", "list16", "poll16"};
	int solo;
	struct ibv_device **list;
	uint64_t n;
	int ndev;

	if (argc != 4) {
		fprintf(stderr, "usage: bench <sysfs dir> <case|all> <iterations>\n");
		return 2;
	}
	/* libmlx5's defaults, whatever the environment says */
	for (char **e = environ; *e;) {
		if (!strncmp(*e, "MLX5_", 5) || !strncmp(*e, "RDMAV_", 6) || !strncmp(*e, "IBV_", 4)) {
			char name[128];

			snprintf(name, sizeof(name), "%.*s", (int)strcspn(*e, "="), *e);
			unsetenv(name);
			continue;
		}
		e++;
	}
	setenv("SYSFS_PATH", argv[1], 1);
	/* write-solo: libmlx5 without its CQ, QP and BlueFlame locks, which
	 * it reads once per process when it opens a context; so this case
	 * runs alone and is not part of "all" */
	solo = !strcmp(argv[2], "write-solo");
	if (solo)
		setenv("MLX5_SINGLE_THREADED", "1", 1);
	n = strtoull(argv[3], NULL, 10);
	if (!n)
		failx("iterations must be a positive number");

	if (posix_memalign((void **)&data, 4096, 1 << 16))
		failx("no memory");
	memset(data, 0x5a, 1 << 16);
	list = ibv_get_device_list(&ndev);
	if (!list || ndev != 1)
		failx("expected the one fake device");
	ctx = ibv_open_device(list[0]);
	if (!ctx)
		fail("ibv_open_device");
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		fail("ibv_alloc_pd");
	mr = ibv_reg_mr(pd, data, 1 << 16, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		fail("ibv_reg_mr");
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]) + solo; i++) {
		const char *name = i < sizeof(all) / sizeof(all[0]) ? all[i] : "write-solo";
		struct timer tm = {};

		if (strcmp(argv[2], "all") && strcmp(argv[2], name))
			continue;
		run(name, n, &tm);
		printf("%s %llu %llu %llu\n", name, (unsigned long long)n, (unsigned long long)tm.wall,
		       (unsigned long long)tm.cpu);
	}
	if (getenv("BENCH_OPS")) {
		/* where libmlx5's post_send and poll_cq lie in their file, for
		 * a count of their instructions under callgrind (mlx5bench
		 * -instructions): "ops <file> <post_send offset> <poll_cq
		 * offset>" */
		Dl_info ps, pc;

		if (!dladdr((void *)ctx->ops.post_send, &ps) || !dladdr((void *)ctx->ops.poll_cq, &pc))
			failx("dladdr of the context's post_send and poll_cq");
		printf("ops %s %#lx %#lx\n", ps.dli_fname, (unsigned long)((char *)ctx->ops.post_send - (char *)ps.dli_fbase),
		       (unsigned long)((char *)ctx->ops.poll_cq - (char *)pc.dli_fbase));
	}
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
