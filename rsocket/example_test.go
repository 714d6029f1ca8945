package rsocket_test

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/goverbs/goverbs/rsocket"
)

// A server echoes one connection; a client sends a line and reads it back.
// It needs an RDMA device on 10.99.0.1 (the test VM's rxe0).
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := rsocket.Listen(ctx, "10.99.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c) // echo until the client's CloseWrite
	}()

	c, err := rsocket.Dial(ctx, l.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	io.WriteString(c, "hello over RDMA\n")
	c.CloseWrite()
	reply, err := io.ReadAll(c)
	fmt.Printf("%s%v\n", reply, err)
}

// The server maps a buffer; the client writes into it with WriteIO and
// then sends a line, which the server reads before it looks at the buffer.
// It needs an RDMA device on 10.99.0.1 (the test VM's rxe0).
func ExampleConn_MapIO() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := rsocket.Config{IOMapSize: 1} // each side takes one mapping of the other's
	lc := rsocket.ListenConfig{Config: cfg}
	l, err := lc.Listen(ctx, "10.99.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := l.AcceptRSocket()
		if err != nil {
			fmt.Println(err)
			return
		}
		defer c.Close()
		m, err := c.MapIO(4096, 0) // the client may write offsets 0..4095
		if err != nil {
			fmt.Println(err)
			return
		}
		io.WriteString(c, "mapped\n") // goes after the mapping
		line := make([]byte, len("written\n"))
		io.ReadFull(c, line) // the client's note, sent after its WriteIO
		fmt.Printf("server: %q\n", m.Bytes()[100:105])
	}()

	d := rsocket.Dialer{Config: cfg}
	c, err := d.Dial(ctx, l.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	line := make([]byte, len("mapped\n"))
	io.ReadFull(c, line)
	n, err := c.WriteIO([]byte("hello"), 100)
	fmt.Println("client wrote", n, err)
	io.WriteString(c, "written\n")
	<-done
}
