package transport

import (
	"bytes"
	"testing"

	"github.com/goverbs/goverbs/internal/abi"
)

// FuzzReadTranscript: transcripts are files; a corrupt one must give an
// error, never a panic, and a replay of whatever parses must not panic.
// The seeds in testdata/fuzz/FuzzReadTranscript are the records of the
// 6.1 and 6.12 transcripts, one a file (the 32 KB GID table cut to its
// first two entries), and one pair: whole transcripts are 69 KB, and the
// fuzzer minimises every input that finds new coverage in time growing
// with the square of its size, so a whole one spent the run minimising.
func FuzzReadTranscript(f *testing.F) {
	f.Add([]byte(`{"op":"ioctl","object":3,"method":0,"driver":14,"attrs":[{"id":0,"kind":"idr-new","flags":1,"len":0,"out_flags":1,"out_data":5}],"errno":0}` + "\n"))
	f.Add([]byte(`{"op":"write","write":"00000000","resp":"0100","errno":22}`))
	f.Add([]byte(`{"op":"ioctl","attrs":[{"kind":"ptr-out","out":"zz"}]}`))
	f.Add([]byte("\n\n{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		xs, err := ReadTranscript(bytes.NewReader(data))
		if err != nil {
			return
		}
		r := NewReplay(xs)
		c := NewConn(-1, abi.DriverRXE, Auto, r)
		for range xs {
			var out [16]byte
			q := NewIoctl(3, 0)
			q.NewHandle(0)
			q.Out(6, out[:])
			_ = c.Ioctl("fuzz", q)
			_ = c.rawWrite("fuzz", &Write{Cmd: abi.CmdAllocPD, In: make([]byte, 8), CoreIn: 8, Out: make([]byte, 4), CoreOut: 4})
		}
	})
}
