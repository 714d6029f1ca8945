package mlx5

// fromDeviceBarrier is rdma-core's udma_from_device_barrier on arm64
// (DSB LD): the rest of a CQE is read only after its owner bit said the
// HCA is done with it.
//
//go:noescape
func fromDeviceBarrier()
