// Package rsocket is a net.Conn over RDMA that speaks librdmacm's rsocket
// stream protocol (rdma-core's rsocket.c, docs/rsocket) in pure Go: a Go
// program talks to C programs using rsockets (rstream, riostream, anything
// run under librspreload) and to other Go programs, with no
// librdmacm and no cgo.
//
//	l, err := rsocket.Listen(ctx, "10.99.0.1:7471")
//	c, err := l.Accept()                          // a net.Conn
//
//	c, err := rsocket.Dial(ctx, "10.99.0.1:7471") // a *rsocket.Conn, a net.Conn
//	defer c.Close()
//
// # The protocol
//
// The connection is made by the RDMA connection manager (package rdmacm)
// in the TCP port space, whose port numbers are apart from the kernel's TCP
// ports. Each side's request or reply carries 40 bytes of connection data:
// version 1, the credits (receive queue depth), where the peer writes
// buffer offers (a two-entry SGL), and the first half of its receive ring.
// Bytes travel as RDMA WRITE WITH IMMEDIATE straight into the peer's ring;
// the immediate says what the message is (data of n bytes, a credit update
// that may come with the offer of the other half of the ring, shutdown,
// disconnect). A sender needs a credit per message and room in the half it
// was offered; the receiver offers a half again once the application has
// read it. Every message from the peer is checked: one it had no right to
// send ends that connection with an error, never more.
//
// # net.Conn
//
// Conn implements net.Conn: deadlines (os.ErrDeadlineExceeded; a
// connection stays usable after a read deadline), Close from any
// goroutine unblocking Read and Write, CloseWrite (the protocol's
// shutdown: the peer reads EOF and may keep sending). No goroutine
// processes completions (one per connection only waits for the CM's
// disconnect; a flush of staged bytes, below, is the exception): a Read
// or Write that cannot go on polls the connection's
// CQ itself, as librdmacm's callers do: 10 µs back to back,
// then yielding the CPU between polls up to Config.PollTime (300 µs;
// 10 µs while data moves in messages of 16 KiB or more). Then one of
// them at a time arms the CQ and sleeps on the completion channel,
// parked on the Go netpoller, so that a waiting connection holds no
// thread. Completions nobody needs yet wait in the CQ. The polling budget
// is counted from when a Read or Write first had to wait, as librdmacm
// counts its own. Data messages ask for a completion one in 16, and
// whenever the writer would otherwise wait for a send slot or for staging
// room, or a quarter of the staging ring waits on sends without one
// (librdmacm asks for one per message; the peer sees no difference),
// so that a writer waiting for credits is not woken by its own sends.
//
// Writes coalesce, as TCP's do: when no message can go (the peer's
// credits or ring, or the send queue, are used up), Write copies what
// fits into the send ring and returns, and waits only while the ring is
// full. The staged bytes go, with later Writes', in messages of up to 64
// KiB as soon as completions allow, sent by whoever polls: the next Write,
// a Read, CloseWrite or Close (which send them before their shutdown or
// disconnect), or, when none does, a flush that starts 200 µs after the
// Write. Many small Writes to a busy peer so become few large messages;
// librdmacm's rsend sends one message per call, and waits.
//
// Config has rsocket's options: ring sizes (SO_SNDBUF/SO_RCVBUF give
// rsocket rings of twice their value), inline size, QP depths, keepalive
// (SO_KEEPALIVE with TCP_KEEPIDLE: Config.KeepAlive), and how long a
// wait polls (Config.PollTime; librdmacm's polling_time is 10 µs).
//
// # iomap
//
// rsockets also let one side write straight into memory of the other's,
// riostream's way: Conn.MapIO (riomap) maps new memory of this side at
// a range of offsets and sends the mapping to the peer, whose
// Conn.WriteIO (riowrite) then writes there by plain RDMA writes that
// this side's CPU never sees. Config.IOMapSize is how many of the peer's
// mappings a side takes (RDMA_IOMAPSIZE; 0, none, by default). The
// written data is in place once stream data the writer sent after it
// arrives (a byte it wrote last taking its value, which riostream waits
// for, is not enough on rxe: see IOMap):
//
//	m, err := c.MapIO(1<<20, 0)            // the peer may write offsets 0..1 MiB-1
//	c.Write(hello)                         // the mapping goes ahead of it
//	...
//	n, err := peer.WriteIO(data, 4096)     // on the peer, once it read hello
//
// # Addresses
//
// Use the IP address of a netdev with an RDMA device (for Soft-RoCE the
// netdev given to `rdma link add`); 127.0.0.1 does not work on RoCE.
package rsocket
