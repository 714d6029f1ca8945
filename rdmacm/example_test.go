package rdmacm_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// A server and a client that meet by IP address: the server posts a
// receive before it accepts (WithSetup), the client sends one message once
// connected. Both ends use the address of the netdev the RDMA device is on
// (here Soft-RoCE's rxe0 on 10.99.0.1, as in the test VM).
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Server: listen, accept one connection with a receive posted.
	l, err := rdmacm.Listen(ctx, "10.99.0.1:7471")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	var inbox *uverbs.Buffer
	var inboxMR *uverbs.MR
	got := make(chan string, 1)
	go func() {
		c, err := l.Accept(ctx, rdmacm.WithSetup(func(c *rdmacm.Conn) error {
			if inbox, err = uverbs.AllocBuffer(64); err != nil {
				return err
			}
			if inboxMR, err = c.PD().RegisterBuffer(inbox, 0, 64, uverbs.AccessLocalWrite); err != nil {
				return err
			}
			return c.QP().PostRecv([]uverbs.RecvWR{{ID: 1, SGL: []uverbs.SGE{{Addr: uint64(inbox.Addr()), Length: 64, Lkey: inboxMR.Lkey()}}}})
		}))
		if err != nil {
			log.Fatal(err)
		}
		wc := wait(ctx, c.RecvCQ())
		got <- string(inbox.Bytes()[:wc.ByteLen])
		c.WaitDisconnect(ctx)
		inboxMR.Close()
		inbox.Close()
		c.Close()
	}()

	// Client: dial, send "hello", disconnect.
	c, err := rdmacm.Dial(ctx, "10.99.0.1:7471")
	if err != nil {
		log.Fatal(err)
	}
	msg, err := uverbs.AllocBuffer(64)
	if err != nil {
		log.Fatal(err)
	}
	mr, err := c.PD().RegisterBuffer(msg, 0, 64, uverbs.AccessLocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	n := copy(msg.Bytes(), "hello")
	err = c.QP().PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{{Addr: uint64(msg.Addr()), Length: uint32(n), Lkey: mr.Lkey()}}}})
	if err != nil {
		log.Fatal(err)
	}
	wait(ctx, c.SendCQ())
	fmt.Println(<-got)
	mr.Close()
	msg.Close()
	c.Close() // disconnects: the server's WaitDisconnect returns
}

// wait polls cq for one successful completion.
func wait(ctx context.Context, cq *uverbs.CQ) uverbs.WC {
	wc := make([]uverbs.WC, 1)
	for ctx.Err() == nil {
		n, err := cq.Poll(wc)
		if err != nil {
			log.Fatal(err)
		}
		if n == 1 {
			if wc[0].Status != 0 {
				log.Fatalf("completion: %v", wc[0].Status)
			}
			return wc[0]
		}
		time.Sleep(50 * time.Microsecond)
	}
	log.Fatal(ctx.Err())
	return uverbs.WC{}
}
