package vmproto

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// rawFrame is a frame with its payload summarized: cmp walks byte slices
// element by element, too slowly for a megabyte.
type rawFrame struct {
	Kind    byte
	Len     int
	Payload string // payload, or its SHA-256 if longer than 64 bytes
}

func summary(kind byte, p []byte) rawFrame {
	s := string(p)
	if len(p) > 64 {
		sum := sha256.Sum256(p)
		s = hex.EncodeToString(sum[:])
	}
	return rawFrame{kind, len(p), s}
}

func TestFramesRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	fw := NewWriter(&buf)
	big := bytes.Repeat([]byte{0xab}, MaxPayload+10)
	sw := fw.StreamWriter(KindStdout)
	for _, err := range []error{
		fw.WriteFrame(KindHello, []byte(Hello)),
		fw.WriteFrame(KindStderr, []byte("\r\n\x00\xff")),
		fw.WriteFrame(KindLog, nil),
		fw.WriteFrame(KindFile, big),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n, err := sw.Write([]byte("out")); n != 3 || err != nil {
		t.Fatalf("stream write: %d, %v", n, err)
	}
	fr := NewReader(&buf)
	var got []rawFrame
	for {
		k, p, err := fr.ReadFrame()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, summary(k, p))
	}
	want := []rawFrame{
		summary(KindHello, []byte(Hello)),
		summary(KindStderr, []byte("\r\n\x00\xff")),
		summary(KindLog, nil),
		summary(KindFile, big[:MaxPayload]),
		summary(KindFile, big[MaxPayload:]),
		summary(KindStdout, []byte("out")),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("frames (-want +got):\n%s", diff)
	}
}

func TestReadFrameBadInput(t *testing.T) {
	hdr := func(kind byte, n uint32) []byte {
		b := []byte{kind, 0, 0, 0, 0}
		binary.LittleEndian.PutUint32(b[1:], n)
		return b
	}
	tests := []struct {
		name string
		data []byte
		want error
	}{
		{"unknown kind", hdr('?', 0), ErrFrame},
		{"oversized", hdr(KindStdout, MaxPayload+1), ErrFrame},
		{"cut payload", append(hdr(KindStdout, 10), "abc"...), io.ErrUnexpectedEOF},
		{"cut header", []byte{KindStdout, 1}, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := NewReader(bytes.NewReader(tt.data)).ReadFrame()
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestFileChunk(t *testing.T) {
	p, err := EncodeFileChunk("/tmp/cover.out", []byte("mode: set\n"))
	if err != nil {
		t.Fatal(err)
	}
	path, data, err := DecodeFileChunk(p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"/tmp/cover.out", "mode: set\n"}, []string{path, string(data)}); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for name, payload := range map[string][]byte{
		"empty":       nil,
		"zero path":   {0, 0, 'x'},
		"path beyond": {9, 0, 'x'},
	} {
		if _, _, err := DecodeFileChunk(payload); !errors.Is(err, ErrFrame) {
			t.Errorf("%s: got %v, want ErrFrame", name, err)
		}
	}
	if _, err := EncodeFileChunk("", nil); !errors.Is(err, ErrFrame) {
		t.Errorf("empty path: got %v, want ErrFrame", err)
	}
}
