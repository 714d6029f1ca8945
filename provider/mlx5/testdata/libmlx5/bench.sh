#!/bin/bash
# bench.sh OUTDIR: builds the fake mlx5 kernel (fakekernel.c) and the
# libmlx5 data-path benchmark (bench.c) with gcc -O2 against the host's
# rdma-core. Exits 77 with the reason on stderr when the host lacks what it
# needs. internal/mlx5bench runs it beside provider/mlx5's Go benchmarks:
#   LD_PRELOAD=OUTDIR/libfakekernel.so OUTDIR/bench provider/mlx5/testdata/libmlx5/sysfs all 1000000
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: bench.sh OUTDIR}
mkdir -p "$out"
. "$here/env.sh"
gcc -Wall -Werror -O2 -o "$out/bench" "$here/bench.c" \
	-L"$out" -lfakekernel -Wl,-rpath,"$out" -libverbs -lmlx5
