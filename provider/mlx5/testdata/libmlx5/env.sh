# env.sh, sourced by gen.sh and bench.sh: checks that the host has what the
# harness needs (exits 77 with the reason on stderr when not), sets
# $version to rdma-core's, and builds the fake kernel into $out.
skip() { echo "$*" >&2; exit 77; }
command -v gcc >/dev/null || skip "gcc not found (apt-get install gcc libc6-dev)"
[ -e /usr/include/infiniband/mlx5dv.h ] || skip "infiniband/mlx5dv.h not found (apt-get install libibverbs-dev)"
version=$(dpkg-query -W -f '${Version}' ibverbs-providers 2>/dev/null) ||
	skip "ibverbs-providers not installed (apt-get install ibverbs-providers)"
case $version in
44.0-*) ;;
*) skip "ibverbs-providers $version: the fake kernel answers as for rdma-core 44 (Debian 12)" ;;
esac

# the vectors (ring sizes, buffer layouts) are those of 4 KiB pages
[ "$(getconf PAGESIZE)" = 4096 ] || skip "page size $(getconf PAGESIZE): the harness is for 4096-byte pages"

gcc -Wall -Werror -O2 -shared -fPIC -o "$out/libfakekernel.so" "$here/fakekernel.c" -ldl
