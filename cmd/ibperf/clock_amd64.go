package main

// cycles reads the time-stamp counter, as perftest's get_cycles does: a
// timestamp costs a few nanoseconds and no system call, whatever the
// kernel's clock source (under QEMU TCG clock_gettime may be a system call).
//
//go:noescape
func cycles() uint64
