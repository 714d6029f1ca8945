package uverbs

import (
	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/transport"
)

// writeDriver sends a write command whose core request and response are
// followed by the provider's driver data, as the kernel lays them out:
// core then driver request in one buffer, core then driver response in
// another. resp and drvOut receive the two parts of the answer.
func (c *Context) writeDriver(verb string, cmd uint32, req, drvIn, resp, drvOut []byte) error {
	w := &transport.Write{
		Cmd: cmd, In: concat(req, drvIn), CoreIn: len(req),
		Out: make([]byte, len(resp)+len(drvOut)), CoreOut: len(resp),
	}
	if err := c.conn.Write(verb, w); err != nil {
		return err
	}
	copy(resp, w.Out)
	copy(drvOut, w.Out[w.CoreOut:])
	return nil
}

// destroyHandle destroys an object whose destroy answers nothing (PD, MR,
// MW, AH): ioctl DESTROY with its handle, or the write command that takes
// only the handle where the kernel lacks the method.
func (c *Context) destroyHandle(verb string, op transport.Op, object, method, attr uint16, cmd uint32, handle uint32) error {
	q := transport.NewIoctl(object, method)
	defer q.Free()
	q.Handle(attr, handle)
	return c.conn.IoctlOrWrite(verb, op, q, func() error {
		req := handle // struct ib_uverbs_{dealloc_pd,dereg_mr,dealloc_mw,destroy_ah}: one u32
		return c.conn.Write(verb, &transport.Write{Cmd: cmd, In: asBytes(&req), CoreIn: len(asBytes(&req))})
	})
}

func destroyPD(c *Context, handle uint32) error {
	return c.destroyHandle("dealloc_pd", transport.OpDestroyPD, abi.ObjectPD, abi.MethodPDDestroy, abi.AttrDestroyPDHandle, abi.CmdDeallocPD, handle)
}

func destroyMR(c *Context, handle uint32) error {
	return c.destroyHandle("dereg_mr", transport.OpDestroyMR, abi.ObjectMR, abi.MethodMRDestroy, abi.AttrDestroyMRHandle, abi.CmdDeregMR, handle)
}

func destroyMW(c *Context, handle uint32) error {
	return c.destroyHandle("dealloc_mw", transport.OpDestroyMW, abi.ObjectMW, abi.MethodMWDestroy, abi.AttrDestroyMWHandle, abi.CmdDeallocMW, handle)
}

func destroyAH(c *Context, handle uint32) error {
	return c.destroyHandle("destroy_ah", transport.OpDestroyAH, abi.ObjectAH, abi.MethodAHDestroy, abi.AttrDestroyAHHandle, abi.CmdDestroyAH, handle)
}
