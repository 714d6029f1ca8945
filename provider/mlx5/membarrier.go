package mlx5

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
)

// soloBarrierReady registers the process for private expedited
// membarriers, once; it returns why solo locks cannot be had when the
// kernel refuses (no membarrier before 4.14, or a seccomp filter).
var soloBarrierReady = sync.OnceValue(func() error {
	if _, _, e := unix.Syscall(unix.SYS_MEMBARRIER, abi.MembarrierCmdRegisterPrivateExpedited, 0, 0); e != 0 {
		return fmt.Errorf("mlx5: membarrier register private expedited: %w", e)
	}
	return nil
})

// soloBarrier makes every running thread of the process execute a full
// memory barrier before it returns: the store-to-load barrier a solo
// lock's data path leaves out (see spinLock). Only locks made solo after
// soloBarrierReady succeeded call it. Should the private expedited command
// fail all the same, the global one gives the same guarantee, slower;
// should both fail, nothing can stand in for them, and proceeding could
// free a queue under its poller, so it panics.
func soloBarrier() {
	_, _, e := unix.Syscall(unix.SYS_MEMBARRIER, abi.MembarrierCmdPrivateExpedited, 0, 0)
	if e == 0 {
		return
	}
	if _, _, e2 := unix.Syscall(unix.SYS_MEMBARRIER, abi.MembarrierCmdGlobal, 0, 0); e2 != 0 {
		panic(fmt.Sprintf("mlx5: membarrier failed after registration (private expedited: %v, global: %v)", e, e2))
	}
}
