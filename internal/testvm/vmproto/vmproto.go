// Package vmproto is the contract between the host harness (internal/testvm)
// and the guest init (internal/testvm/cmd/vminit): the run specification the
// host packs into the initramfs, and the framing of the one serial channel
// the guest uses to send back the program's stdout, stderr, files and exit
// status.
//
// One framed channel instead of a port per stream keeps stdout and stderr
// byte-exact (a raw tty passes any byte, the frame says whose it is) and
// needs only COM2, which has an IRQ of its own.
package vmproto

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Fixed guest paths.
const (
	// SpecPath is where the host puts the JSON-encoded Spec in the initramfs.
	SpecPath = "/etc/goverbs/run.json"
	// ChannelDevice is the serial port that carries the frames (COM2; the
	// kernel console is on ttyS0).
	ChannelDevice = "/dev/ttyS1"
	// Hello is the payload of the first frame, so the host knows the
	// channel is in sync and which protocol the guest speaks.
	Hello = "goverbs-vm/1"
)

// Spec tells the guest init what to set up and run.
type Spec struct {
	KernelName string   // harness name of the kernel, e.g. "6.12"
	Modules    []string // guest paths of the .ko files, in load order
	Path       string   // program to run: absolute guest path, or a name looked up in PATH
	Args       []string // argv, argv[0] included
	Env        []string // complete environment of the program, KEY=VALUE
	Dir        string   // working directory of the program
	MakeDirs   []string // directories to create before the run (outputs the host wants back)
	Return     []string // guest files or directories to send back after the run
	// SetupTimeoutMillis bounds the wait for the rxe ports to become usable.
	SetupTimeoutMillis int
	// DrainMillis bounds how long the init keeps reading the program's
	// stdout/stderr after it exited (children it left behind may hold them).
	DrainMillis int
}

// Frame kinds.
const (
	KindHello  byte = 'H' // payload: Hello
	KindReady  byte = 'R' // setup done, the program starts; payload: uname -r
	KindStdout byte = 'O' // program stdout bytes
	KindStderr byte = 'E' // program stderr bytes
	KindLog    byte = 'L' // a line from the init itself
	KindFile   byte = 'F' // payload: EncodeFileChunk
	KindExit   byte = 'X' // payload: JSON Exit; the last frame
)

// Exit is the final report of a run.
type Exit struct {
	Code       int    // exit status of the program (128+signal if it was killed)
	Signal     string `json:",omitempty"` // name of the signal that killed it
	SetupError string `json:",omitempty"` // set when the VM could not be prepared; Code is then meaningless
	RunError   string `json:",omitempty"` // set when the program could not be started
}

// MaxPayload bounds one frame so a corrupted length cannot make the host
// allocate without limit.
const MaxPayload = 1 << 20

const headerLen = 5 // kind, then the payload length as little-endian uint32

// ErrFrame reports a malformed frame on the channel.
var ErrFrame = errors.New("malformed frame")

// Writer writes frames; it is safe for concurrent use.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	hdr [headerLen]byte
}

// NewWriter returns a Writer that writes frames to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// WriteFrame writes one frame, splitting payloads larger than MaxPayload
// into several frames of the same kind.
func (fw *Writer) WriteFrame(kind byte, payload []byte) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	for {
		chunk := payload
		if len(chunk) > MaxPayload {
			chunk = chunk[:MaxPayload]
		}
		fw.hdr[0] = kind
		binary.LittleEndian.PutUint32(fw.hdr[1:], uint32(len(chunk)))
		if _, err := fw.w.Write(fw.hdr[:]); err != nil {
			return fmt.Errorf("write frame header: %w", err)
		}
		if _, err := fw.w.Write(chunk); err != nil {
			return fmt.Errorf("write frame payload: %w", err)
		}
		payload = payload[len(chunk):]
		if len(payload) == 0 {
			return nil
		}
	}
}

// StreamWriter returns an io.Writer whose writes become frames of kind.
func (fw *Writer) StreamWriter(kind byte) io.Writer { return streamWriter{fw, kind} }

type streamWriter struct {
	fw   *Writer
	kind byte
}

func (s streamWriter) Write(p []byte) (int, error) {
	if err := s.fw.WriteFrame(s.kind, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Reader reads frames.
type Reader struct {
	r   *bufio.Reader
	hdr [headerLen]byte
}

// NewReader returns a Reader of frames from r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReaderSize(r, 64<<10)} }

// ReadFrame returns the next frame. The payload is a fresh slice. At a clean
// end of the stream it returns io.EOF; a stream cut inside a frame gives
// io.ErrUnexpectedEOF.
func (fr *Reader) ReadFrame() (kind byte, payload []byte, err error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return 0, nil, err
	}
	kind = fr.hdr[0]
	n := binary.LittleEndian.Uint32(fr.hdr[1:])
	if !validKind(kind) {
		return 0, nil, fmt.Errorf("%w: unknown kind %#x", ErrFrame, kind)
	}
	if n > MaxPayload {
		return 0, nil, fmt.Errorf("%w: kind %q payload of %d bytes exceeds %d", ErrFrame, kind, n, MaxPayload)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(fr.r, payload); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return kind, payload, nil
}

func validKind(k byte) bool {
	switch k {
	case KindHello, KindReady, KindStdout, KindStderr, KindLog, KindFile, KindExit:
		return true
	}
	return false
}

// File chunks: a returned file travels as one or more KindFile frames. The
// first chunk of a path creates (truncates) the file, later ones append.

// EncodeFileChunk builds a KindFile payload: the path length as
// little-endian uint16, the path, then the data.
func EncodeFileChunk(path string, data []byte) ([]byte, error) {
	if len(path) == 0 || len(path) > 0xffff {
		return nil, fmt.Errorf("%w: file path of %d bytes", ErrFrame, len(path))
	}
	b := make([]byte, 2+len(path)+len(data))
	binary.LittleEndian.PutUint16(b, uint16(len(path)))
	copy(b[2:], path)
	copy(b[2+len(path):], data)
	return b, nil
}

// DecodeFileChunk splits a KindFile payload into path and data.
func DecodeFileChunk(payload []byte) (path string, data []byte, err error) {
	if len(payload) < 2 {
		return "", nil, fmt.Errorf("%w: file chunk of %d bytes", ErrFrame, len(payload))
	}
	n := int(binary.LittleEndian.Uint16(payload))
	if n == 0 || 2+n > len(payload) {
		return "", nil, fmt.Errorf("%w: file chunk path length %d in %d bytes", ErrFrame, n, len(payload))
	}
	return string(payload[2 : 2+n]), payload[2+n:], nil
}

// FileChunkSize is the data size the guest puts in one KindFile frame.
const FileChunkSize = 256 << 10
