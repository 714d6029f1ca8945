package uverbs_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"time"

	"github.com/goverbs/goverbs/uverbs"
)

// connectedPair opens rxe0, makes two RC QPs on one CQ, connects them to
// each other (loopback) and registers a buffer. Real programs exchange
// uverbs.Endpoint values with their peer instead, e.g. over TCP.
func connectedPair() (dev *uverbs.Context, a, b *uverbs.QP, cq *uverbs.CQ, mr *uverbs.MR) {
	dev, err := uverbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	pd, err := dev.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	if cq, err = dev.CreateCQ(64, nil); err != nil {
		log.Fatal(err)
	}
	gid, err := dev.RecommendedGID(1)
	if err != nil {
		log.Fatal(err)
	}
	newQP := func() *uverbs.QP {
		qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
			Cap: uverbs.QPCap{MaxSendWr: 16, MaxRecvWr: 16, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}})
		if err != nil {
			log.Fatal(err)
		}
		return qp
	}
	a, b = newQP(), newQP()
	rights := uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteAtomic
	for _, x := range [][2]*uverbs.QP{{a, b}, {b, a}} {
		if err := x[0].Connect(uverbs.ConnectAttr{SGIDIndex: gid.Index, Access: rights,
			Remote: uverbs.Endpoint{QPN: x[1].QPN(), GID: gid.GID}}); err != nil {
			log.Fatal(err)
		}
	}
	buf, err := uverbs.AllocBuffer(1 << 16)
	if err != nil {
		log.Fatal(err)
	}
	if mr, err = pd.RegisterBuffer(buf, 0, buf.Len(), rights); err != nil {
		log.Fatal(err)
	}
	return dev, a, b, cq, mr
}

// wait busy-polls for n completions and fails on an error status.
func wait(cq *uverbs.CQ, n int) {
	var wcs [16]uverbs.WC
	for n > 0 {
		got, err := cq.Poll(wcs[:])
		if err != nil {
			log.Fatal(err)
		}
		for _, wc := range wcs[:got] {
			if err := wc.Err(); err != nil {
				log.Fatal(err)
			}
		}
		n -= got
	}
}

// Send a message into a posted receive buffer.
func ExampleQP_PostSend_send() {
	dev, a, b, cq, mr := connectedPair()
	defer dev.Close()
	copy(mr.Bytes(), "ping")
	err := b.PostRecv([]uverbs.RecvWR{{ID: 1, SGL: []uverbs.SGE{{Addr: mr.Addr() + 4096, Length: 64, Lkey: mr.Lkey()}}}})
	if err != nil {
		log.Fatal(err)
	}
	err = a.PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{{Addr: mr.Addr(), Length: 4, Lkey: mr.Lkey()}}}})
	if err != nil {
		log.Fatal(err)
	}
	wait(cq, 2) // the send and the receive
	fmt.Printf("%s\n", mr.Bytes()[4096:4100])
}

// Write to and read from the peer's memory, two requests, one doorbell.
func ExampleQP_PostSend_rdma() {
	dev, a, _, cq, mr := connectedPair()
	defer dev.Close()
	copy(mr.Bytes(), "remote")
	err := a.PostSend([]uverbs.SendWR{
		{ID: 1, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{{Addr: mr.Addr(), Length: 6, Lkey: mr.Lkey()}},
			RemoteAddr: mr.Addr() + 8192, Rkey: mr.Rkey()},
		{ID: 2, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{{Addr: mr.Addr() + 100, Length: 6, Lkey: mr.Lkey()}},
			RemoteAddr: mr.Addr() + 8192, Rkey: mr.Rkey()},
	})
	if err != nil {
		log.Fatal(err)
	}
	wait(cq, 1) // unsignaled writes complete with the next signaled request
	fmt.Printf("%s\n", mr.Bytes()[100:106])
}

// Fetch-and-add and compare-and-swap on a remote 64-bit word.
func ExampleQP_PostSend_atomics() {
	dev, a, _, cq, mr := connectedPair()
	defer dev.Close()
	mem := mr.Bytes()
	binary.LittleEndian.PutUint64(mem[1024:], 40)
	err := a.PostSend([]uverbs.SendWR{
		{ID: 1, Opcode: uverbs.WRAtomicFetchAndAdd, Flags: uverbs.SendSignaled, CompareAdd: 2,
			SGL: []uverbs.SGE{{Addr: mr.Addr(), Length: 8, Lkey: mr.Lkey()}}, RemoteAddr: mr.Addr() + 1024, Rkey: mr.Rkey()},
		{ID: 2, Opcode: uverbs.WRAtomicCmpAndSwp, Flags: uverbs.SendSignaled, CompareAdd: 42, Swap: 7,
			SGL: []uverbs.SGE{{Addr: mr.Addr() + 8, Length: 8, Lkey: mr.Lkey()}}, RemoteAddr: mr.Addr() + 1024, Rkey: mr.Rkey()},
	})
	if err != nil {
		log.Fatal(err)
	}
	wait(cq, 2)
	fmt.Println(binary.LittleEndian.Uint64(mem), binary.LittleEndian.Uint64(mem[8:]), binary.LittleEndian.Uint64(mem[1024:]))
}

// udSide is one end of the UD example: a UD QP on its own device with a
// CQ and a registered page.
type udSide struct {
	qp  *uverbs.QP
	cq  *uverbs.CQ
	mr  *uverbs.MR
	pd  *uverbs.PD
	gid uverbs.GIDEntry
}

const udQkey = 0x11111111

func openUD(dev *uverbs.Context) udSide {
	var s udSide
	var err error
	if s.pd, err = dev.AllocPD(); err != nil {
		log.Fatal(err)
	}
	ch, err := dev.NewCompChannel()
	if err != nil {
		log.Fatal(err)
	}
	if s.cq, err = dev.CreateCQ(16, &uverbs.CQOptions{Channel: ch}); err != nil {
		log.Fatal(err)
	}
	s.qp, err = s.pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeUD, SendCQ: s.cq, RecvCQ: s.cq,
		Cap: uverbs.QPCap{MaxSendWr: 4, MaxRecvWr: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		log.Fatal(err)
	}
	if s.gid, err = dev.RecommendedGID(1); err != nil {
		log.Fatal(err)
	}
	// UD needs no peer to connect: INIT, RTR, RTS with the Q_Key.
	if err := s.qp.Connect(uverbs.ConnectAttr{SGIDIndex: s.gid.Index, Qkey: udQkey}); err != nil {
		log.Fatal(err)
	}
	buf, err := uverbs.AllocBuffer(4096)
	if err != nil {
		log.Fatal(err)
	}
	if s.mr, err = s.pd.RegisterBuffer(buf, 0, buf.Len(), uverbs.AccessLocalWrite); err != nil {
		log.Fatal(err)
	}
	return s
}

// Send a datagram from a UD QP on rxe0 to one on rxe1 through an address
// handle. The receiver's QPN and GID (its Endpoint) would come from it out
// of band; a UD receive buffer starts with the 40-byte GRH.
func ExamplePD_CreateAH() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dev0, err := uverbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer dev0.Close()
	dev1, err := uverbs.Open("rxe1")
	if err != nil {
		log.Fatal(err)
	}
	defer dev1.Close()
	from, to := openUD(dev0), openUD(dev1)
	peer := uverbs.Endpoint{QPN: to.qp.QPN(), GID: to.gid.GID}

	into, _ := to.mr.SGE(0, 40+64)
	if err := to.qp.PostRecv([]uverbs.RecvWR{{ID: 1, SGL: []uverbs.SGE{into}}}); err != nil {
		log.Fatal(err)
	}
	ah, err := from.pd.CreateAH(uverbs.AHAttr{PortNum: 1, IsGlobal: true,
		GRH: uverbs.GlobalRoute{DGID: peer.GID, SGIDIndex: from.gid.Index, HopLimit: 1}})
	if err != nil {
		log.Fatal(err)
	}
	msg, _ := from.mr.SGE(0, copy(from.mr.Bytes(), "datagram"))
	err = from.qp.PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{msg}, AH: ah, RemoteQPN: peer.QPN, RemoteQkey: udQkey}})
	if err != nil {
		log.Fatal(err)
	}
	var wcs [1]uverbs.WC
	for _, s := range []udSide{from, to} {
		if _, err := s.cq.Wait(ctx, wcs[:]); err != nil {
			log.Fatal(err)
		}
		if err := wcs[0].Err(); err != nil {
			log.Fatal(err)
		}
	}
	got := to.mr.Bytes()[40:wcs[0].ByteLen]
	fmt.Printf("%s (from the sender: %v)\n", got, wcs[0].SrcQP == from.qp.QPN())
}
