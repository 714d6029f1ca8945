package uverbs_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"time"

	"github.com/goverbs/goverbs/uverbs"
)

// rcSide is what each of the two programs of the RC example sets up: a
// device, a QP whose completions go to a CQ with its own channel, and 4 KiB
// of registered memory the peer may write and read.
type rcSide struct {
	dev *uverbs.Context
	qp  *uverbs.QP
	cq  *uverbs.CQ
	mr  *uverbs.MR
	gid uverbs.GIDEntry
}

const rcAccess = uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead

func openRC(device string) (*rcSide, error) {
	dev, err := uverbs.Open(device)
	if err != nil {
		return nil, err
	}
	s := &rcSide{dev: dev} // closing dev closes everything made in it
	if s.gid, err = dev.RecommendedGID(1); err != nil {
		return s, err
	}
	pd, err := dev.AllocPD()
	if err != nil {
		return s, err
	}
	ch, err := dev.NewCompChannel()
	if err != nil {
		return s, err
	}
	if s.cq, err = dev.CreateCQ(16, &uverbs.CQOptions{Channel: ch}); err != nil {
		return s, err
	}
	s.qp, err = pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: s.cq, RecvCQ: s.cq,
		Cap: uverbs.QPCap{MaxSendWr: 8, MaxRecvWr: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return s, err
	}
	buf, err := uverbs.AllocBuffer(4096)
	if err != nil {
		return s, err
	}
	s.mr, err = pd.RegisterBuffer(buf, 0, buf.Len(), rcAccess)
	return s, err
}

// exchange sends this side's endpoint and buffer over conn and returns the
// peer's: 46 bytes each way, in the documented wire forms.
func (s *rcSide) exchange(conn net.Conn, psn uint32) (uverbs.Endpoint, uverbs.RemoteBuffer, error) {
	var ep uverbs.Endpoint
	var rb uverbs.RemoteBuffer
	mine, err := s.mr.RemoteBuffer(0, s.mr.Len())
	if err != nil {
		return ep, rb, err
	}
	msg, err := uverbs.Endpoint{QPN: s.qp.QPN(), PSN: psn, GID: s.gid.GID}.MarshalBinary()
	if err != nil {
		return ep, rb, err
	}
	if msg, err = mine.AppendBinary(msg); err != nil {
		return ep, rb, err
	}
	if _, err := conn.Write(msg); err != nil {
		return ep, rb, err
	}
	in := make([]byte, uverbs.EndpointSize+uverbs.RemoteBufferSize)
	if _, err := io.ReadFull(conn, in); err != nil {
		return ep, rb, err
	}
	if err := ep.UnmarshalBinary(in[:uverbs.EndpointSize]); err != nil {
		return ep, rb, err
	}
	return ep, rb, rb.UnmarshalBinary(in[uverbs.EndpointSize:])
}

// wait waits for one completion and returns it, or its error.
func (s *rcSide) wait(ctx context.Context) (uverbs.WC, error) {
	var wc [1]uverbs.WC
	if _, err := s.cq.Wait(ctx, wc[:]); err != nil {
		return uverbs.WC{}, err
	}
	return wc[0], wc[0].Err()
}

// rcServer is the server program: it offers its buffer (its second half
// filled for the client to read), takes the client's RDMA WRITE, and
// checks it once the client's SEND with immediate data says it is done.
func rcServer(ctx context.Context, device string, ln net.Listener) (string, error) {
	conn, err := ln.Accept()
	if err != nil {
		return "", err
	}
	defer conn.Close()
	s, err := openRC(device)
	if s != nil {
		defer s.dev.Close()
	}
	if err != nil {
		return "", err
	}
	mem := s.mr.Bytes()
	copy(mem[2048:], "the server's data")
	peer, _, err := s.exchange(conn, 0x100)
	if err != nil {
		return "", err
	}
	ca := uverbs.ConnectAttr{SGIDIndex: s.gid.Index, Access: rcAccess, LocalPSN: 0x100, Remote: peer}
	if err := s.qp.ReadyToReceive(ca); err != nil {
		return "", err
	}
	// Receive into [1024, 1088): posted in RTR, before the client may send.
	sge, err := s.mr.SGE(1024, 64)
	if err != nil {
		return "", err
	}
	if err := s.qp.PostRecv([]uverbs.RecvWR{{ID: 1, SGL: []uverbs.SGE{sge}}}); err != nil {
		return "", err
	}
	if err := s.qp.ReadyToSend(ca); err != nil {
		return "", err
	}
	if _, err := conn.Write([]byte{'R'}); err != nil { // ready
		return "", err
	}
	wc, err := s.wait(ctx)
	if err != nil {
		return "", err
	}
	if wc.Opcode != uverbs.WCRecv || wc.Flags&uverbs.WCWithImm == 0 {
		return "", fmt.Errorf("server: completion %v with flags %v, want a receive with immediate data", wc.Opcode, wc.Flags)
	}
	// RC delivers in order: the WRITE landed before the SEND.
	written := bytes.TrimRight(mem[:64], "\x00")
	return fmt.Sprintf("server: the client wrote %q and sent %q with immediate %#x", written, mem[1024:1024+wc.ByteLen], wc.Imm), nil
}

// rcClient is the client program: it writes into the server's buffer,
// reads the server's data back, and says so with a SEND with immediate.
func rcClient(ctx context.Context, device, addr string) (string, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	c, err := openRC(device)
	if c != nil {
		defer c.dev.Close()
	}
	if err != nil {
		return "", err
	}
	peer, remote, err := c.exchange(conn, 0x200)
	if err != nil {
		return "", err
	}
	if err := c.qp.Connect(uverbs.ConnectAttr{SGIDIndex: c.gid.Index, Access: rcAccess, LocalPSN: 0x200, Remote: peer}); err != nil {
		return "", err
	}
	if _, err := io.ReadFull(conn, make([]byte, 1)); err != nil { // the server is ready
		return "", err
	}
	mem := c.mr.Bytes()
	msg := copy(mem, "hello from the client")
	out, _ := c.mr.SGE(0, msg)
	into, _ := c.mr.SGE(2048, 17)
	done, _ := c.mr.SGE(3072, copy(mem[3072:], "done"))
	theirs, err := remote.Slice(2048, 17)
	if err != nil {
		return "", err
	}
	err = c.qp.PostSend([]uverbs.SendWR{
		{ID: 1, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{out}, RemoteAddr: remote.Addr, Rkey: remote.Rkey},
		{ID: 2, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{into}, RemoteAddr: theirs.Addr, Rkey: theirs.Rkey},
		{ID: 3, Opcode: uverbs.WRSendWithImm, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{done}, Imm: 0xc0ffee},
	})
	if err != nil {
		return "", err
	}
	for range 2 { // the READ (covering the unsignaled WRITE before it) and the SEND
		if _, err := c.wait(ctx); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("client: read %q", mem[2048:2048+17]), nil
}

// Two programs connect RC QPs over TCP (each sends the other its Endpoint
// and RemoteBuffer in their wire forms), then the client writes to and
// reads from the server's memory and tells it with a SEND with immediate
// data. Here the two programs run side by side, on the test machine's
// rxe0 (10.99.0.1) and rxe1 (10.99.0.2); copy rcServer and rcClient into
// two main packages for real hosts.
func ExampleQP_Connect() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ln, err := net.Listen("tcp", "10.99.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		line string
		err  error
	}
	server := make(chan result)
	go func() {
		line, err := rcServer(ctx, "rxe0", ln)
		server <- result{line, err}
	}()
	line, err := rcClient(ctx, "rxe1", ln.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	s := <-server
	if s.err != nil {
		log.Fatal(s.err)
	}
	fmt.Println(s.line)
	fmt.Println(line)
}
