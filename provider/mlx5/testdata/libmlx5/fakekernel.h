// fakekernel.h: what the fake mlx5 kernel (fakekernel.c) answers and records,
// shared with the driver program (golden.c).
#ifndef FAKEKERNEL_H
#define FAKEKERNEL_H

#include <stddef.h>
#include <stdint.h>

/* Fixed numbers the fake kernel hands out, so the vectors need no masking. */
#define FAKE_FIRST_CQN 0x80
#define FAKE_FIRST_QPN 0x1100
#define FAKE_FIRST_SRQN 0x40
#define FAKE_FIRST_PDN 0x7
#define FAKE_MR_LKEY 0x00012301
#define FAKE_MR_RKEY 0x00012302
#define FAKE_DUMP_FILL_MKEY 0x00000100
#define FAKE_FIRST_UAR_PAGE_ID 0x20
#define FAKE_UAR_MMAP_PGOFF 0x400
#define FAKE_RAW_TISN 0x31
#define FAKE_RAW_RQN 0x32
#define FAKE_RAW_SQN 0x33

/* UAR pages are filled with this 64-bit pattern, so that every store
 * libmlx5 makes there shows, even one of zeros (all its UAR stores are
 * aligned 8-byte ones). */
#define FAKE_UAR_POISON 0xa5c3a5c3a5c3a5c3ULL

/* Records are kept per command: slot = write command number, or
 * FAKE_EX(number) for the extended commands. */
#define FAKE_EX(cmd) (64 + (cmd))
#define FAKE_MAX_CMD 128
#define FAKE_MAX_UARS 32

struct fake_cmd_rec {
	int seen, ex, ret;
	uint64_t seq; /* order of the commands */
	uint8_t core_in[256], drv_in[256], core_out[512], drv_out[512];
	size_t core_in_len, drv_in_len, core_out_len, drv_out_len;
};

struct fake_uar {
	uint32_t page_id;
	uint64_t mmap_offset;
	int nc;
	void *addr;
	size_t len;
};

const struct fake_cmd_rec *fake_last_cmd(uint32_t slot);
int fake_uar_count(void);
const struct fake_uar *fake_uar(int i);
/* fake_fail_next makes the next command in slot fail with err. */
void fake_fail_next(uint32_t slot, int err);

#endif
