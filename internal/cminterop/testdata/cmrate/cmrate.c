// cmrate: how fast librdmacm sets up RC connections, for comparison with
// goverbs' rdmacm (BenchmarkSetup in internal/cminterop).
//
// One process, one event channel, one thread: a listener bound to -a and
// -n rounds of -c clients, all started at once. A round is the clients'
// address and route resolution, a QP on each side, CONNECT, ACCEPT, and
// ESTABLISHED seen on both sides of every connection; its time, the
// process's CPU time (user and system) and context switches are summed. Tearing the round down
// (the QPs, CQs, ids) is not timed. Each side of a connection has what
// goverbs' Dial and Accept make: a send and a receive CQ without a
// completion channel and a QP, on librdmacm's PD of the device (one per
// device, shared). Prints one line:
//
//	cmrate: conns 100 rounds 5 setup_ns 123456789 cpu_ns 12345678 csw 1234
//
// Build: cc -O2 -o cmrate cmrate.c -lrdmacm -libverbs
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <rdma/rdma_cma.h>

static struct rdma_event_channel *channel;
static struct rdma_cm_id *listener;

struct round {
	struct rdma_cm_id **client; /* the active ids */
	struct rdma_cm_id **child;  /* the passive ids, as they arrive */
	int nchild;
	int established;            /* ESTABLISHED events, both sides */
};

static void die(const char *what, int err)
{
	fprintf(stderr, "cmrate: %s: %s\n", what, strerror(err));
	exit(1);
}

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/*
 * usage returns the process's CPU time so far (user and system) and adds
 * its context switches (voluntary and not) to *csw.
 */
static long long usage(long long *csw)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		die("getrusage", errno);
	*csw += ru.ru_nvcsw + ru.ru_nivcsw;
	return ((long long)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
	       ((long long)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
}

/*
 * make_qp gives the id its CQs (16 entries, no completion channel) and its
 * QP on the device's shared PD (pd NULL).
 */
static void make_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.send_cq = ibv_create_cq(id->verbs, 16, NULL, NULL, 0);
	if (!attr.send_cq)
		die("ibv_create_cq", errno);
	attr.recv_cq = ibv_create_cq(id->verbs, 16, NULL, NULL, 0);
	if (!attr.recv_cq)
		die("ibv_create_cq", errno);
	attr.qp_type = IBV_QPT_RC;
	attr.cap.max_send_wr = 16;
	attr.cap.max_recv_wr = 16;
	attr.cap.max_send_sge = 1;
	attr.cap.max_recv_sge = 1;
	if (rdma_create_qp(id, NULL, &attr))
		die("rdma_create_qp", errno);
}

/* free_qp destroys the QP and CQs make_qp made, and the id. */
static void free_qp(struct rdma_cm_id *id)
{
	struct ibv_cq *send_cq = id->qp->send_cq, *recv_cq = id->qp->recv_cq;

	rdma_destroy_qp(id);
	if (ibv_destroy_cq(send_cq) || ibv_destroy_cq(recv_cq))
		die("ibv_destroy_cq", errno);
	rdma_destroy_id(id);
}

static void conn_param(struct rdma_conn_param *p)
{
	memset(p, 0, sizeof(*p));
	p->responder_resources = 1;
	p->initiator_depth = 1;
	p->retry_count = 7;
	p->rnr_retry_count = 7;
}

/* handle takes one event of the round; it returns the event's id type. */
static void handle(struct round *r, struct rdma_cm_event *ev)
{
	struct rdma_conn_param p;
	struct rdma_cm_id *id = ev->id;

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rdma_resolve_route(id, 2000))
			die("rdma_resolve_route", errno);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		make_qp(id);
		conn_param(&p);
		if (rdma_connect(id, &p))
			die("rdma_connect", errno);
		break;
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		r->child[r->nchild++] = id;
		make_qp(id);
		conn_param(&p);
		if (rdma_accept(id, &p))
			die("rdma_accept", errno);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		r->established++;
		break;
	default:
		fprintf(stderr, "cmrate: unexpected event %s, status %d\n",
			rdma_event_str(ev->event), ev->status);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in srv, src;
	int conns = 100, rounds = 1, port = 7471, op, i, k;
	long long total = 0, cpu = 0, csw = 0, before;
	int have_src = 0;

	memset(&srv, 0, sizeof(srv));
	memset(&src, 0, sizeof(src));
	srv.sin_family = src.sin_family = AF_INET;
	while ((op = getopt(argc, argv, "a:I:p:c:n:")) != -1) {
		switch (op) {
		case 'a':
			if (inet_pton(AF_INET, optarg, &srv.sin_addr) != 1)
				die("-a", EINVAL);
			break;
		case 'I':
			if (inet_pton(AF_INET, optarg, &src.sin_addr) != 1)
				die("-I", EINVAL);
			have_src = 1;
			break;
		case 'p':
			port = atoi(optarg);
			break;
		case 'c':
			conns = atoi(optarg);
			break;
		case 'n':
			rounds = atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: cmrate -a server_ip [-I client_ip] [-p port] [-c conns] [-n rounds]\n");
			return 2;
		}
	}
	if (conns < 1 || rounds < 1)
		die("-c/-n", EINVAL);
	srv.sin_port = htons(port);

	channel = rdma_create_event_channel();
	if (!channel)
		die("rdma_create_event_channel", errno);
	if (rdma_create_id(channel, &listener, NULL, RDMA_PS_TCP))
		die("rdma_create_id", errno);
	if (rdma_bind_addr(listener, (struct sockaddr *)&srv))
		die("rdma_bind_addr", errno);
	if (rdma_listen(listener, conns))
		die("rdma_listen", errno);

	for (k = 0; k < rounds; k++) {
		struct round r;
		long long start, start_cpu;

		memset(&r, 0, sizeof(r));
		r.client = calloc(conns, sizeof(*r.client));
		r.child = calloc(conns, sizeof(*r.child));
		if (!r.client || !r.child)
			die("calloc", ENOMEM);

		start = now_ns();
		before = 0;
		start_cpu = usage(&before);
		for (i = 0; i < conns; i++) {
			if (rdma_create_id(channel, &r.client[i], NULL, RDMA_PS_TCP))
				die("rdma_create_id", errno);
			if (rdma_resolve_addr(r.client[i], have_src ? (struct sockaddr *)&src : NULL,
					      (struct sockaddr *)&srv, 2000))
				die("rdma_resolve_addr", errno);
		}
		while (r.established < 2 * conns) {
			struct rdma_cm_event *ev;

			if (rdma_get_cm_event(channel, &ev))
				die("rdma_get_cm_event", errno);
			handle(&r, ev);
			rdma_ack_cm_event(ev);
		}
		total += now_ns() - start;
		cpu += usage(&csw) - start_cpu;
		csw -= before;

		for (i = 0; i < r.nchild; i++)
			free_qp(r.child[i]);
		for (i = 0; i < conns; i++)
			free_qp(r.client[i]);
		free(r.client);
		free(r.child);
	}
	printf("cmrate: conns %d rounds %d setup_ns %lld cpu_ns %lld csw %lld\n", conns, rounds, total, cpu, csw);
	rdma_destroy_id(listener);
	rdma_destroy_event_channel(channel);
	return 0;
}
