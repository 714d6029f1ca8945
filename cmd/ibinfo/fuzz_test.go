package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/uverbs"
)

// byteSource hands out fuzz input as numbers, zeros once exhausted.
type byteSource struct{ b []byte }

func (s *byteSource) u64() uint64 {
	var buf [8]byte
	n := copy(buf[:], s.b)
	s.b = s.b[n:]
	return binary.LittleEndian.Uint64(buf[:])
}

func (s *byteSource) u8() uint8 { return uint8(s.u64() >> 56) }

// fuzzSystem builds one or two devices from the input: every attribute,
// ports, GID tables (with failures) and sysfs odds.
func fuzzSystem(data []byte) *fakeSystem {
	src := &byteSource{b: data}
	sys := &fakeSystem{listFail: src.u8()%32 == 0}
	ndev := 1 + int(src.u8()%2)
	for k := 0; k < ndev; k++ {
		d := &fakeDev{
			h:     hca{name: fmt.Sprintf("dev%d", k), nodeType: int(int8(src.u8())), info: hcaInfo{ABIVersion: -1}},
			ports: map[uint8]*fakePort{},
			gids:  map[[2]int]fakeGID{},
		}
		flags := src.u8()
		d.openFail, d.queryFail, d.closeFail = flags&1 != 0, flags&2 != 0, flags&4 != 0
		if flags&8 != 0 {
			d.h.boardID = bytes.Repeat([]byte{src.u8()}, int(src.u8())+int(src.u8()))
		}
		d.ncv = int(int32(src.u64()))
		n := int(src.u8() % 80)
		fw := make([]byte, n)
		for i := range fw {
			fw[i] = src.u8()
		}
		d.attr.FWVer = string(fw)
		for _, f := range deviceAttrFields(&d.attr) {
			f.set(src.u64())
		}
		d.attr.PhysPortCnt %= 4
		for p := 1; p <= int(d.attr.PhysPortCnt); p++ {
			fp := &fakePort{}
			for _, f := range portAttrFields(&fp.attr) {
				f.set(src.u64())
			}
			fp.attr.GIDTblLen %= 48
			if src.u8()%16 == 0 {
				fp.fail = unix.EIO
			}
			d.ports[uint8(p)] = fp
			for i := 0; i < int(fp.attr.GIDTblLen); i++ {
				var g uverbs.GID
				binary.LittleEndian.PutUint64(g[:8], src.u64())
				binary.LittleEndian.PutUint64(g[8:], src.u64())
				e := uverbs.GIDEntry{GID: g, Index: i, Port: uint8(p), Type: uverbs.GIDType(src.u8() % 4), NetdevIfindex: uint32(src.u8() % 3)}
				switch src.u8() % 8 {
				case 0:
					// empty slot
				case 1:
					d.gids[[2]int{p, i}] = fakeGID{err: fmt.Errorf("query_gid: %w", unix.EIO)}
				case 2:
					d.gids[[2]int{p, i}] = fakeGID{entry: e, err: fmt.Errorf("%w", errGIDType)}
				default:
					d.gids[[2]int{p, i}] = fakeGID{entry: e}
				}
			}
		}
		sys.devs = append(sys.devs, d)
	}
	return sys
}

// FuzzRun feeds odd device data and command lines to ibinfo, in the
// ibv_devinfo and the JSON form: it must never panic, and the exit status
// must be a byte. The seeds stay near the recorded ones' 352 bytes
// (testdata/fuzz/FuzzRun): an execution takes 60 to 300 us, and the fuzzer
// minimises every input that finds new coverage in time growing with the
// square of its size, so 2 KB seeds left a one-worker run minimising for
// its whole time (419 executions in 80 s).
func FuzzRun(f *testing.F) {
	f.Add([]byte{}, "-v")
	f.Add(bytes.Repeat([]byte{0xff}, 384), "-v")
	f.Add(bytes.Repeat([]byte{0x01, 0x80}, 192), "--json")
	f.Add(bytes.Repeat([]byte{0x7f, 0x00, 0x10}, 128), "-i\x002\x00-v")
	f.Fuzz(func(t *testing.T, data []byte, argv string) {
		args := []string{"ibinfo"}
		if argv != "" {
			args = append(args, strings.Split(argv, "\x00")...)
		}
		for _, extra := range [][]string{nil, {"--json"}} {
			sys := fuzzSystem(data)
			rc := run(append(append([]string{}, args...), extra...), io.Discard, io.Discard, environment{sys: sys})
			if rc < 0 || rc > 255 {
				t.Fatalf("exit status %d", rc)
			}
		}
	})
}
