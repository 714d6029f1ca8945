package transport

import (
	"encoding/binary"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
)

// Scribbler is a Kernel that answers every command with bytes taken from
// Data, as a buggy or hostile kernel could: arbitrary errnos, output
// buffers and write() responses full of arbitrary values, VALID_OUTPUT
// flags set or not, any handle. It exists for fuzz tests of the code that
// decodes kernel answers, which must refuse or tolerate nonsense and never
// index out of bounds. New descriptors it hands out are /dev/null, so
// closing them is harmless; when Data runs out it answers with zeros.
type Scribbler struct {
	Data []byte
}

func (s *Scribbler) byte() byte {
	if len(s.Data) == 0 {
		return 0
	}
	b := s.Data[0]
	s.Data = s.Data[1:]
	return b
}

func (s *Scribbler) fill(b []byte) {
	n := copy(b, s.Data)
	s.Data = s.Data[n:]
	clear(b[n:])
}

// errno returns the command's result: success most of the time, else one
// of the errnos verbs commands give.
func (s *Scribbler) errno() error {
	switch b := s.byte(); {
	case b < 200:
		return nil
	default:
		return [...]unix.Errno{unix.EINVAL, unix.ENOMEM, unix.EOPNOTSUPP, unix.ENOSYS, unix.EPROTONOSUPPORT,
			unix.EFAULT, unix.ENODATA, unix.EBUSY}[b%8]
	}
}

// Ioctl implements Kernel.
func (s *Scribbler) Ioctl(fd int, q *Ioctl, driver abi.DriverID) error {
	err := s.errno()
	for i := 0; i < q.n; i++ {
		if s.byte()&1 == 1 {
			q.w.attrs[i].Flags |= abi.AttrFlagValidOutput
		}
		switch q.kinds[i] {
		case kindPtrOut:
			s.fill(q.bufs[i])
		case kindIDRNew:
			var h [4]byte
			s.fill(h[:])
			q.w.attrs[i].Data = uint64(binary.LittleEndian.Uint32(h[:]))
		case kindFDNew:
			if err == nil {
				nfd, ferr := devNull()
				if ferr != nil {
					return ferr
				}
				q.w.attrs[i].Data = nfd
			}
		}
	}
	return err
}

// Write implements Kernel.
func (s *Scribbler) Write(fd int, buf, resp []byte) error {
	if err := s.errno(); err != nil {
		return err
	}
	s.fill(resp)
	// Commands that answer a new descriptor: GET_CONTEXT's async fd and
	// CREATE_COMP_CHANNEL's fd, the first u32 of their responses.
	if len(buf) >= 4 && len(resp) >= 4 {
		switch binary.LittleEndian.Uint32(buf) {
		case abi.CmdGetContext, abi.CmdCreateCompChannel:
			nfd, err := devNull()
			if err != nil {
				return err
			}
			binary.LittleEndian.PutUint32(resp, uint32(nfd))
		}
	}
	return nil
}
