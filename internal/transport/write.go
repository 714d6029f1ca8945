package transport

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/goverbs/goverbs/internal/abi"
)

// Write is one legacy write() command: the core request and the driver's
// request follow each other in In, the core response and the driver's
// response in Out, exactly as the kernel lays them out.
type Write struct {
	// Cmd is the command number, OR'ed with abi.CmdFlagExtended for the
	// extended commands.
	Cmd uint32
	// In is the core request followed by the driver request. For
	// non-extended commands that answer, the core request begins with the
	// u64 response pointer, which the transport fills in.
	In     []byte
	CoreIn int
	// Out receives the core response followed by the driver response.
	Out     []byte
	CoreOut int
}

func (w *Write) extended() bool { return w.Cmd&abi.CmdFlagExtended != 0 }

const (
	cmdHdrSize   = int(unsafe.Sizeof(abi.CmdHdr{}))
	exCmdHdrSize = int(unsafe.Sizeof(abi.ExCmdHdr{}))
)

// respPtrOffset is where the response pointer sits in a framed command: the
// first u64 of the core request, or ex_hdr.response; both at byte 8.
const respPtrOffset = 8

// frame builds the bytes write() sends. The response pointer is left zero;
// the caller patches it in (System) or ignores it (transcripts).
func (w *Write) frame() ([]byte, error) { return w.frameInto(nil) }

// frameInto is frame building in dst's room when it is large enough.
func (w *Write) frameInto(dst []byte) ([]byte, error) {
	if w.CoreIn > len(w.In) || w.CoreOut > len(w.Out) {
		return nil, fmt.Errorf("uverbs write command %#x: core sizes exceed the buffers", w.Cmd)
	}
	if !w.extended() {
		total := cmdHdrSize + len(w.In)
		if total%4 != 0 || len(w.Out)%4 != 0 || total/4 > 0xffff || len(w.Out)/4 > 0xffff {
			return nil, fmt.Errorf("uverbs write command %d: sizes %d/%d are not whole 4-byte words within the ABI's limits", w.Cmd, total, len(w.Out))
		}
		if len(w.Out) > 0 && w.CoreIn < 8 {
			return nil, fmt.Errorf("uverbs write command %d: a command with a response needs the 8-byte response field", w.Cmd)
		}
		buf := sized(dst, total)
		binary.LittleEndian.PutUint32(buf[0:], w.Cmd)
		binary.LittleEndian.PutUint16(buf[4:], uint16(total/4))
		binary.LittleEndian.PutUint16(buf[6:], uint16(len(w.Out)/4))
		copy(buf[cmdHdrSize:], w.In)
		if len(w.Out) > 0 {
			binary.LittleEndian.PutUint64(buf[respPtrOffset:], 0)
		}
		return buf, nil
	}
	driverIn, driverOut := len(w.In)-w.CoreIn, len(w.Out)-w.CoreOut
	for _, n := range []int{w.CoreIn, w.CoreOut, driverIn, driverOut} {
		if n%8 != 0 || n/8 > 0xffff {
			return nil, fmt.Errorf("uverbs extended command %d: size %d is not whole 8-byte words within the ABI's limits", w.Cmd&abi.CmdCommandMask, n)
		}
	}
	buf := sized(dst, cmdHdrSize+exCmdHdrSize+len(w.In))
	clear(buf[cmdHdrSize:])
	binary.LittleEndian.PutUint32(buf[0:], w.Cmd)
	binary.LittleEndian.PutUint16(buf[4:], uint16(w.CoreIn/8))
	binary.LittleEndian.PutUint16(buf[6:], uint16(w.CoreOut/8))
	// ex_hdr: response @8 (patched), provider words @16/@18, reserved @20.
	binary.LittleEndian.PutUint16(buf[16:], uint16(driverIn/8))
	binary.LittleEndian.PutUint16(buf[18:], uint16(driverOut/8))
	copy(buf[cmdHdrSize+exCmdHdrSize:], w.In)
	return buf, nil
}

// sized returns n bytes of dst's room, or new ones when it has too little.
func sized(dst []byte, n int) []byte {
	if cap(dst) < n {
		return make([]byte, n)
	}
	return dst[:n]
}

// hasResponse reports whether the framed command carries a response pointer.
func (w *Write) hasResponse() bool { return len(w.Out) > 0 }

// fillInvokeWrite adds w's attributes to q, a fresh INVOKE_WRITE: the
// equivalent ioctl of the command.
func (w *Write) fillInvokeWrite(q *Ioctl) {
	q.Const(abi.AttrWriteCmd, uint64(w.Cmd))
	q.invokeWrite, q.writeCmd = true, w.Cmd
	if w.CoreIn > 0 {
		q.In(abi.AttrCoreIn, w.In[:w.CoreIn])
	}
	if w.CoreOut > 0 {
		q.Out(abi.AttrCoreOut, w.Out[:w.CoreOut])
	}
	if len(w.In) > w.CoreIn {
		q.In(abi.AttrUHWIn, w.In[w.CoreIn:])
	}
	if len(w.Out) > w.CoreOut {
		q.Out(abi.AttrUHWOut, w.Out[w.CoreOut:])
	}
}
