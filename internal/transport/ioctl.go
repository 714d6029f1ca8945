package transport

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/goverbs/goverbs/internal/abi"
)

// MaxAttrs bounds the attributes of one ioctl. The largest core method
// (QP create) uses 16 plus the two udata attributes.
const MaxAttrs = 20

const (
	hdrSize  = int(unsafe.Sizeof(abi.IoctlHdr{}))
	attrSize = int(unsafe.Sizeof(abi.Attr{}))
)

// attrKind says how an attribute's data is interpreted; the wire format does
// not say, but tracing, recording and replay need to know.
type attrKind uint8

const (
	kindInline attrKind = iota // value in data (PTR_IN <= 8 bytes, CONST_IN, FLAGS_IN)
	kindPtrIn                  // data points to bytes the kernel reads
	kindPtrOut                 // data points to bytes the kernel writes
	kindIDR                    // existing object handle
	kindIDRNew                 // new object: the kernel writes the handle into data
	kindFD                     // existing fd
	kindFDNew                  // new fd: the kernel writes it into data
)

func (k attrKind) String() string {
	return [...]string{"in", "ptr-in", "ptr-out", "idr", "idr-new", "fd", "fd-new"}[k]
}

// Ioctl is one RDMA_VERBS_IOCTL request: header, attributes and the buffers
// they point to. The kernel writes new handles, fds and VALID_OUTPUT flags
// back into the attribute array, so the array lives in the Ioctl itself and
// the Ioctl must not be copied while a call is in flight.
type Ioctl struct {
	Object, Method uint16

	n     int
	w     wire
	kinds [MaxAttrs]attrKind
	bufs  [MaxAttrs][]byte
	err   error

	// invokeWrite says the request carries write command writeCmd
	// (Write.fillInvokeWrite), for quickIoctl.
	invokeWrite bool
	writeCmd    uint32
}

// wire is the contiguous header and attribute array handed to the kernel.
type wire struct {
	hdr   abi.IoctlHdr
	attrs [MaxAttrs]abi.Attr
}

// NewIoctl starts a request for a method of an object. Requests are
// reused: once the caller has read what it needs of the answer (Data,
// Valid, its output buffers), Free hands q back, and q must not be used
// after that. A request never freed is only garbage.
func NewIoctl(object, method uint16) *Ioctl {
	q := ioctlPool.Get().(*Ioctl)
	q.Object, q.Method = object, method
	return q
}

// ioctlPool holds freed requests, every field but the used attributes'
// (which add overwrites) reset. A request is about 900 bytes with pointers:
// allocating one per command was most of the Go heap's share of creating,
// moving and destroying a QP.
var ioctlPool = sync.Pool{New: func() any { return new(Ioctl) }}

// Free hands q back for reuse. It drops q's references to the caller's
// buffers, so that a pooled request keeps nothing reachable.
func (q *Ioctl) Free() {
	if q == nil {
		return
	}
	clear(q.bufs[:q.n])
	q.n, q.err, q.invokeWrite, q.writeCmd = 0, nil, false, 0
	ioctlPool.Put(q)
}

func (q *Ioctl) add(id uint16, length int, kind attrKind, data uint64, buf []byte) int {
	if q.n == MaxAttrs {
		if q.err == nil {
			q.err = fmt.Errorf("uverbs ioctl %d/%d: more than %d attributes", q.Object, q.Method, MaxAttrs)
		}
		return q.n - 1
	}
	if length > 0xffff {
		if q.err == nil {
			q.err = fmt.Errorf("uverbs ioctl %d/%d: attribute %#x is %d bytes, the ABI allows 65535", q.Object, q.Method, id, length)
		}
		length = 0
	}
	i := q.n
	q.n++
	q.w.attrs[i] = abi.Attr{AttrID: id, Len: uint16(length), Flags: abi.AttrFlagMandatory, Data: data}
	q.kinds[i] = kind
	q.bufs[i] = buf
	return i
}

// Const adds a CONST_IN or FLAGS_IN attribute: always 8 bytes inline.
func (q *Ioctl) Const(id uint16, v uint64) int { return q.add(id, 8, kindInline, v, nil) }

// U32 adds a 4-byte PTR_IN attribute (inline).
func (q *Ioctl) U32(id uint16, v uint32) int { return q.add(id, 4, kindInline, uint64(v), nil) }

// U64 adds an 8-byte PTR_IN attribute (inline).
func (q *Ioctl) U64(id uint16, v uint64) int { return q.add(id, 8, kindInline, v, nil) }

// In adds a PTR_IN attribute. Up to 8 bytes travel inline, as the kernel
// expects; longer buffers are passed by pointer and must stay untouched until
// the call returns.
func (q *Ioctl) In(id uint16, b []byte) int {
	if len(b) <= 8 {
		var v [8]byte
		copy(v[:], b)
		return q.add(id, len(b), kindInline, *(*uint64)(unsafe.Pointer(&v)), nil)
	}
	return q.add(id, len(b), kindPtrIn, 0, b)
}

// Out adds a PTR_OUT attribute; the kernel fills b.
func (q *Ioctl) Out(id uint16, b []byte) int { return q.add(id, len(b), kindPtrOut, 0, b) }

// Handle adds an IDR attribute naming an existing object.
func (q *Ioctl) Handle(id uint16, handle uint32) int {
	return q.add(id, 0, kindIDR, uint64(handle), nil)
}

// NewHandle adds an IDR attribute for the object the method creates; read the
// handle with Data after the call.
func (q *Ioctl) NewHandle(id uint16) int { return q.add(id, 0, kindIDRNew, 0, nil) }

// FD adds an FD attribute naming an open file.
func (q *Ioctl) FD(id uint16, fd int32) int {
	return q.add(id, 0, kindFD, uint64(int64(fd)), nil)
}

// NewFD adds an FD attribute for a file the method creates.
func (q *Ioctl) NewFD(id uint16) int { return q.add(id, 0, kindFDNew, 0, nil) }

// Optional clears the mandatory flag of attribute i, so kernels that do not
// know it ignore it instead of failing with EPROTONOSUPPORT.
func (q *Ioctl) Optional(i int) {
	if i >= 0 && i < q.n {
		q.w.attrs[i].Flags &^= abi.AttrFlagMandatory
	}
}

// Data returns the data word of attribute i after the call: the new handle of
// a NewHandle attribute, the new fd of a NewFD attribute.
func (q *Ioctl) Data(i int) uint64 { return q.w.attrs[i].Data }

// Valid reports whether the kernel wrote the output attribute i.
func (q *Ioctl) Valid(i int) bool { return q.w.attrs[i].Flags&abi.AttrFlagValidOutput != 0 }

// NumAttrs returns the number of attributes added so far.
func (q *Ioctl) NumAttrs() int { return q.n }

// Err returns the first encoding error, if any.
func (q *Ioctl) Err() error { return q.err }

// header returns the wire header for driver.
func (q *Ioctl) header(driver abi.DriverID) abi.IoctlHdr {
	return abi.IoctlHdr{
		Length:   uint16(hdrSize + attrSize*q.n),
		ObjectID: q.Object,
		MethodID: q.Method,
		NumAttrs: uint16(q.n),
		DriverID: uint32(driver),
	}
}
