package rdmacm_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"sync"
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

// The low-level API, as librdmacm's: the server takes the request's event
// and accepts with a QP it creates on the new ID; the client resolves,
// creates its QP, connects. Each ID's events arrive on its own Event.
func ExampleEventChannel() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch, err := rdmacm.NewEventChannel()
	if err != nil {
		log.Fatal(err)
	}
	defer ch.Close() // destroys every ID left on it

	listener, err := ch.CreateID(rdmacm.PortSpaceTCP, 0)
	if err != nil {
		log.Fatal(err)
	}
	if err := listener.Bind(netip.MustParseAddrPort("10.99.0.1:0")); err != nil {
		log.Fatal(err)
	}
	if err := listener.Listen(0); err != nil {
		log.Fatal(err)
	}

	// newQP gives an ID a QP on its device, with a PD and a CQ, freed by
	// the cleanups at the end (before ch.Close destroys the IDs).
	var mu sync.Mutex
	var cleanups []func()
	newQP := func(id *rdmacm.ID) {
		vc, err := id.Context()
		if err != nil {
			log.Fatal(err)
		}
		pd, err := vc.AllocPD()
		if err != nil {
			log.Fatal(err)
		}
		cq, err := vc.CreateCQ(8, nil)
		if err != nil {
			log.Fatal(err)
		}
		qp, err := id.CreateQP(pd, uverbs.QPInitAttr{SendCQ: cq, RecvCQ: cq,
			Cap: uverbs.QPCap{MaxSendWr: 4, MaxRecvWr: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			log.Fatal(err)
		}
		_ = qp // post work requests on it
		mu.Lock()
		cleanups = append(cleanups, func() { id.DestroyQP(); cq.Close(); pd.Close() })
		mu.Unlock()
	}

	server := make(chan string, 1)
	go func() {
		ev, err := listener.Event(ctx)
		if err != nil || ev.Type != rdmacm.EventConnectRequest {
			log.Fatal(ev.Type, err)
		}
		conn := ev.ID // the new connection's ID
		newQP(conn)
		if err := conn.Accept(nil); err != nil {
			log.Fatal(err)
		}
		ev, err = conn.WaitFor(ctx, rdmacm.EventEstablished)
		if err != nil {
			log.Fatal(err)
		}
		server <- fmt.Sprintf("server: %v from %v", ev.Type, conn.RemoteAddr().Addr())
	}()

	client, err := ch.CreateID(rdmacm.PortSpaceTCP, 0)
	if err != nil {
		log.Fatal(err)
	}
	dst := netip.AddrPortFrom(netip.MustParseAddr("10.99.0.1"), listener.LocalAddr().Port())
	if err := client.ResolveAddr(ctx, netip.MustParseAddrPort("10.99.0.2:0"), dst); err != nil {
		log.Fatal(err)
	}
	if err := client.ResolveRoute(ctx); err != nil {
		log.Fatal(err)
	}
	newQP(client)
	ev, err := client.Connect(ctx, &rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("client:", ev.Type)
	fmt.Println(<-server)
	client.Disconnect()
	mu.Lock()
	defer mu.Unlock()
	for _, f := range cleanups {
		f()
	}
}
