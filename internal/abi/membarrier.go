package abi

// The membarrier system call's commands (<linux/membarrier.h>, enum
// membarrier_cmd; since Linux 4.14 for the private expedited pair). A
// process registers for the private expedited command once; the command
// then makes every thread of the process that is running execute a full
// memory barrier before the call returns, by IPI, in microseconds. The
// global command does the same for every thread in the system, by
// waiting for an RCU grace period: no registration, but milliseconds.
// unix.SYS_MEMBARRIER is the system call's number.
const (
	MembarrierCmdGlobal                   = 1 << 0 // MEMBARRIER_CMD_GLOBAL
	MembarrierCmdPrivateExpedited         = 1 << 3 // MEMBARRIER_CMD_PRIVATE_EXPEDITED
	MembarrierCmdRegisterPrivateExpedited = 1 << 4 // MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED
)
