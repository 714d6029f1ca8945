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
