#!/bin/sh
# Regenerate the trimmed module BTF under this directory from Debian 12's
# kernel packages: 6.1 (linux-image-amd64) and 6.12 (linux-image-6.12-amd64).
#
# Needs a Debian 12 (bookworm) apt with bookworm-security, dpkg-deb, tar, xz
# and Go. Re-runnable: packages already in the deb cache are reused.
#
#   internal/abi/testdata/btf/update.sh            # both kernels
#   internal/abi/testdata/btf/update.sh 6.12       # one kernel
#
# The deb cache is shared with the VM harness:
# ${GOVERBS_VM_CACHE:-$HOME/.cache/goverbs-vm}/debs.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here" && git rev-parse --show-toplevel)
debs=${GOVERBS_VM_CACHE:-$HOME/.cache/goverbs-vm}/debs
modules=ib_uverbs,ib_core,rdma_rxe,mlx5_ib,rdma_ucm,rdma_cm

# metapackage for each kernel line; the exact image package is resolved from
# it, never globbed (a glob matches every version in the archive).
meta_for() {
	case $1 in
	6.1) echo linux-image-amd64 ;;
	6.12) echo linux-image-6.12-amd64 ;;
	*) echo "unknown kernel line $1 (want 6.1 or 6.12)" >&2; exit 2 ;;
	esac
}

# resolve_image META prints the exact linux-image package META depends on.
resolve_image() {
	pkg=$(apt-cache depends "$1" | sed -n 's/^ *Depends: \(linux-image-[^ ]*\)$/\1/p' | head -n 1)
	[ -n "$pkg" ] || { echo "cannot resolve $1 with apt-cache depends" >&2; exit 1; }
	# The name may be virtual, provided by the -unsigned package.
	if [ -z "$(apt-cache show --no-all-versions "$pkg" 2>/dev/null | sed -n 's/^Version: //p')" ]; then
		pkg=$pkg-unsigned
	fi
	echo "$pkg"
}

candidate_version() {
	apt-cache show --no-all-versions "$1" | sed -n 's/^Version: //p' | head -n 1
}

# fetch PKG VERSION prints the path of the cached .deb, downloading it if
# needed. The signed and -unsigned builds of one version carry the same
# modules, so either one in the cache will do.
fetch() {
	pkg=$1 version=$2
	escaped=$(echo "$version" | sed 's/:/%3a/g')
	other=${pkg%-unsigned}
	[ "$other" = "$pkg" ] && other=$pkg-unsigned
	for p in "$pkg" "$other"; do
		f=$debs/${p}_${escaped}_amd64.deb
		if [ -s "$f" ] && dpkg-deb --info "$f" >/dev/null 2>&1; then
			echo "$f"
			return
		fi
	done
	mkdir -p "$debs"
	# Download beside the cache and move in when complete, so that a
	# concurrent reader never sees half a file.
	tmp=$(mktemp -d "$debs/.download.XXXXXX")
	chmod 755 "$tmp"
	(cd "$tmp" && apt-get download "$pkg=$version" >&2)
	mv -n "$tmp"/*.deb "$debs"/
	rm -rf "$tmp"
	echo "$debs/${pkg}_${escaped}_amd64.deb"
}

readme_lines=
extract() {
	kver=$1
	meta=$(meta_for "$kver")
	pkg=$(resolve_image "$meta")
	version=$(candidate_version "$pkg")
	deb=$(fetch "$pkg" "$version")
	echo "$kver: $meta -> $pkg $version ($deb)" >&2

	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	# Unpack only the kernel and the four modules: the whole package is
	# several hundred MB of modules. (Same content as dpkg-deb -x.)
	dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$work" --wildcards \
		'./boot/vmlinuz-*' \
		'*/ib_uverbs.ko*' '*/ib_core.ko*' '*/rdma_rxe.ko*' '*/mlx5_ib.ko*' '*/rdma_ucm.ko*' '*/rdma_cm.ko*'
	vmlinuz=$(ls "$work"/boot/vmlinuz-*)
	release=${vmlinuz##*/vmlinuz-}

	(cd "$repo" && go run ./internal/abi/cmd/btfextract \
		-vmlinuz "$vmlinuz" -moddir "$work/lib/modules/$release" \
		-modules "$modules" -out "$here/$kver")
	rm -rf "$work"
	trap - EXIT

	sha=$(sha256sum "$deb" | cut -d' ' -f1)
	readme_lines="$readme_lines| $kver | \`$meta\` | \`$pkg\` | \`$version\` | \`$release\` | \`$sha\` |
"
}

if [ $# -eq 0 ]; then set -- 6.1 6.12; fi
for kver in "$@"; do
	extract "$kver"
done

# Record what was extracted in README.md; a partial run keeps the other
# kernel's row.
readme=$here/README.md
rows=
for kver in 6.1 6.12; do
	row=$(printf '%s' "$readme_lines" | grep "^| $kver |" || true)
	if [ -z "$row" ] && [ -f "$readme" ]; then
		row=$(grep "^| $kver |" "$readme" || true)
	fi
	[ -n "$row" ] && rows="$rows$row
"
done
cat > "$readme.tmp" <<EOF_README
# Trimmed kernel BTF for the abi layout tests

Each \`<kernel>/<module>.btf\` is a small standalone BTF blob (little endian)
holding the UAPI types of one Debian 12 kernel module: every struct, union and
enum named \`ib_uverbs_*\`, \`rxe_*\`, \`mminfo\`, \`mlx5_ib_*\`, \`mlx5_wqe_*\`,
\`mlx5_cqe*\`, \`mlx5_err_cqe*\`, \`rdma_*\` or listed in \`abi.Layouts\`, found among
the module's own types, plus what they reference. It is cut from the module's
\`.BTF\` section, split BTF on the base BTF of the package's vmlinux. To keep
it small, pointers become \`void *\`, qualifiers are dropped, and a
kernel-internal struct or union (named, not selected, holding pointers) keeps
only its name and size; every size and offset of the selected types is
unchanged, which btfextract verifies before writing.

Extracted from these packages (\`apt-cache depends <metapackage>\` resolved the
exact package; release is the kernel's \`uname -r\`):

| kernel | metapackage | package | version | release | sha256 of the .deb |
|---|---|---|---|---|---|
$rows
## Regenerate

    internal/abi/testdata/btf/update.sh          # both kernels
    internal/abi/testdata/btf/update.sh 6.12     # one of them

on a Debian 12 machine with bookworm-security in its apt sources, dpkg-deb,
xz and Go. The script resolves the package, downloads it with
\`apt-get download\` into \`\${GOVERBS_VM_CACHE:-\$HOME/.cache/goverbs-vm}/debs\`
(reusing a .deb already there, signed or \`-unsigned\`), unpacks vmlinuz and
the modules ib_uverbs, ib_core, rdma_rxe, mlx5_ib, rdma_ucm and rdma_cm, and runs
\`go run ./internal/abi/cmd/btfextract\`, which finds vmlinux in the bzImage
payload (boot protocol header), reads the \`.BTF\` sections and writes the blobs.
Then run \`go test ./internal/abi/\`: a new kernel may have grown a struct.
EOF_README
mv "$readme.tmp" "$readme"
echo "wrote $readme" >&2
