/*
 * A stand-in for libibverbs that serves device data from a fixture file, so
 * that rdma-core v44.0's unmodified libibverbs/examples/devinfo.c can be run
 * on arbitrary (odd) device data. gen.py builds it with devinfo.c and records
 * what that prints as the expected output of ibinfo's golden tests.
 *
 * Fixture lines (the file named by $IBINFO_FIXTURE):
 *   list_fail                        ibv_get_device_list fails (ENOSYS)
 *   device NAME                      starts a device
 *   node_type N                      kernel node type -> transport_type
 *   board_id HEX|-                   board_id file bytes ("-": empty file)
 *   open_fail | query_fail | close_fail
 *   num_comp_vectors N
 *   attr NAME VALUE                  ibv_device_attr_ex field (dotted path)
 *   port N                           starts a port
 *   pattr NAME VALUE                 ibv_port_attr field of the current port
 *   port_fail ERRNO
 *   gid PORT INDEX HEX32 TYPE        entry; TYPE is enum ibv_gid_type (0 IB, 1 v1, 2 v2)
 *   gid_fail PORT INDEX              both GID queries fail
 *   gidtype_fail PORT INDEX HEX32    the GID reads, its type query fails
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

enum ibv_gid_type_sysfs { IBV_GID_TYPE_SYSFS_IB_ROCE_V1, IBV_GID_TYPE_SYSFS_ROCE_V2 };

#define MAXDEV 8
#define MAXPORT 8
#define MAXGID 64

struct mgid { int port, index, kind, type; uint8_t raw[16]; }; /* kind 1 ok, 2 fail, 3 type fail */
struct mport { int num, fail; struct ibv_port_attr attr; };
struct mdev {
	struct ibv_device dev;
	int node_type, open_fail, query_fail, close_fail, ncv;
	int has_board; uint8_t board[512]; size_t board_len;
	struct ibv_device_attr_ex attr;
	struct mport ports[MAXPORT]; int nports;
	struct mgid gids[MAXGID]; int ngids;
};
struct mctx { struct verbs_context vctx; struct mdev *dev; };

static struct mdev devs[MAXDEV];
static int ndevs, list_fail, loaded;

struct field { const char *name; size_t off, size; };
#define F(m) { #m, offsetof(struct ibv_device_attr_ex, m), sizeof(((struct ibv_device_attr_ex *)0)->m) }
#define O(m) { #m, offsetof(struct ibv_device_attr_ex, orig_attr.m), sizeof(((struct ibv_device_attr_ex *)0)->orig_attr.m) }
static const struct field dfields[] = {
	O(node_guid), O(sys_image_guid), O(max_mr_size), O(page_size_cap), O(vendor_id), O(vendor_part_id),
	O(hw_ver), O(max_qp), O(max_qp_wr), O(device_cap_flags), O(max_sge), O(max_sge_rd), O(max_cq),
	O(max_cqe), O(max_mr), O(max_pd), O(max_qp_rd_atom), O(max_ee_rd_atom), O(max_res_rd_atom),
	O(max_qp_init_rd_atom), O(max_ee_init_rd_atom), O(atomic_cap), O(max_ee), O(max_rdd), O(max_mw),
	O(max_raw_ipv6_qp), O(max_raw_ethy_qp), O(max_mcast_grp), O(max_mcast_qp_attach),
	O(max_total_mcast_qp_attach), O(max_ah), O(max_fmr), O(max_map_per_fmr), O(max_srq), O(max_srq_wr),
	O(max_srq_sge), O(max_pkeys), O(local_ca_ack_delay), O(phys_port_cnt),
	F(odp_caps.general_caps), F(odp_caps.per_transport_caps.rc_odp_caps),
	F(odp_caps.per_transport_caps.uc_odp_caps), F(odp_caps.per_transport_caps.ud_odp_caps),
	F(completion_timestamp_mask), F(hca_core_clock), F(device_cap_flags_ex), F(tso_caps.max_tso),
	F(tso_caps.supported_qpts), F(rss_caps.supported_qpts), F(rss_caps.max_rwq_indirection_tables),
	F(rss_caps.max_rwq_indirection_table_size), F(rss_caps.rx_hash_fields_mask),
	F(rss_caps.rx_hash_function), F(max_wq_type_rq), F(packet_pacing_caps.qp_rate_limit_min),
	F(packet_pacing_caps.qp_rate_limit_max), F(packet_pacing_caps.supported_qpts), F(raw_packet_caps),
	F(tm_caps.max_rndv_hdr_size), F(tm_caps.max_num_tags), F(tm_caps.flags), F(tm_caps.max_ops),
	F(tm_caps.max_sge), F(cq_mod_caps.max_cq_count), F(cq_mod_caps.max_cq_period), F(max_dm_size),
	F(xrc_odp_caps),
};
#define P(m) { #m, offsetof(struct ibv_port_attr, m), sizeof(((struct ibv_port_attr *)0)->m) }
static const struct field pfields[] = {
	P(state), P(max_mtu), P(active_mtu), P(gid_tbl_len), P(port_cap_flags), P(max_msg_sz),
	P(bad_pkey_cntr), P(qkey_viol_cntr), P(pkey_tbl_len), P(lid), P(sm_lid), P(lmc), P(max_vl_num),
	P(sm_sl), P(subnet_timeout), P(init_type_reply), P(active_width), P(active_speed), P(phys_state),
	P(link_layer), P(flags), P(port_cap_flags2),
};

static void die(const char *msg, const char *arg) { fprintf(stderr, "mockverbs: %s %s\n", msg, arg); exit(99); }

static void set(void *base, const struct field *fs, size_t n, const char *name, unsigned long long v)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(fs[i].name, name)) {
			memcpy((char *)base + fs[i].off, &v, fs[i].size); /* little endian: low bytes */
			return;
		}
	die("unknown field", name);
}

static void hex(const char *s, uint8_t *out, size_t *len)
{
	size_t n = 0;
	for (; s[0] && s[1] && s[0] != '\n'; s += 2) { unsigned b; sscanf(s, "%2x", &b); out[n++] = b; }
	if (len) *len = n;
}

static void load(void)
{
	char line[4096], a[256], b[4096];
	struct mdev *d = NULL; struct mport *p = NULL;
	const char *path = getenv("IBINFO_FIXTURE");
	FILE *f;

	if (loaded++) return;
	if (!path || !(f = fopen(path, "r"))) die("no fixture", path ? path : "");
	while (fgets(line, sizeof line, f)) {
		unsigned long long v; int port, index, type;
		line[strcspn(line, "\n")] = 0;
		if (!line[0] || line[0] == '#') continue;
		if (!strcmp(line, "list_fail")) { list_fail = 1; continue; }
		if (sscanf(line, "device %255s", a) == 1) {
			d = &devs[ndevs++]; memset(d, 0, sizeof *d); p = NULL;
			snprintf(d->dev.name, sizeof d->dev.name, "%s", a);
			snprintf(d->dev.ibdev_path, sizeof d->dev.ibdev_path, "/sys/class/infiniband/%s", a);
			continue;
		}
		if (!d) die("line before device:", line);
		if (sscanf(line, "node_type %d", &d->node_type) == 1) continue;
		if (!strcmp(line, "board_id -")) { d->has_board = 1; d->board_len = 0; continue; }
		if (sscanf(line, "board_id %4095s", b) == 1) { d->has_board = 1; hex(b, d->board, &d->board_len); continue; }
		if (!strcmp(line, "open_fail")) { d->open_fail = 1; continue; }
		if (!strcmp(line, "query_fail")) { d->query_fail = 1; continue; }
		if (!strcmp(line, "close_fail")) { d->close_fail = 1; continue; }
		if (sscanf(line, "num_comp_vectors %d", &d->ncv) == 1) continue;
		if (!strncmp(line, "attr fw_ver ", 12)) {
			snprintf(d->attr.orig_attr.fw_ver, sizeof d->attr.orig_attr.fw_ver, "%s", line + 12);
			continue;
		}
		if (sscanf(line, "attr %255s %4095s", a, b) == 2) {
			v = strtoull(b, NULL, 0);
			if (!strcmp(a, "node_guid") || !strcmp(a, "sys_image_guid")) v = htobe64(v);
			set(&d->attr, dfields, sizeof dfields / sizeof *dfields, a, v);
			continue;
		}
		if (sscanf(line, "port %d", &port) == 1) { p = &d->ports[d->nports++]; memset(p, 0, sizeof *p); p->num = port; continue; }
		if (sscanf(line, "pattr %255s %4095s", a, b) == 2) {
			v = strtoull(b, NULL, 0);
			if (!p) die("pattr before port:", line);
			set(&p->attr, pfields, sizeof pfields / sizeof *pfields, a, v);
			continue;
		}
		if (sscanf(line, "port_fail %d", &type) == 1) { p->fail = type; continue; }
		if (sscanf(line, "gid %d %d %32s %d", &port, &index, b, &type) == 4) {
			struct mgid *g = &d->gids[d->ngids++];
			g->port = port; g->index = index; g->kind = 1; g->type = type; hex(b, g->raw, NULL);
			continue;
		}
		if (sscanf(line, "gid_fail %d %d", &port, &index) == 2) {
			struct mgid *g = &d->gids[d->ngids++];
			memset(g, 0, sizeof *g); g->port = port; g->index = index; g->kind = 2;
			continue;
		}
		if (sscanf(line, "gidtype_fail %d %d %32s", &port, &index, b) == 3) {
			struct mgid *g = &d->gids[d->ngids++];
			g->port = port; g->index = index; g->kind = 3; hex(b, g->raw, NULL);
			continue;
		}
		die("bad line:", line);
	}
	fclose(f);
	for (int i = 0; i < ndevs; i++) {
		enum ibv_node_type nt = devs[i].node_type;
		struct ibv_device *dev = &devs[i].dev;
		dev->node_type = nt;
		switch (nt) {
		case 1: case 2: case 3: dev->transport_type = IBV_TRANSPORT_IB; break;
		case 4: dev->transport_type = IBV_TRANSPORT_IWARP; break;
		case 5: dev->transport_type = IBV_TRANSPORT_USNIC; break;
		case 6: dev->transport_type = IBV_TRANSPORT_USNIC_UDP; break;
		case 7: dev->transport_type = IBV_TRANSPORT_UNSPECIFIED; break;
		default: dev->transport_type = IBV_TRANSPORT_UNKNOWN; break;
		}
	}
}

struct ibv_device **ibv_get_device_list(int *num)
{
	struct ibv_device **l;

	load();
	if (num) *num = 0;
	if (list_fail) { errno = ENOSYS; return NULL; }
	l = calloc(ndevs + 1, sizeof *l);
	for (int i = 0; i < ndevs; i++) l[i] = &devs[i].dev;
	if (num) *num = ndevs;
	return l;
}

void ibv_free_device_list(struct ibv_device **list) { free(list); }

const char *ibv_get_device_name(struct ibv_device *device) { return device->name; }

static struct mdev *of(struct ibv_context *ctx) { return ((struct mctx *)verbs_get_ctx(ctx))->dev; }

static int query_device_ex(struct ibv_context *ctx, const struct ibv_query_device_ex_input *in,
			   struct ibv_device_attr_ex *attr, size_t size)
{
	struct mdev *d = of(ctx);
	if (d->query_fail) return EIO;
	memcpy(attr, &d->attr, size < sizeof *attr ? size : sizeof *attr);
	return 0;
}

static int query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr, size_t len)
{
	struct mdev *d = of(ctx);
	for (int i = 0; i < d->nports; i++)
		if (d->ports[i].num == port) {
			if (d->ports[i].fail) return d->ports[i].fail;
			memcpy(attr, &d->ports[i].attr, sizeof *attr);
			return 0;
		}
	return EINVAL;
}

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct mdev *d = (struct mdev *)((char *)device - offsetof(struct mdev, dev));
	struct mctx *c;

	if (d->open_fail) return NULL;
	c = calloc(1, sizeof *c);
	c->dev = d;
	c->vctx.sz = sizeof c->vctx;
	c->vctx.query_device_ex = query_device_ex;
	c->vctx.query_port = query_port;
	c->vctx.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
	c->vctx.context.device = device;
	c->vctx.context.num_comp_vectors = d->ncv;
	return &c->vctx.context;
}

int ibv_close_device(struct ibv_context *ctx)
{
	int fail = of(ctx)->close_fail;
	free(verbs_get_ctx(ctx));
	return fail ? -1 : 0;
}

/* The legacy entry points the inline wrappers fall back to; the mock
   context always has the extended ones. */
int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr) { return EIO; }
#undef ibv_query_port
int ibv_query_port(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *attr) { return EIO; }

static struct mgid *find_gid(struct ibv_context *ctx, int port, int index)
{
	struct mdev *d = of(ctx);
	for (int i = 0; i < d->ngids; i++)
		if (d->gids[i].port == port && d->gids[i].index == index) return &d->gids[i];
	return NULL;
}

int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
	struct mgid *g = find_gid(ctx, port, index);
	if (!g) { memset(gid, 0, sizeof *gid); return 0; }
	if (g->kind == 2) return -1;
	memcpy(gid->raw, g->raw, 16);
	return 0;
}

int ibv_query_gid_type(struct ibv_context *ctx, uint8_t port, unsigned int index, enum ibv_gid_type_sysfs *type)
{
	struct mgid *g = find_gid(ctx, port, index);
	if (!g) { *type = IBV_GID_TYPE_SYSFS_IB_ROCE_V1; return 0; }
	if (g->kind != 1) return -1;
	*type = g->type >= 2 ? IBV_GID_TYPE_SYSFS_ROCE_V2 : IBV_GID_TYPE_SYSFS_IB_ROCE_V1;
	return 0;
}

/* The semantics of rdma-core's ibv_read_sysfs_file: one read() of at most
   size bytes, one trailing newline removed, and a full buffer without one
   refused. */
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	struct mdev *d = NULL;
	size_t len;

	for (int i = 0; i < ndevs; i++)
		if (!strcmp(devs[i].dev.ibdev_path, dir)) d = &devs[i];
	if (!d || strcmp(file, "board_id") || !d->has_board) return -1;
	len = d->board_len < size ? d->board_len : size;
	memcpy(buf, d->board, len);
	if (len > 0) {
		if (buf[len - 1] == '\n')
			buf[--len] = '\0';
		else if (len < size)
			buf[len] = '\0';
		else
			return -1;
	}
	return len;
}
