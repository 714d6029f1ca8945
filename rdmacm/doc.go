// Package rdmacm is the RDMA connection manager in pure Go: it connects
// programs by IP address and port, as librdmacm does, by speaking the
// kernel's ucma ABI on /dev/infiniband/rdma_cm itself (no librdmacm, no
// cgo). It interoperates with librdmacm's peers (rping, ucmatose, udaddy,
// mckey, perftest -R).
//
// # The common case
//
// A server listens and accepts; a client dials. Each Conn holds its
// device's uverbs context and PD (shared by the connections on the device,
// as librdmacm shares them; WithPD gives one of the caller's), its send and
// receive CQs and a QP already in RTS, and the private data the peer sent:
//
//	l, err := rdmacm.Listen(ctx, "10.99.0.1:7471")
//	c, err := l.Accept(ctx)          // server
//
//	c, err := rdmacm.Dial(ctx, "10.99.0.1:7471", rdmacm.WithPrivateData([]byte("hello")))
//	defer c.Close()                  // disconnects, frees QP, CQs, ID
//
// Post receives before the peer may send with WithSetup. Listener.Request
// shows a request's private data before accepting or rejecting it; a
// rejected Dial returns a *RejectedError carrying the peer's private data
// (errors.Is(err, unix.ECONNREFUSED) holds, as it does when nobody listens
// on the port). WithUD makes a UD "connection": Dial resolves the
// listener's QP number and Q_Key by SIDR and makes an AH to it.
//
// # The low-level API
//
// EventChannel and ID mirror librdmacm's rdma_event_channel and rdma_cm_id
// for full control: Bind, ResolveAddr, ResolveRoute, Listen, Connect,
// Accept, Reject, Disconnect, JoinMulticast, Query, options. An ID's QP can
// be made by CreateQP (moved through INIT, RTR and RTS with the kernel's
// attributes, exactly as librdmacm), or by the caller, who drives it with
// InitQPAttr and calls Establish.
//
// Each ID has its own queue of events, filled by a goroutine that reads the
// channel parked on the Go netpoller. Every wait takes a context.Context.
// Events are copied values: nothing needs acknowledging, so destroying an
// ID never waits (librdmacm's rdma_destroy_id blocks until every event is
// acknowledged), and once Close returns no event is delivered for the ID.
//
// # Addresses
//
// Use the IP address of the netdev an RDMA device is on (for Soft-RoCE,
// the netdev given to `rdma link add`). 127.0.0.1 does not work on RoCE.
// An address no RDMA device owns gives a *NoDeviceError naming the netdevs
// that have one.
package rdmacm
