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

skip() { echo "$*" >&2; exit 77; }
command -v gcc >/dev/null || skip "gcc not found (apt-get install gcc libc6-dev)"
[ -e /usr/include/infiniband/mlx5dv.h ] || skip "infiniband/mlx5dv.h not found (apt-get install libibverbs-dev)"
version=$(dpkg-query -W -f '${Version}' ibverbs-providers 2>/dev/null) ||
	skip "ibverbs-providers not installed (apt-get install ibverbs-providers)"
case $version in
44.0-*) ;;
*) skip "ibverbs-providers $version: the golden vectors come from rdma-core 44 (Debian 12)" ;;
esac

# the vectors (ring sizes, buffer layouts) are those of 4 KiB pages
[ "$(getconf PAGESIZE)" = 4096 ] || skip "page size $(getconf PAGESIZE): the golden vectors are for 4096-byte pages"

gcc -Wall -Werror -O2 -shared -fPIC -o "$out/libfakekernel.so" "$here/fakekernel.c" -ldl
gcc -Wall -Werror -O2 -DGENERATOR_VERSION="\"$version\"" -o "$out/golden" "$here/golden.c" \
	-L"$out" -lfakekernel -Wl,-rpath,"$out" -libverbs -lmlx5
# libibverbs must see the fake /dev/infiniband/uverbs0 from its first call
LD_PRELOAD="$out/libfakekernel.so" "$out/golden" "$here/sysfs" >"$out/golden.json.tmp"
mv "$out/golden.json.tmp" "$out/golden.json"
