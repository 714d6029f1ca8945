#!/bin/bash
# gen.sh OUTDIR: builds the fake mlx5 kernel (fakekernel.c, an LD_PRELOAD
# shim) and the driver program (golden.c) with gcc against the host's
# rdma-core (libibverbs-dev, ibverbs-providers), runs the driver and writes
# OUTDIR/golden.json. Exits 77 with the reason on stderr when the host lacks
# what it needs. To refresh the committed vectors:
#   provider/mlx5/testdata/libmlx5/gen.sh /tmp/g && cp /tmp/g/golden.json provider/mlx5/testdata/libmlx5/
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: gen.sh OUTDIR}
mkdir -p "$out"

. "$here/env.sh"
gcc -Wall -Werror -O2 -DGENERATOR_VERSION="\"$version\"" -o "$out/golden" "$here/golden.c" \
	-L"$out" -lfakekernel -Wl,-rpath,"$out" -libverbs -lmlx5
# libibverbs must see the fake /dev/infiniband/uverbs0 from its first call
LD_PRELOAD="$out/libfakekernel.so" "$out/golden" "$here/sysfs" >"$out/golden.json.tmp"
mv "$out/golden.json.tmp" "$out/golden.json"
