// scale.c: the C side of internal/scalebench, on libibverbs (built on the
// host with gcc -O2 against libibverbs-dev, run in the test VM on rxe).
//
//   scale qps N GIDIDX   create N RC QPs on rxe0 and N on rxe1 (one PD and
//                        one CQ per device, made before the clock starts),
//                        connect each to its peer on the other device
//                        (RESET->INIT->RTR->RTS, as ibv_rc_pingpong), destroy
//   scale mr BYTES       register BYTES of mapped memory (one byte a page
//                        touched first), deregister
//
// Prints one line: "qps N create_ns C connect_ns M destroy_ns D create_cpu
// C' connect_cpu M' destroy_cpu D' create_sys C'' connect_sys M''" or "mr
// BYTES reg_ns R dereg_ns D reg_cpu R' dereg_cpu D'": wall and CPU (user +
// system) nanoseconds, and of the CPU the system's part. Settings match scalebench's Go side:
// queue caps 64/64 WRs, 1 SGE, no inline; MTU 1024; access local write,
// remote write and read.
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#include <infiniband/verbs.h>

static void fail(const char *what)
{
	fprintf(stderr, "scale: %s: %s\n", what, strerror(errno));
	exit(2);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* cpu_ns is the process's user + system CPU time: what a phase cost the
 * machine, apart from the time it waited (for rxe's work queues, for the
 * host to run the VM). sys, if not NULL, gets the system part. */
static uint64_t cpu_ns(uint64_t *sys)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		fail("getrusage");
	if (sys)
		*sys = (uint64_t)ru.ru_stime.tv_sec * 1000000000u + (uint64_t)ru.ru_stime.tv_usec * 1000u;
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000u +
	       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000u;
}

static struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int n;

	list = ibv_get_device_list(&n);
	if (!list)
		fail("ibv_get_device_list");
	for (int i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!ctx)
		fail(name);
	return ctx;
}

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	union ibv_gid gid;
	struct ibv_qp **qps;
};

static void open_side(struct side *s, const char *dev, int gid_index, int n)
{
	s->ctx = open_dev(dev);
	s->pd = ibv_alloc_pd(s->ctx);
	if (!s->pd)
		fail("ibv_alloc_pd");
	s->cq = ibv_create_cq(s->ctx, 256, NULL, NULL, 0);
	if (!s->cq)
		fail("ibv_create_cq");
	if (ibv_query_gid(s->ctx, 1, gid_index, &s->gid))
		fail("ibv_query_gid");
	s->qps = calloc(n, sizeof(*s->qps));
	if (!s->qps)
		fail("calloc");
}

static void connect_qp(struct ibv_qp *qp, uint32_t dest_qpn, const union ibv_gid *dgid, int gid_index)
{
	struct ibv_qp_attr a = {};

	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		fail("modify to INIT");

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest_qpn;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = *dgid;
	a.ah_attr.grh.sgid_index = gid_index;
	a.ah_attr.grh.hop_limit = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		fail("modify to RTR");

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				      IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		fail("modify to RTS");
}

static int qps(int n, int gid_index)
{
	struct side s[2];
	uint64_t t0, t1, t2, t3, c0, c1, c2, c3, s0, s1, s2;

	open_side(&s[0], "rxe0", gid_index, n);
	open_side(&s[1], "rxe1", gid_index, n);
	c0 = cpu_ns(&s0);
	t0 = now_ns();
	for (int i = 0; i < n; i++) {
		for (int k = 0; k < 2; k++) {
			struct ibv_qp_init_attr ia = {
				.send_cq = s[k].cq,
				.recv_cq = s[k].cq,
				.cap = {.max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1},
				.qp_type = IBV_QPT_RC,
			};

			s[k].qps[i] = ibv_create_qp(s[k].pd, &ia);
			if (!s[k].qps[i])
				fail("ibv_create_qp");
		}
	}
	t1 = now_ns();
	c1 = cpu_ns(&s1);
	for (int i = 0; i < n; i++) {
		connect_qp(s[0].qps[i], s[1].qps[i]->qp_num, &s[1].gid, gid_index);
		connect_qp(s[1].qps[i], s[0].qps[i]->qp_num, &s[0].gid, gid_index);
	}
	t2 = now_ns();
	c2 = cpu_ns(&s2);
	for (int i = 0; i < n; i++)
		for (int k = 0; k < 2; k++)
			if (ibv_destroy_qp(s[k].qps[i]))
				fail("ibv_destroy_qp");
	t3 = now_ns();
	c3 = cpu_ns(NULL);
	printf("qps %d create_ns %llu connect_ns %llu destroy_ns %llu create_cpu %llu connect_cpu %llu destroy_cpu %llu create_sys %llu connect_sys %llu\n",
	       n, (unsigned long long)(t1 - t0), (unsigned long long)(t2 - t1), (unsigned long long)(t3 - t2),
	       (unsigned long long)(c1 - c0), (unsigned long long)(c2 - c1), (unsigned long long)(c3 - c2),
	       (unsigned long long)(s1 - s0), (unsigned long long)(s2 - s1));
	for (int k = 0; k < 2; k++) {
		ibv_destroy_cq(s[k].cq);
		ibv_dealloc_pd(s[k].pd);
		ibv_close_device(s[k].ctx);
		free(s[k].qps);
	}
	return 0;
}

static int mr(size_t len)
{
	struct ibv_context *ctx = open_dev("rxe0");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mr *m;
	uint64_t t0, t1, t2, c0, c1, c2;
	void *buf;

	if (!pd)
		fail("ibv_alloc_pd");
	buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		fail("mmap");
	for (size_t i = 0; i < len; i += 4096)
		((volatile char *)buf)[i] = 1;
	c0 = cpu_ns(NULL);
	t0 = now_ns();
	m = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!m)
		fail("ibv_reg_mr");
	t1 = now_ns();
	c1 = cpu_ns(NULL);
	if (ibv_dereg_mr(m))
		fail("ibv_dereg_mr");
	t2 = now_ns();
	c2 = cpu_ns(NULL);
	printf("mr %zu reg_ns %llu dereg_ns %llu reg_cpu %llu dereg_cpu %llu\n", len, (unsigned long long)(t1 - t0),
	       (unsigned long long)(t2 - t1), (unsigned long long)(c1 - c0), (unsigned long long)(c2 - c1));
	munmap(buf, len);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "qps"))
		return qps(atoi(argv[2]), atoi(argv[3]));
	if (argc == 3 && !strcmp(argv[1], "mr"))
		return mr(strtoull(argv[2], NULL, 10));
	fprintf(stderr, "usage: scale qps N GIDIDX | scale mr BYTES\n");
	return 2;
}
