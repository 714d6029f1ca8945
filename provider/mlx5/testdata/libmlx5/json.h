// json.h: a minimal JSON writer for golden.c (stdout, 2-space indentation,
// numbers above 2^53 as "0x..." strings, byte strings as lowercase hex).
#ifndef GOLDEN_JSON_H
#define GOLDEN_JSON_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int j_depth;
static int j_first[64];
static int j_after_key;

static void j_indent(void)
{
	putchar('\n');
	for (int i = 0; i < j_depth; i++)
		fputs("  ", stdout);
}

/* j_sep writes the comma and newline a value needs, unless it follows a key. */
static void j_sep(void)
{
	if (j_after_key) {
		j_after_key = 0;
		return;
	}
	if (j_depth > 0) {
		if (!j_first[j_depth])
			putchar(',');
		j_first[j_depth] = 0;
		j_indent();
	}
}

static void j_key(const char *k)
{
	j_sep();
	printf("\"%s\": ", k);
	j_after_key = 1;
}

static void j_open(char c)
{
	j_sep();
	putchar(c);
	j_depth++;
	j_first[j_depth] = 1;
}

static void j_close(char c)
{
	int empty = j_first[j_depth];

	j_depth--;
	if (!empty)
		j_indent();
	putchar(c);
	if (j_depth == 0)
		putchar('\n');
}

static void j_obj(void) { j_open('{'); }
static void j_end(void) { j_close('}'); }
static void j_arr(void) { j_open('['); }
static void j_earr(void) { j_close(']'); }

static void j_u64(uint64_t v)
{
	j_sep();
	if (v > (1ULL << 53))
		printf("\"0x%llx\"", (unsigned long long)v);
	else
		printf("%llu", (unsigned long long)v);
}

static void j_i64(int64_t v)
{
	j_sep();
	printf("%lld", (long long)v);
}

static void j_str(const char *s)
{
	j_sep();
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			putchar('\\');
		putchar(*s);
	}
	putchar('"');
}

static void j_null(void)
{
	j_sep();
	fputs("null", stdout);
}

static void j_hex(const void *p, size_t n)
{
	const uint8_t *b = p;

	j_sep();
	putchar('"');
	for (size_t i = 0; i < n; i++)
		printf("%02x", b[i]);
	putchar('"');
}

static void jk_u64(const char *k, uint64_t v) { j_key(k); j_u64(v); }
static void jk_i64(const char *k, int64_t v) { j_key(k); j_i64(v); }
static void jk_str(const char *k, const char *v) { j_key(k); j_str(v); }
static void jk_hex(const char *k, const void *p, size_t n) { j_key(k); j_hex(p, n); }

#endif
