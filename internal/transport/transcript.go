package transport

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
)

// Exchange is one command and the kernel's answer, as recorded on a real
// kernel. Pointers are not recorded; the bytes they point to are.
type Exchange struct {
	Op     string       `json:"op"` // "ioctl" or "write"
	Object uint16       `json:"object,omitempty"`
	Method uint16       `json:"method,omitempty"`
	Driver uint32       `json:"driver,omitempty"`
	Attrs  []AttrRecord `json:"attrs,omitempty"`
	// Write is the framed write() buffer, response pointer zeroed.
	Write string `json:"write,omitempty"`
	// Resp is the response buffer after a write().
	Resp  string `json:"resp,omitempty"`
	Errno int    `json:"errno"`
}

// AttrRecord is one ioctl attribute before and after the call.
type AttrRecord struct {
	ID    uint16 `json:"id"`
	Kind  string `json:"kind"`
	Flags uint16 `json:"flags"`
	Len   uint16 `json:"len"`
	Data  uint64 `json:"data,omitempty"` // inline value, handle or fd sent
	In    string `json:"in,omitempty"`   // bytes a ptr-in attribute pointed to
	// What the kernel wrote back.
	OutFlags uint16 `json:"out_flags"`
	OutData  uint64 `json:"out_data,omitempty"`
	Out      string `json:"out,omitempty"` // bytes of a ptr-out buffer after the call
}

func errnoOf(err error) int {
	var e unix.Errno
	if errors.As(err, &e) {
		return int(e)
	}
	if err != nil {
		return -1
	}
	return 0
}

func recordIoctl(q *Ioctl, driver abi.DriverID) Exchange {
	x := Exchange{Op: "ioctl", Object: q.Object, Method: q.Method, Driver: uint32(driver)}
	for i := 0; i < q.n; i++ {
		a := q.w.attrs[i]
		r := AttrRecord{ID: a.AttrID, Kind: q.kinds[i].String(), Flags: a.Flags, Len: a.Len}
		switch q.kinds[i] {
		case kindPtrIn:
			r.In = hex.EncodeToString(q.bufs[i])
		case kindPtrOut:
		default:
			r.Data = a.Data
		}
		x.Attrs = append(x.Attrs, r)
	}
	return x
}

func framedForRecord(buf, resp []byte) string {
	b := bytes.Clone(buf)
	if len(resp) > 0 && len(b) >= respPtrOffset+8 {
		binary.LittleEndian.PutUint64(b[respPtrOffset:], 0)
	}
	return hex.EncodeToString(b)
}

// Recorder is a Kernel that passes every command to another Kernel and
// keeps a transcript of them.
type Recorder struct {
	Kernel Kernel

	mu        sync.Mutex
	exchanges []Exchange
}

// Ioctl implements Kernel.
func (r *Recorder) Ioctl(fd int, q *Ioctl, driver abi.DriverID) error {
	x := recordIoctl(q, driver)
	err := r.Kernel.Ioctl(fd, q, driver)
	for i := range x.Attrs {
		x.Attrs[i].OutFlags = q.w.attrs[i].Flags
		switch q.kinds[i] {
		case kindPtrOut:
			if err == nil {
				x.Attrs[i].Out = hex.EncodeToString(q.bufs[i])
			}
		case kindIDRNew, kindFDNew:
			x.Attrs[i].OutData = q.w.attrs[i].Data
		}
	}
	x.Errno = errnoOf(err)
	r.mu.Lock()
	r.exchanges = append(r.exchanges, x)
	r.mu.Unlock()
	return err
}

// Write implements Kernel.
func (r *Recorder) Write(fd int, buf, resp []byte) error {
	x := Exchange{Op: "write", Write: framedForRecord(buf, resp)}
	err := r.Kernel.Write(fd, buf, resp)
	if err == nil && len(resp) > 0 {
		x.Resp = hex.EncodeToString(resp)
	}
	x.Errno = errnoOf(err)
	r.mu.Lock()
	r.exchanges = append(r.exchanges, x)
	r.mu.Unlock()
	return err
}

// WriteTo writes the transcript as JSON lines.
func (r *Recorder) WriteTo(w io.Writer) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for _, x := range r.exchanges {
		b, err := json.Marshal(x)
		if err != nil {
			return n, err
		}
		m, err := w.Write(append(b, '\n'))
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// ReadTranscript parses JSON lines written by Recorder.WriteTo.
func ReadTranscript(r io.Reader) ([]Exchange, error) {
	var out []Exchange
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	line := 0
	for sc.Scan() {
		line++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var x Exchange
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			return nil, fmt.Errorf("transcript line %d: %w", line, err)
		}
		out = append(out, x)
	}
	return out, sc.Err()
}

// Replay is a Kernel that answers from a transcript, checking that every
// command is byte for byte the one recorded. New fds the recorded kernel
// returned are replaced by fds of /dev/null owned by the caller's objects,
// so closing them is harmless.
type Replay struct {
	mu        sync.Mutex
	exchanges []Exchange
	next      int
}

// NewReplay replays exchanges in order.
func NewReplay(exchanges []Exchange) *Replay { return &Replay{exchanges: exchanges} }

// Remaining returns how many recorded exchanges have not been replayed.
func (r *Replay) Remaining() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.exchanges) - r.next
}

func (r *Replay) take(op string) (Exchange, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next >= len(r.exchanges) {
		return Exchange{}, fmt.Errorf("replay: unexpected %s after the end of the transcript", op)
	}
	x := r.exchanges[r.next]
	r.next++
	if x.Op != op {
		return Exchange{}, fmt.Errorf("replay: exchange %d: got %s, transcript has %s", r.next, op, x.Op)
	}
	return x, nil
}

func devNull() (uint64, error) {
	fd, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	return uint64(fd), err
}

// Ioctl implements Kernel.
func (r *Replay) Ioctl(fd int, q *Ioctl, driver abi.DriverID) error {
	x, err := r.take("ioctl")
	if err != nil {
		return err
	}
	got := recordIoctl(q, driver)
	if got.Object != x.Object || got.Method != x.Method || got.Driver != x.Driver || len(got.Attrs) != len(x.Attrs) {
		return fmt.Errorf("replay: ioctl %d/%d driver %d with %d attrs, transcript has %d/%d driver %d with %d attrs",
			got.Object, got.Method, got.Driver, len(got.Attrs), x.Object, x.Method, x.Driver, len(x.Attrs))
	}
	for i, a := range got.Attrs {
		w := x.Attrs[i]
		if a.ID != w.ID || a.Kind != w.Kind || a.Flags != w.Flags || a.Len != w.Len || a.Data != w.Data || a.In != w.In {
			return fmt.Errorf("replay: ioctl %d/%d attr %d: sent %+v, transcript has %+v", x.Object, x.Method, i, a, w)
		}
	}
	for i, w := range x.Attrs {
		q.w.attrs[i].Flags = w.OutFlags
		switch q.kinds[i] {
		case kindPtrOut:
			b, err := hex.DecodeString(w.Out)
			if err != nil {
				return fmt.Errorf("replay: attr %d output: %w", i, err)
			}
			copy(q.bufs[i], b)
		case kindIDRNew:
			q.w.attrs[i].Data = w.OutData
		case kindFDNew:
			if x.Errno == 0 {
				nfd, err := devNull()
				if err != nil {
					return err
				}
				q.w.attrs[i].Data = nfd
			}
		}
	}
	if x.Errno != 0 {
		return unix.Errno(x.Errno)
	}
	return nil
}

// Write implements Kernel.
func (r *Replay) Write(fd int, buf, resp []byte) error {
	x, err := r.take("write")
	if err != nil {
		return err
	}
	if got := framedForRecord(buf, resp); got != x.Write {
		return fmt.Errorf("replay: write %s, transcript has %s", got, x.Write)
	}
	if x.Errno != 0 {
		return unix.Errno(x.Errno)
	}
	b, err := hex.DecodeString(x.Resp)
	if err != nil {
		return fmt.Errorf("replay: write response: %w", err)
	}
	copy(resp, b)
	// GET_CONTEXT over write() answers a new async fd in its response.
	if binary.LittleEndian.Uint32(buf) == abi.CmdGetContext && len(resp) >= 4 {
		nfd, err := devNull()
		if err != nil {
			return err
		}
		binary.LittleEndian.PutUint32(resp, uint32(nfd))
	}
	return nil
}
