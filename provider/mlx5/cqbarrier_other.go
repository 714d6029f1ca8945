//go:build !arm64

package mlx5

// fromDeviceBarrier orders the reads of a CQE after the read of its owner
// bit. On amd64 loads are not reordered with older loads, also for memory
// a device writes coherently, so the compiler barrier the ordered load of
// the owner word already is suffices: the Linux kernel's dma_rmb() is
// barrier() there. rdma-core issues an LFENCE, which costs 10 to 15 ns per
// CQE on the machines this was measured on and orders nothing more.
// Elsewhere (no assembly, untested with mlx5 hardware) the sequentially
// consistent atomic load is the only barrier.
func fromDeviceBarrier() {}
