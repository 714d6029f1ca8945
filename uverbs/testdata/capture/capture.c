/*
 * capture.c: an LD_PRELOAD shim that records the uverbs commands a program
 * (rdma-core's libibverbs and its providers) sends to the kernel, so that
 * goverbs' command bytes can be compared with them
 * (uverbs/rdmacore_vm_test.go).
 *
 * It wraps ioctl() and write() on /dev/infiniband/uverbs* descriptors and
 * appends one JSON line per command to $CAPTURE_FILE.<pid>, in the format of
 * goverbs' transcripts (internal/transport/transcript.go: Exchange and
 * AttrRecord) plus "attr_data" for each attribute.
 *
 * RDMA_VERBS_IOCTL: the header and every attribute. The wire does not say
 * which attributes point to memory (a PTR_IN of up to 8 bytes is inline, a
 * PTR_OUT is always a pointer), so the kind of each attribute comes from the
 * kernel's method specifications (abi.md 2.2 and 2.4) in the table below:
 * pointed bytes are read before the call for PTR_IN of more than 8 bytes
 * ("in") and after a successful call for PTR_OUT ("out"). Pointers
 * themselves are not recorded.
 *
 * write(): the whole command, with the response pointer (bytes 8..15, for a
 * command that answers) zeroed as goverbs' recorder does, and the response
 * bytes after the call.
 *
 * CAPTURE_NO_IOCTL=1 answers every RDMA_VERBS_IOCTL with ENOTTY without
 * asking the kernel, as a kernel without the ioctl framework does; rdma-core
 * then sends every command by write(), which is what goverbs' write
 * transport is compared with. The refused calls are recorded with errno 25.
 *
 * Built by the Makefile (capture target) with the host's gcc; it needs only
 * libc (dlsym is in libc since glibc 2.34), and no rdma-core headers.
 */
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
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#define VERBS_IOCTL 0xc0181b01UL
#define UVERBS_PREFIX "/dev/infiniband/uverbs"

/* struct ib_uverbs_ioctl_hdr and struct ib_uverbs_attr (rdma_user_ioctl_cmds.h). */
struct uv_hdr {
	uint16_t length;
	uint16_t object_id;
	uint16_t method_id;
	uint16_t num_attrs;
	uint64_t reserved1;
	uint32_t driver_id;
	uint32_t reserved2;
};

struct uv_attr {
	uint16_t attr_id;
	uint16_t len;
	uint16_t flags;
	uint16_t attr_data;
	uint64_t data;
};

enum kind { K_UNKNOWN, K_IN, K_PTR_IN, K_PTR_OUT, K_IDR, K_IDR_NEW, K_FD, K_FD_NEW };

static const char *const kind_names[] = {
	[K_UNKNOWN] = "unknown", [K_IN] = "in",	      [K_PTR_IN] = "ptr-in", [K_PTR_OUT] = "ptr-out",
	[K_IDR] = "idr",	 [K_IDR_NEW] = "idr-new", [K_FD] = "fd",	     [K_FD_NEW] = "fd-new",
};

/*
 * Attribute kinds of the methods rdma-core 44 uses on rxe, from the kernel's
 * specifications (uverbs_std_types_*.c; abi.md 2.4). K_PTR_IN means PTR_IN
 * and is inline when the length is at most 8 bytes.
 */
struct kind_rule {
	uint16_t object, method, attr;
	enum kind kind;
};

static const struct kind_rule kind_rules[] = {
	/* DEVICE (0) */
	{0, 0, 0, K_PTR_IN},  /* INVOKE_WRITE: CORE_IN */
	{0, 0, 1, K_PTR_OUT}, /* CORE_OUT */
	{0, 0, 2, K_IN},      /* WRITE_CMD (CONST_IN) */
	{0, 2, 0, K_IN},      /* QUERY_PORT: PORT_NUM */
	{0, 2, 1, K_PTR_OUT}, /* RESP */
	{0, 3, 0, K_PTR_OUT}, /* GET_CONTEXT: NUM_COMP_VECTORS */
	{0, 3, 1, K_PTR_OUT}, /* CORE_SUPPORT */
	{0, 4, 0, K_PTR_OUT}, /* QUERY_CONTEXT: NUM_COMP_VECTORS */
	{0, 4, 1, K_PTR_OUT}, /* CORE_SUPPORT */
	{0, 5, 0, K_IN},      /* QUERY_GID_TABLE: ENTRY_SIZE */
	{0, 5, 1, K_IN},      /* FLAGS */
	{0, 5, 2, K_PTR_OUT}, /* RESP_ENTRIES */
	{0, 5, 3, K_PTR_OUT}, /* RESP_NUM_ENTRIES */
	{0, 6, 0, K_IN},      /* QUERY_GID_ENTRY: PORT */
	{0, 6, 1, K_IN},      /* GID_INDEX */
	{0, 6, 2, K_IN},      /* FLAGS */
	{0, 6, 3, K_PTR_OUT}, /* RESP_ENTRY */
	/* PD (1), AH (6), MR (7): destroy */
	{1, 0, 0, K_IDR},
	{6, 0, 0, K_IDR},
	{7, 1, 0, K_IDR},
	/* CQ (3) */
	{3, 0, 0, K_IDR_NEW}, /* CREATE: HANDLE */
	{3, 0, 1, K_PTR_IN},  /* CQE */
	{3, 0, 2, K_PTR_IN},  /* USER_HANDLE */
	{3, 0, 3, K_FD},      /* COMP_CHANNEL */
	{3, 0, 4, K_PTR_IN},  /* COMP_VECTOR */
	{3, 0, 5, K_IN},      /* FLAGS */
	{3, 0, 6, K_PTR_OUT}, /* RESP_CQE */
	{3, 0, 7, K_FD},      /* EVENT_FD */
	{3, 1, 0, K_IDR},     /* DESTROY: HANDLE */
	{3, 1, 1, K_PTR_OUT}, /* RESP */
	/* QP (4) */
	{4, 0, 0, K_IDR_NEW},  /* CREATE: HANDLE */
	{4, 0, 1, K_IDR},      /* XRCD_HANDLE */
	{4, 0, 2, K_IDR},      /* PD_HANDLE */
	{4, 0, 3, K_IDR},      /* SRQ_HANDLE */
	{4, 0, 4, K_IDR},      /* SEND_CQ */
	{4, 0, 5, K_IDR},      /* RECV_CQ */
	{4, 0, 6, K_IDR},      /* IND_TABLE */
	{4, 0, 7, K_PTR_IN},   /* USER_HANDLE */
	{4, 0, 8, K_PTR_IN},   /* CAP */
	{4, 0, 9, K_IN},       /* TYPE (CONST_IN) */
	{4, 0, 10, K_IN},      /* FLAGS */
	{4, 0, 11, K_PTR_IN},  /* SOURCE_QPN */
	{4, 0, 12, K_FD},      /* EVENT_FD */
	{4, 0, 13, K_PTR_OUT}, /* RESP_CAP */
	{4, 0, 14, K_PTR_OUT}, /* RESP_QP_NUM */
	{4, 1, 0, K_IDR},      /* DESTROY: HANDLE */
	{4, 1, 1, K_PTR_OUT},  /* RESP */
	/* SRQ (5) */
	{5, 1, 0, K_IDR},
	{5, 1, 1, K_PTR_OUT},
	/* ASYNC_EVENT (16): ALLOC */
	{16, 0, 0, K_FD_NEW},
};

static enum kind attr_kind(const struct uv_hdr *h, const struct uv_attr *a)
{
	enum kind k = K_UNKNOWN;

	if (a->attr_id == 0x1000) /* UVERBS_ATTR_UHW_IN */
		k = K_PTR_IN;
	else if (a->attr_id == 0x1001) /* UVERBS_ATTR_UHW_OUT */
		k = K_PTR_OUT;
	else
		for (size_t i = 0; i < sizeof(kind_rules) / sizeof(kind_rules[0]); i++)
			if (kind_rules[i].object == h->object_id && kind_rules[i].method == h->method_id &&
			    kind_rules[i].attr == a->attr_id) {
				k = kind_rules[i].kind;
				break;
			}
	if (k == K_PTR_IN && a->len <= 8)
		k = K_IN;
	return k;
}

/* A growing string; on allocation failure the record is dropped. */
struct sbuf {
	char *p;
	size_t n, cap;
	int failed;
};

static void sb_grow(struct sbuf *b, size_t more)
{
	if (b->failed || b->n + more + 1 <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 1024;
	while (cap < b->n + more + 1)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p) {
		b->failed = 1;
		return;
	}
	b->p = p;
	b->cap = cap;
}

static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	char tmp[256];
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		b->failed = 1;
		return;
	}
	sb_grow(b, n);
	if (b->failed)
		return;
	memcpy(b->p + b->n, tmp, n + 1);
	b->n += n;
}

static void sb_append(struct sbuf *b, const struct sbuf *s)
{
	if (!s->n)
		return;
	sb_grow(b, s->n);
	if (b->failed)
		return;
	memcpy(b->p + b->n, s->p, s->n + 1);
	b->n += s->n;
}

static void sb_hex(struct sbuf *b, const void *data, size_t len)
{
	static const char digits[] = "0123456789abcdef";
	const uint8_t *d = data;

	sb_grow(b, 2 * len);
	if (b->failed)
		return;
	for (size_t i = 0; i < len; i++) {
		b->p[b->n++] = digits[d[i] >> 4];
		b->p[b->n++] = digits[d[i] & 15];
	}
	b->p[b->n] = 0;
}

/* The record goes out with raw system calls, so it never re-enters write(). */
static void emit(struct sbuf *b)
{
	const char *base = getenv("CAPTURE_FILE");
	char path[4096];
	int fd;

	if (b->failed || !base || !*base)
		goto out;
	if (snprintf(path, sizeof(path), "%s.%d", base, (int)getpid()) >= (int)sizeof(path))
		goto out;
	fd = syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		goto out;
	sb_printf(b, "\n");
	if (!b->failed)
		syscall(SYS_write, fd, b->p, b->n);
	syscall(SYS_close, fd);
out:
	free(b->p);
}

static int is_uverbs_fd(int fd)
{
	char link[64], target[256];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n <= 0)
		return 0;
	target[n] = 0;
	return strncmp(target, UVERBS_PREFIX, strlen(UVERBS_PREFIX)) == 0;
}

static int no_ioctl(void)
{
	const char *v = getenv("CAPTURE_NO_IOCTL");
	return v && *v && strcmp(v, "0") != 0;
}

#define MAX_ATTRS 64

static int capture_ioctl(int (*real)(int, unsigned long, ...), int fd, unsigned long req, void *arg)
{
	struct uv_hdr *h = arg;
	struct uv_attr *attrs = (struct uv_attr *)(h + 1);
	struct uv_attr sent[MAX_ATTRS];
	enum kind kinds[MAX_ATTRS];
	struct sbuf b = {0};
	unsigned n = h->num_attrs;
	int saved_errno = errno;
	int ret, err;

	if (n > MAX_ATTRS || h->length != sizeof(*h) + n * sizeof(*attrs)) {
		/* Not a well-formed command: pass it on, record only that. */
		ret = real(fd, req, arg);
		err = ret < 0 ? errno : 0;
		sb_printf(&b, "{\"op\":\"ioctl\",\"object\":%u,\"method\":%u,\"malformed\":true,\"errno\":%d}",
			  h->object_id, h->method_id, err);
		emit(&b);
		errno = err ? err : saved_errno;
		return ret;
	}

	sb_printf(&b, "{\"op\":\"ioctl\",\"object\":%u,\"method\":%u,\"driver\":%u", h->object_id, h->method_id,
		  h->driver_id);
	if (h->reserved1 || h->reserved2)
		sb_printf(&b, ",\"hdr_reserved\":true");
	for (unsigned i = 0; i < n; i++) {
		sent[i] = attrs[i];
		kinds[i] = attr_kind(h, &attrs[i]);
	}
	/* Inputs are read before the call: the kernel may write to the array. */
	sb_printf(&b, ",\"attrs\":[");
	struct sbuf in[MAX_ATTRS];
	memset(in, 0, sizeof(in));
	for (unsigned i = 0; i < n; i++)
		if ((kinds[i] == K_PTR_IN || (kinds[i] == K_UNKNOWN && sent[i].len > 8)) && sent[i].len && sent[i].data)
			sb_hex(&in[i], (const void *)(uintptr_t)sent[i].data, sent[i].len);

	if (no_ioctl()) {
		ret = -1;
		err = ENOTTY;
	} else {
		ret = real(fd, req, arg);
		err = ret < 0 ? errno : 0;
	}

	for (unsigned i = 0; i < n; i++) {
		const struct uv_attr *a = &sent[i];
		int pointer = kinds[i] == K_PTR_IN || kinds[i] == K_PTR_OUT ||
			      (kinds[i] == K_UNKNOWN && a->len > 8);

		sb_printf(&b, "%s{\"id\":%u,\"kind\":\"%s\",\"flags\":%u,\"len\":%u,\"attr_data\":%u", i ? "," : "",
			  a->attr_id, kind_names[kinds[i]], a->flags, a->len, a->attr_data);
		if (!pointer)
			sb_printf(&b, ",\"data\":%llu", (unsigned long long)a->data);
		if (in[i].n) {
			sb_printf(&b, ",\"in\":\"");
			sb_append(&b, &in[i]);
			sb_printf(&b, "\"");
		}
		free(in[i].p);
		sb_printf(&b, ",\"out_flags\":%u", attrs[i].flags);
		if (!err && (kinds[i] == K_IDR_NEW || kinds[i] == K_FD_NEW))
			sb_printf(&b, ",\"out_data\":%llu", (unsigned long long)attrs[i].data);
		if (!err && (kinds[i] == K_PTR_OUT || kinds[i] == K_UNKNOWN) && a->len > 0 &&
		    (kinds[i] == K_PTR_OUT || a->len > 8) && a->data) {
			sb_printf(&b, ",\"out\":\"");
			sb_hex(&b, (const void *)(uintptr_t)a->data, a->len);
			sb_printf(&b, "\"");
		}
		sb_printf(&b, "}");
	}
	sb_printf(&b, "],\"errno\":%d}", err);
	emit(&b);
	errno = err ? err : saved_errno;
	return ret;
}

int ioctl(int fd, unsigned long req, ...)
{
	static int (*real)(int, unsigned long, ...);
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (!real)
		real = (int (*)(int, unsigned long, ...))dlsym(RTLD_NEXT, "ioctl");
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	if (req != VERBS_IOCTL || !arg || !is_uverbs_fd(fd))
		return real(fd, req, arg);
	return capture_ioctl(real, fd, req, arg);
}

ssize_t write(int fd, const void *buf, size_t count)
{
	static ssize_t (*real)(int, const void *, size_t);
	struct sbuf b = {0};
	uint8_t *copy;
	uint32_t command;
	uint64_t resp = 0;
	size_t resp_len = 0;
	ssize_t ret;
	int saved_errno = errno;
	int err;

	if (!real)
		real = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	if (count < 8 || !buf || !is_uverbs_fd(fd))
		return real(fd, buf, count);

	copy = malloc(count);
	if (!copy)
		return real(fd, buf, count);
	memcpy(copy, buf, count);
	memcpy(&command, copy, 4);
	if (count >= 24 && (command & 0x80000000u)) {
		/* Extended: ex_hdr.response @8, provider_out_words @18. */
		uint16_t out_words, provider_out_words;

		memcpy(&out_words, copy + 6, 2);
		memcpy(&provider_out_words, copy + 18, 2);
		memcpy(&resp, copy + 8, 8);
		resp_len = ((size_t)out_words + provider_out_words) * 8;
	} else if (count >= 16) {
		uint16_t out_words;

		memcpy(&out_words, copy + 6, 2);
		if (out_words) {
			memcpy(&resp, copy + 8, 8);
			resp_len = (size_t)out_words * 4;
		}
	}
	if (resp_len)
		memset(copy + 8, 0, 8);

	ret = real(fd, buf, count);
	err = ret < 0 ? errno : 0;

	sb_printf(&b, "{\"op\":\"write\",\"write\":\"");
	sb_hex(&b, copy, count);
	sb_printf(&b, "\"");
	if (!err && resp && resp_len) {
		sb_printf(&b, ",\"resp\":\"");
		sb_hex(&b, (const void *)(uintptr_t)resp, resp_len);
		sb_printf(&b, "\"");
	}
	if (!err && ret != (ssize_t)count)
		sb_printf(&b, ",\"short\":%zd", ret);
	sb_printf(&b, ",\"errno\":%d}", err);
	emit(&b);
	free(copy);
	errno = err ? err : saved_errno;
	return ret;
}
