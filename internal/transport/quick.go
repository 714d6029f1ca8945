package transport

import (
	"github.com/goverbs/goverbs/internal/abi"
)

// Quick commands are made with RawSyscall instead of Syscall.
//
// Syscall tells the Go scheduler that the goroutine may block: the first
// one after the process was idle wakes the runtime's monitor thread
// (sysmon) out of its deep sleep, and a call that lasts longer than
// sysmon's tick (20 µs) has its P handed to another thread, which is woken
// for it, and taken back after. A C program pays neither. Where a command
// is answered in the caller's context without waiting on hardware, a task
// or another process, there is nothing for the scheduler to do meanwhile,
// and RawSyscall keeps the thread's P for the command's length, as the C
// library keeps its thread. On a software device (rxe, siw) QP and CQ
// setup is such work: memory allocation and bookkeeping in the kernel.
// On hardware the same commands wait for the device's firmware and go by
// Syscall. Arming a CQ is quick on every device.
//
// Never quick: memory registration (it pins pages, as long as the region
// is large), destroy commands (they wait for the device's tasks to drain),
// and anything else that can wait. (uverbs reads its event files, which
// answer at once with an event or EAGAIN, by RawSyscall too, and waits for
// them on the netpoller.)

// quickWrite reports whether write command cmd (flags included) is quick on
// driver's devices.
func quickWrite(driver abi.DriverID, cmd uint32) bool {
	c := cmd & abi.CmdCommandMask
	if c == abi.CmdReqNotifyCQ {
		return true
	}
	if !softwareDriver(driver) {
		return false
	}
	switch c {
	case abi.CmdQueryDevice, abi.CmdQueryPort, abi.CmdAllocPD,
		abi.CmdCreateCQ, abi.CmdCreateQP, abi.CmdQueryQP, abi.CmdModifyQP:
		return true
	}
	return false
}

// quickIoctl reports whether q is quick on driver's devices.
func quickIoctl(driver abi.DriverID, q *Ioctl) bool {
	if q.Object == abi.ObjectDevice && q.Method == abi.MethodInvokeWrite {
		return q.invokeWrite && quickWrite(driver, q.writeCmd)
	}
	if !softwareDriver(driver) {
		return false
	}
	switch {
	case q.Object == abi.ObjectCQ && q.Method == abi.MethodCQCreate,
		q.Object == abi.ObjectQP && q.Method == abi.MethodQPCreate,
		q.Object == abi.ObjectDevice && (q.Method == abi.MethodQueryPort ||
			q.Method == abi.MethodQueryContext || q.Method == abi.MethodQueryGIDEntry ||
			q.Method == abi.MethodQueryGIDTable):
		return true
	}
	return false
}

// softwareDriver reports whether driver's verbs are answered by kernel
// code alone, with no device firmware behind them.
func softwareDriver(driver abi.DriverID) bool {
	return driver == abi.DriverRXE || driver == abi.DriverSIW
}
