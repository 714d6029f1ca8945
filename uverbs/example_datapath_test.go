package uverbs_test

import (
	"encoding/binary"
	"fmt"
	"log"

	"github.com/goverbs/goverbs/uverbs"
)

// connectedPair opens rxe0, makes two RC QPs on one CQ, connects them to
// each other (loopback) and registers a buffer. Real programs exchange
// uverbs.Endpoint values with their peer instead, e.g. over TCP.
func connectedPair() (ctx *uverbs.Context, a, b *uverbs.QP, cq *uverbs.CQ, mr *uverbs.MR) {
	ctx, err := uverbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	if cq, err = ctx.CreateCQ(64, nil); err != nil {
		log.Fatal(err)
	}
	gid, err := ctx.RecommendedGID(1)
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
	return ctx, a, b, cq, mr
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
			if wc.Status != uverbs.WCSuccess {
				log.Fatalf("work request %d: %v", wc.ID, wc.Status)
			}
		}
		n -= got
	}
}

// Send a message into a posted receive buffer.
func ExampleQP_PostSend_send() {
	ctx, a, b, cq, mr := connectedPair()
	defer ctx.Close()
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
	ctx, a, _, cq, mr := connectedPair()
	defer ctx.Close()
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
	ctx, a, _, cq, mr := connectedPair()
	defer ctx.Close()
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

// Send a datagram on a UD QP through an address handle.
func ExamplePD_CreateAH() {
	ctx, err := uverbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	pd, err := ctx.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	cq, err := ctx.CreateCQ(16, nil)
	if err != nil {
		log.Fatal(err)
	}
	qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeUD, SendCQ: cq, RecvCQ: cq,
		Cap: uverbs.QPCap{MaxSendWr: 4, MaxRecvWr: 4, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}})
	if err != nil {
		log.Fatal(err)
	}
	gid, err := ctx.RecommendedGID(1)
	if err != nil {
		log.Fatal(err)
	}
	const qkey = 0x11111111
	if err := qp.Connect(uverbs.ConnectAttr{SGIDIndex: gid.Index, Qkey: qkey}); err != nil {
		log.Fatal(err)
	}
	// The peer's GID and QPN come from the peer; here, ourselves.
	ah, err := pd.CreateAH(uverbs.AHAttr{PortNum: 1, IsGlobal: true,
		GRH: uverbs.GlobalRoute{DGID: gid.GID, SGIDIndex: gid.Index, HopLimit: 1}})
	if err != nil {
		log.Fatal(err)
	}
	buf, err := uverbs.AllocBuffer(4096)
	if err != nil {
		log.Fatal(err)
	}
	mr, err := pd.RegisterBuffer(buf, 0, buf.Len(), uverbs.AccessLocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	// A UD receive buffer starts with the 40-byte GRH.
	if err := qp.PostRecv([]uverbs.RecvWR{{ID: 1, SGL: []uverbs.SGE{{Addr: mr.Addr() + 1024, Length: 40 + 64, Lkey: mr.Lkey()}}}}); err != nil {
		log.Fatal(err)
	}
	copy(buf.Bytes(), "datagram")
	err = qp.PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled | uverbs.SendInline,
		SGL: []uverbs.SGE{{Addr: mr.Addr(), Length: 8}}, AH: ah, RemoteQPN: qp.QPN(), RemoteQkey: qkey}})
	if err != nil {
		log.Fatal(err)
	}
	wait(cq, 2)
	fmt.Printf("%s\n", buf.Bytes()[1024+40:1024+48])
}
