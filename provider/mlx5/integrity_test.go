package mlx5

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/provider"
)

// The RC integrity test, shared by the HCA model (loopback_test.go) and
// real mlx5 hardware (hwsuite_test.go): two connected QPs carry random
// mixes of SEND, SEND_WITH_IMM, RDMA WRITE (with immediate), RDMA READ,
// compare-and-swap and fetch-and-add, of random sizes, inline or not,
// scattered over several SGEs with untouched gaps, several work requests
// per post (one doorbell), with selective signaling. Every byte of both
// registered arenas is compared with a shadow copy after each round, and
// every completion is matched field by field against what its work request
// must produce; none may be missing, duplicated or out of order.

// ITSide is one QP of the pair as the test drives it (exported for the
// hardware suite, an external test package).
type ITSide interface {
	PostSend(wrs []provider.SendWR) error
	PostRecv(wrs []provider.RecvWR) error
	Poll(wcs []provider.WC) (int, error)
	QPN() uint32
	Arena() []byte // registered with local write, remote read/write/atomic
	Lkey() uint32
	Rkey() uint32
	MaxInline() int
	MaxSGE() int
	// zeroLengthRecvSGEs reports whether receives may carry zero-length
	// SGEs: a QP's RQ drops them as libmlx5 does, but libmlx5's SRQ post
	// hands them to the HCA as a byte count of 0, which the PRM reads as
	// 2 GiB.
	ZeroLengthRecvSGEs() bool
}

const (
	itOpsPerRound = 6 // per direction: sender and receiver completions stay below a 16-entry CQ
	itMaxSize     = 3000
)

type itOp struct {
	wr       provider.SendWR
	size     int
	recv     *provider.RecvWR // the receive it consumes at the peer
	expected provider.WC      // requester completion (if signaled)
	recvWC   provider.WC      // responder completion (if it consumes a receive)
	touches  [2][][2]int      // per side, the spans the operation writes
}

type itEngine struct {
	t      testing.TB
	rng    *rand.Rand
	sides  [2]ITSide
	shadow [2][]byte
	next   uint64
	stats  map[provider.WROpcode]int
	inline int
	polled atomic.Int64
}

func newITEngine(t testing.TB, seed uint64, a, b ITSide) *itEngine {
	e := &itEngine{t: t, rng: rand.New(rand.NewPCG(seed, 0x51ed27)), sides: [2]ITSide{a, b}, stats: map[provider.WROpcode]int{}}
	for i, s := range e.sides {
		m := s.Arena()
		for j := range m {
			m[j] = byte(e.rng.Uint32())
		}
		e.shadow[i] = append([]byte(nil), m...)
	}
	return e
}

// itAlloc hands out disjoint spans of an arena within a round, with
// random gaps, so that no two operations of a round touch the same byte.
type itAlloc struct {
	rng  *rand.Rand
	off  int
	size int
}

func (a *itAlloc) take(n, align int) (int, bool) {
	off := a.off + a.rng.IntN(24)
	off = (off + align - 1) / align * align
	if off+n > a.size {
		return 0, false
	}
	a.off = off + n
	return off, true
}

// spans splits [off, off+n) into up to k pieces, with gaps between them
// (the gaps stay untouched: the arena check proves it). It returns the
// SGEs and the pieces' offsets.
func (e *itEngine) sgl(side int, al *itAlloc, n, k int, recv bool) ([]provider.SGE, [][2]int, bool) {
	noZero := recv && !e.sides[side].ZeroLengthRecvSGEs()
	s := e.sides[side]
	base := uint64(uintptr(unsafe.Pointer(&s.Arena()[0])))
	pieces := 1 + e.rng.IntN(k)
	if n == 0 {
		pieces = e.rng.IntN(2) // none, or one zero-length SGE
	}
	var sges []provider.SGE
	var offs [][2]int
	left := n
	for p := 0; p < pieces; p++ {
		l := left
		if p < pieces-1 && left > 0 {
			l = e.rng.IntN(left + 1)
		}
		if l == 0 && noZero {
			continue
		}
		off, ok := al.take(l, 1)
		if !ok {
			return nil, nil, false
		}
		sges = append(sges, provider.SGE{Addr: base + uint64(off), Length: uint32(l), Lkey: s.Lkey()})
		offs = append(offs, [2]int{off, l})
		left -= l
	}
	return sges, offs, true
}

func (e *itEngine) size() int {
	switch e.rng.IntN(5) {
	case 0:
		return e.rng.IntN(9)
	case 1:
		return e.rng.IntN(65)
	case 2:
		return e.rng.IntN(e.sides[0].MaxInline() + 8)
	default:
		return e.rng.IntN(itMaxSize)
	}
}

// plan makes one direction's operations (from side s to its peer) and
// applies their effects to the shadows.
func (e *itEngine) plan(s int, al [2]*itAlloc) ([]*itOp, []provider.RecvWR, bool) {
	p := 1 - s
	src, dst := e.sides[s], e.sides[p]
	dstBase := uint64(uintptr(unsafe.Pointer(&dst.Arena()[0])))
	opcodes := []provider.WROpcode{provider.WRSend, provider.WRSendWithImm, provider.WRRDMAWrite, provider.WRRDMAWriteWithImm,
		provider.WRRDMARead, provider.WRAtomicCmpAndSwp, provider.WRAtomicFetchAndAdd}
	// A device may lack atomics (mlx5_ib reports none unless the HCA
	// answers them in host byte order).
	if a, ok := dst.(interface{ Atomics() bool }); ok && !a.Atomics() {
		opcodes = opcodes[:5]
	}
	var ops []*itOp
	var recvs []provider.RecvWR
	n := 1 + e.rng.IntN(itOpsPerRound)
	for i := 0; i < n; i++ {
		op := &itOp{}
		code := opcodes[e.rng.IntN(len(opcodes))]
		e.next++
		op.wr = provider.SendWR{ID: e.next, Opcode: code}
		if e.rng.IntN(3) == 0 {
			op.wr.Flags |= provider.SendSignaled
		}
		op.expected = provider.WC{ID: e.next, QPNum: src.QPN()}
		switch code {
		case provider.WRSend, provider.WRSendWithImm, provider.WRRDMAWrite, provider.WRRDMAWriteWithImm:
			op.size = e.size()
			inline := op.size <= src.MaxInline() && e.rng.IntN(2) == 0
			sges, offs, ok := e.sgl(s, al[s], op.size, min(src.MaxSGE(), 4), false)
			if !ok {
				return ops, recvs, false
			}
			for _, o := range offs {
				for j := o[0]; j < o[0]+o[1]; j++ {
					b := byte(e.rng.Uint32())
					src.Arena()[j], e.shadow[s][j] = b, b
				}
			}
			if inline {
				op.wr.Flags |= provider.SendInline
				e.inline++
			}
			op.wr.SGL = sges
			data := gatherOffs(e.shadow[s], offs)
			if code == provider.WRSendWithImm || code == provider.WRRDMAWriteWithImm {
				op.wr.Imm = e.rng.Uint32()
			}
			if code == provider.WRRDMAWrite || code == provider.WRRDMAWriteWithImm {
				off, ok := al[p].take(op.size, 1)
				if !ok {
					return ops, recvs, false
				}
				op.wr.RemoteAddr, op.wr.Rkey = dstBase+uint64(off), dst.Rkey()
				copy(e.shadow[p][off:], data)
				op.touches[p] = [][2]int{{off, op.size}}
				op.expected.Opcode = provider.WCRDMAWrite
			} else {
				op.expected.Opcode = provider.WCSend
			}
			if code == provider.WRSendWithImm || code == provider.WRRDMAWriteWithImm {
				op.expected.Flags = provider.WCWithImm
			}
			if code != provider.WRRDMAWrite {
				// A receive at the peer: SENDs scatter into it (capacity at
				// least the message, maybe more), WRITE_WITH_IMM leaves it
				// untouched.
				e.next++
				r := provider.RecvWR{ID: e.next}
				op.recvWC = provider.WC{ID: e.next, QPNum: dst.QPN(), ByteLen: uint32(op.size), Opcode: provider.WCRecv}
				if code == provider.WRSend || code == provider.WRSendWithImm {
					room := op.size + e.rng.IntN(3)*e.rng.IntN(64)
					sges, offs, ok := e.sgl(p, al[p], room, dst.MaxSGE(), true)
					if !ok {
						return ops, recvs, false
					}
					r.SGL = sges
					scatterOffs(e.shadow[p], offs, data)
					op.touches[p] = offs
				} else {
					op.recvWC.Opcode = provider.WCRecvRDMAWithImm
				}
				if op.wr.Opcode != provider.WRSend && op.wr.Opcode != provider.WRRDMAWrite {
					op.recvWC.Flags = provider.WCWithImm
					op.recvWC.Imm = op.wr.Imm
				}
				recvs = append(recvs, r)
				op.recv = &recvs[len(recvs)-1]
			}
		case provider.WRRDMARead:
			op.size = e.size()
			sges, offs, ok := e.sgl(s, al[s], op.size, min(src.MaxSGE(), 4), false)
			if !ok {
				return ops, recvs, false
			}
			off, ok := al[p].take(op.size, 1)
			if !ok {
				return ops, recvs, false
			}
			op.wr.SGL = sges
			op.wr.RemoteAddr, op.wr.Rkey = dstBase+uint64(off), dst.Rkey()
			scatterOffs(e.shadow[s], offs, e.shadow[p][off:off+op.size])
			op.touches[s] = offs
			op.expected.Opcode, op.expected.ByteLen = provider.WCRDMARead, uint32(op.size)
		case provider.WRAtomicCmpAndSwp, provider.WRAtomicFetchAndAdd:
			op.size = 8
			res, ok := al[s].take(8, 8)
			if !ok {
				return ops, recvs, false
			}
			tgt, ok := al[p].take(8, 8)
			if !ok {
				return ops, recvs, false
			}
			op.wr.SGL = []provider.SGE{{Addr: uint64(uintptr(unsafe.Pointer(&src.Arena()[res]))), Length: 8, Lkey: src.Lkey()}}
			op.wr.RemoteAddr, op.wr.Rkey = dstBase+uint64(tgt), dst.Rkey()
			old := binary.NativeEndian.Uint64(e.shadow[p][tgt:])
			nv := old
			if code == provider.WRAtomicCmpAndSwp {
				op.wr.CompareAdd, op.wr.Swap = e.rng.Uint64(), e.rng.Uint64()
				if e.rng.IntN(2) == 0 {
					op.wr.CompareAdd = old
				}
				if old == op.wr.CompareAdd {
					nv = op.wr.Swap
				}
				op.expected.Opcode = provider.WCCompSwap
			} else {
				op.wr.CompareAdd = e.rng.Uint64()
				nv = old + op.wr.CompareAdd
				op.expected.Opcode = provider.WCFetchAdd
			}
			binary.NativeEndian.PutUint64(e.shadow[p][tgt:], nv)
			binary.NativeEndian.PutUint64(e.shadow[s][res:], old)
			op.touches[p] = [][2]int{{tgt, 8}}
			op.touches[s] = [][2]int{{res, 8}}
			op.expected.ByteLen = 8
		}
		e.stats[code]++
		ops = append(ops, op)
	}
	// The last work request of the direction is signaled, so that every
	// WQE is retired by the round's end.
	ops[len(ops)-1].wr.Flags |= provider.SendSignaled
	return ops, recvs, true
}

func gatherOffs(m []byte, offs [][2]int) []byte {
	var out []byte
	for _, o := range offs {
		out = append(out, m[o[0]:o[0]+o[1]]...)
	}
	return out
}

func scatterOffs(m []byte, offs [][2]int, data []byte) {
	for _, o := range offs {
		if len(data) == 0 {
			return
		}
		data = data[copy(m[o[0]:o[0]+o[1]], data):]
	}
}

// round runs one round: both directions' receives, then both
// directions' sends posted concurrently in lists of 1 to 3, while a
// poller per side collects completions.
func (e *itEngine) round(r int) error {
	var al [2]*itAlloc
	for i := range al {
		al[i] = &itAlloc{rng: e.rng, size: len(e.sides[i].Arena())}
	}
	var ops [2][]*itOp
	var recvs [2][]provider.RecvWR
	for s := 0; s < 2; s++ {
		var ok bool
		ops[s], recvs[s], ok = e.plan(s, al)
		if !ok {
			return fmt.Errorf("round %d: arena too small for the plan", r)
		}
	}
	// What each side's CQ must deliver: its signaled sends by ID and its
	// receives in posting order.
	var wantSend [2]map[uint64]provider.WC
	var wantRecv [2][]provider.WC
	for s := 0; s < 2; s++ {
		wantSend[s] = map[uint64]provider.WC{}
		for _, op := range ops[s] {
			if op.wr.Flags&provider.SendSignaled != 0 {
				wantSend[s][op.wr.ID] = op.expected
			}
			if op.recv != nil {
				wantRecv[1-s] = append(wantRecv[1-s], op.recvWC)
			}
		}
	}
	for s := 0; s < 2; s++ {
		if len(recvs[1-s]) == 0 {
			continue
		}
		if err := e.sides[s].PostRecv(recvs[1-s]); err != nil {
			return fmt.Errorf("round %d: post %d receives on side %d: %w", r, len(recvs[1-s]), s, err)
		}
	}
	// How each direction's work requests are split into posts (one
	// doorbell each): lists of 1 to 3, or one by one on odd rounds.
	var splits [2][]int
	for s := 0; s < 2; s++ {
		for left := len(ops[s]); left > 0; {
			k := min(left, 1+e.rng.IntN(3))
			if r%2 == 1 {
				k = 1
			}
			splits[s] = append(splits[s], k)
			left -= k
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	var done sync.WaitGroup
	done.Add(2)
	for s := 0; s < 2; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			list := ops[s]
			for _, k := range splits[s] {
				wrs := make([]provider.SendWR, k)
				for i := range wrs {
					wrs[i] = list[i].wr
				}
				for {
					err := e.sides[s].PostSend(wrs)
					if errors.Is(err, provider.ErrQueueFull) {
						runtime.Gosched()
						continue
					}
					if err != nil {
						errs <- fmt.Errorf("round %d side %d: post %d: %w", r, s, k, err)
						return
					}
					break
				}
				list = list[k:]
			}
		}(s)
		go func(s int) {
			defer done.Done()
			wcs := make([]provider.WC, 4)
			gotRecv := 0
			pending := len(wantSend[s]) + len(wantRecv[s])
			deadline := time.Now().Add(20 * time.Second)
			for pending > 0 {
				n, err := e.sides[s].Poll(wcs)
				if err != nil {
					errs <- fmt.Errorf("round %d side %d: poll: %w", r, s, err)
					return
				}
				if n == 0 {
					if time.Now().After(deadline) {
						errs <- fmt.Errorf("round %d side %d: %d completions missing: sends %v, receives %d of %d",
							r, s, pending, keys(wantSend[s]), gotRecv, len(wantRecv[s]))
						return
					}
					runtime.Gosched()
					continue
				}
				for _, w := range wcs[:n] {
					e.polled.Add(1)
					got := itComparable(w)
					var want provider.WC
					if exp, ok := wantSend[s][w.ID]; ok {
						want = exp
						delete(wantSend[s], w.ID)
					} else if gotRecv < len(wantRecv[s]) && w.Opcode >= provider.WCRecv {
						want = wantRecv[s][gotRecv]
						gotRecv++
					} else {
						errs <- fmt.Errorf("round %d side %d: unexpected completion %+v", r, s, w)
						return
					}
					if d := cmp.Diff(want, got); d != "" {
						errs <- fmt.Errorf("round %d side %d: completion of WR %d (-want +got):\n%s", r, s, w.ID, d)
						return
					}
					pending--
				}
			}
		}(s)
	}
	wg.Wait()
	done.Wait()
	close(errs)
	var all []string
	for err := range errs {
		all = append(all, err.Error())
	}
	if len(all) > 0 {
		return errors.New(strings.Join(all, "\n"))
	}
	// Nothing more may arrive.
	for s := 0; s < 2; s++ {
		var extra [1]provider.WC
		if n, err := e.sides[s].Poll(extra[:]); n != 0 || err != nil {
			return fmt.Errorf("round %d side %d: extra completion %+v, %v", r, s, extra[0], err)
		}
	}
	for s := 0; s < 2; s++ {
		m := e.sides[s].Arena()
		for i := range m {
			if m[i] != e.shadow[s][i] {
				return fmt.Errorf("round %d: side %d arena byte %d is %#x, want %#x (%s)", r, s, i, m[i], e.shadow[s][i], describeOps(ops, s, i))
			}
		}
	}
	return nil
}

// itComparable keeps the fields an RC completion defines: src_qp, SLID,
// SL, path bits and the GRH flag (RoCE sets it on every packet) are UD's or
// the link's; libmlx5 fills the P_Key index from the immediate, and with
// scatter to CQE reads all of them from the data that overlays them.
func itComparable(w provider.WC) provider.WC {
	w.SrcQP, w.SLID, w.SL, w.PkeyIndex, w.DLIDPathBits = 0, 0, 0, 0, 0
	w.Flags &^= provider.WCWithGRH
	// The verbs define byte_len of requester completions for READ and
	// atomics only (libmlx5 leaves it alone for SEND and WRITE; rxe
	// reports the length).
	if w.Opcode == provider.WCSend || w.Opcode == provider.WCRDMAWrite {
		w.ByteLen = 0
	}
	return w
}

func keys(m map[uint64]provider.WC) []uint64 {
	var k []uint64
	for id := range m {
		k = append(k, id)
	}
	sort.Slice(k, func(i, j int) bool { return k[i] < k[j] })
	return k
}

// describeOps names the operations of the round that write the byte at
// off of side, or all of them when none does.
func describeOps(ops [2][]*itOp, side, off int) string {
	var b strings.Builder
	for s := range ops {
		for _, op := range ops[s] {
			for _, t := range op.touches[side] {
				if off >= t[0] && off < t[0]+t[1] {
					fmt.Fprintf(&b, "written by side %d WR %d %v size %d flags %#x SGL %+v recv %+v, span %v; ", s, op.wr.ID, op.wr.Opcode, op.size, op.wr.Flags, op.wr.SGL, op.recv, op.touches[side])
				}
			}
		}
	}
	if b.Len() == 0 {
		return "no operation of the round writes it"
	}
	return b.String()
}

// run runs rounds and logs what was covered.
func (e *itEngine) run(rounds int) {
	e.t.Helper()
	for r := 0; r < rounds; r++ {
		if err := e.round(r); err != nil {
			e.t.Fatal(err)
		}
	}
	e.t.Logf("%d rounds, %d completions, %d inline; work requests by opcode: %v", rounds, e.polled.Load(), e.inline, e.stats)
}

// RunIntegrity runs rounds of the integrity test between a and b, which
// are connected to each other (exported for the hardware suite).
func RunIntegrity(t testing.TB, seed uint64, rounds int, a, b ITSide) {
	t.Helper()
	newITEngine(t, seed, a, b).run(rounds)
}
