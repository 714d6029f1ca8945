// Package testvm runs programs, above all Go test binaries, inside a real
// Debian kernel with real rxe (Soft-RoCE) devices, under QEMU with TCG, on a
// host that has neither RDMA hardware nor an RDMA-capable kernel.
//
// # Pieces
//
//   - Kernels (FetchKernel, DebRoot): "6.1" follows linux-image-amd64 and
//     "6.12" linux-image-6.12-amd64; apt-cache resolves them to the exact
//     package (a virtual name goes to its provider, -unsigned preferred),
//     apt-get download fetches it into $GOVERBS_VM_CACHE (default
//     ~/.cache/goverbs-vm) and dpkg-deb unpacks it. The rxe modules and
//     mlx5_ib/mlx5_core are kept decompressed (Kernel.Modules), and the
//     uncompressed vmlinux is taken out of the bzImage so it boots through
//     its PVH entry with qboot, seconds faster under TCG.
//   - Initramfs: newc cpio archives written in Go (CPIOWriter). A cached
//     per-kernel base holds the modules, busybox, iproute2's ip and rdma,
//     rdma-core's ibv_* tools, perftest, their shared libraries and the rxe
//     provider (its driver file alone, so libibverbs warns about nothing).
//     Each run appends a small archive: /init (cmd/vminit), the run spec, the
//     program at its host path with its libraries, the working directory
//     with its testdata, and any -add files.
//   - Guest init (cmd/vminit): mounts, loads ib_core, ib_uverbs, the connection
//     manager (configfs, iw_cm, ib_cm, rdma_cm, rdma_ucm), udp_tunnel,
//     ip6_udp_tunnel, crc32_generic, rdma_rxe and veth with finit_module,
//     creates the veth pair va/vb (10.99.0.1/24, 10.99.0.2/24, fixed MACs),
//     rxe0 on va and rxe1 on vb, waits for both ports to be ACTIVE with GID
//     1 set, runs the program and powers off.
//   - Channel (vmproto): the kernel console is ttyS0, kept in a log file;
//     ttyS1, raw, carries framed stdout, stderr, returned files and the exit
//     status, so output arrives byte for byte and nothing else mixes in.
//   - Runner (Run, and cmd/vmexec around it): usable as go test -exec.
//   - Tests use the small vmenv package (InVM, RequireRXE, ...), which
//     pulls in none of this.
//
// # Guest environment
//
// PATH=GuestPATH (busybox applets last), HOME=/root, TMPDIR=/tmp,
// GOVERBS_VM=<kernel name>, GOVERBS_VM_KERNEL=<uname -r>, every GOVERBS_*
// variable of the caller, and GODEBUG, GOTRACEBACK, GOGC, GOMEMLIMIT and
// GOMAXPROCS. Busybox's sh runs its own applets before PATH, so in sh -c
// scripts call /usr/sbin/ip for iproute2's ip.
//
// rxe0 and rxe1 talk to each other over the veth pair (accept_local lets
// the kernel ARP and route between two local addresses); use GID index 1.
// A device can also talk to itself (server and client both on rxe0).
package testvm
