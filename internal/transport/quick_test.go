package transport

import (
	"testing"

	"github.com/goverbs/goverbs/internal/abi"
)

func TestQuickCommands(t *testing.T) {
	invoke := func(cmd uint32) *Ioctl {
		q := NewIoctl(abi.ObjectDevice, abi.MethodInvokeWrite)
		(&Write{Cmd: cmd}).fillInvokeWrite(q)
		return q
	}
	for _, tc := range []struct {
		name   string
		driver abi.DriverID
		write  uint32 // a write command, or
		ioctl  *Ioctl // an ioctl
		quick  bool
	}{
		{name: "arm a CQ, rxe", driver: abi.DriverRXE, write: abi.CmdReqNotifyCQ, quick: true},
		{name: "arm a CQ, mlx5", driver: abi.DriverMLX5, write: abi.CmdReqNotifyCQ, quick: true},
		{name: "arm a CQ by INVOKE_WRITE, mlx5", driver: abi.DriverMLX5, ioctl: invoke(abi.CmdReqNotifyCQ), quick: true},
		{name: "create QP, rxe", driver: abi.DriverRXE, write: abi.CmdCreateQP, quick: true},
		{name: "extended create QP, siw", driver: abi.DriverSIW, write: abi.CmdFlagExtended | abi.ExCmdCreateQP, quick: true},
		{name: "modify QP by INVOKE_WRITE, rxe", driver: abi.DriverRXE, ioctl: invoke(abi.CmdModifyQP), quick: true},
		{name: "create QP by ioctl, rxe", driver: abi.DriverRXE, ioctl: NewIoctl(abi.ObjectQP, abi.MethodQPCreate), quick: true},
		{name: "create CQ by ioctl, rxe", driver: abi.DriverRXE, ioctl: NewIoctl(abi.ObjectCQ, abi.MethodCQCreate), quick: true},
		// Hardware: the device's firmware answers.
		{name: "create QP, mlx5", driver: abi.DriverMLX5, write: abi.CmdCreateQP},
		{name: "modify QP by INVOKE_WRITE, mlx5", driver: abi.DriverMLX5, ioctl: invoke(abi.CmdModifyQP)},
		{name: "create QP by ioctl, mlx5", driver: abi.DriverMLX5, ioctl: NewIoctl(abi.ObjectQP, abi.MethodQPCreate)},
		// Never quick: pinning pages, waiting for tasks.
		{name: "register MR, rxe", driver: abi.DriverRXE, write: abi.CmdRegMR},
		{name: "register MR by INVOKE_WRITE, rxe", driver: abi.DriverRXE, ioctl: invoke(abi.CmdRegMR)},
		{name: "destroy QP, rxe", driver: abi.DriverRXE, write: abi.CmdDestroyQP},
		{name: "destroy QP by ioctl, rxe", driver: abi.DriverRXE, ioctl: NewIoctl(abi.ObjectQP, abi.MethodQPDestroy)},
		// An INVOKE_WRITE is judged by its command; get_context (0) is not quick.
		{name: "get_context by INVOKE_WRITE, rxe", driver: abi.DriverRXE, ioctl: invoke(abi.CmdGetContext)},
		{name: "a bare INVOKE_WRITE, rxe", driver: abi.DriverRXE, ioctl: NewIoctl(abi.ObjectDevice, abi.MethodInvokeWrite)},
	} {
		var got bool
		if tc.ioctl != nil {
			got = quickIoctl(tc.driver, tc.ioctl)
		} else {
			got = quickWrite(tc.driver, tc.write)
		}
		if got != tc.quick {
			t.Errorf("%s: quick %v, want %v", tc.name, got, tc.quick)
		}
	}
}
