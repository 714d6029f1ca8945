package streamtool

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/goverbs/goverbs/rsocket"
)

// ioTest runs one riostream test (its run_test): each side maps a buffer
// of size bytes at offset 0 with its last byte 0xFF, and a 16-byte message
// each way, the client's first, carries the mappings ahead of it. Per
// iteration the client writes its buffer into the server's count times,
// the last time with the marker in the last byte (and, under -T v, the
// pattern in the rest), and waits for the server's next marker in its own
// buffer; the server does the same the other way round.
func (o *options) ioTest(c *rsocket.Conn, name string, size, count, iters int) error {
	m, err := c.MapIO(size, 0)
	if err != nil {
		return fmt.Errorf("riomap: %w", err)
	}
	defer m.Close() // riounmap
	buf := m.Bytes()
	buf[size-1] = 0xFF
	client := o.dst != ""
	for _, send := range []bool{client, !client} {
		if err := o.ioSync(c, send); err != nil {
			return err
		}
	}
	var marker uint8
	start := time.Now()
	for i := 0; i < iters; i++ {
		for _, send := range []bool{client, !client} {
			if send {
				err = o.ioSend(c, m, count, &marker)
			} else {
				err = o.ioRecv(c, m, &marker)
			}
			if err != nil {
				return err
			}
		}
	}
	o.show(name, time.Since(start), size, count, iters)
	return nil
}

// ioSync sends or receives riostream's 16-byte message. riostream sends
// the first 16 bytes of its buffer and receives into them, so that a
// buffer of 16 bytes or less has its marker byte among them: this side
// sends 0xFF, what that byte holds then, and receives apart from its own.
func (o *options) ioSync(c *rsocket.Conn, send bool) error {
	var b [16]byte
	if send {
		for i := range b {
			b[i] = 0xFF
		}
		_, err := c.Write(b[:])
		return err
	}
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return fmt.Errorf("rrecv: %w", err)
	}
	return nil
}

// ioSend writes the buffer into the peer's count times, the last time
// with the next marker in its last byte (riostream's send_xfer loop).
func (o *options) ioSend(c *rsocket.Conn, m *rsocket.IOMap, count int, marker *uint8) error {
	buf := m.Bytes()
	for t := 0; t < count; t++ {
		if t == count-1 {
			buf[len(buf)-1] = *marker
			*marker++
			if o.verify {
				for i := range buf[:len(buf)-1] {
					buf[i] = o.txSeq
					o.txSeq++
				}
			}
		}
		if _, err := c.WriteIO(buf, 0); err != nil {
			return fmt.Errorf("riowrite: %w", err)
		}
	}
	return nil
}

// livenessEvery is how many reads of the marker byte go between two looks
// at the connection (riostream spins for ever on a peer that is gone).
const livenessEvery = 1 << 14

// ioRecv waits for the next marker in the buffer's last byte and checks
// the pattern under -T v (riostream's recv_xfer).
func (o *options) ioRecv(c *rsocket.Conn, m *rsocket.IOMap, marker *uint8) error {
	want := *marker
	*marker++
	last := m.Len() - 1
	for spins := 1; m.Load(last) != want; spins++ {
		if spins%livenessEvery == 0 {
			if err := alive(c); err != nil {
				// A peer that wrote its last transfer and closed: RC
				// delivers the write before the disconnect, so the
				// marker may have landed since the load above.
				if m.Load(last) == want {
					break
				}
				return fmt.Errorf("waiting for the peer's transfer: %w", err)
			}
		}
	}
	if o.verify {
		for i, v := range m.Bytes()[:last] {
			if v != o.rxSeq {
				fmt.Fprintf(o.stdout, "data verification failed byte %d\n", o.rxTotal+int64(i))
				return errors.New("data verification failed")
			}
			o.rxSeq++
		}
		o.rxTotal += int64(last)
	}
	return nil
}

// alive reports an error if the connection failed or the peer left: a
// Read due a microsecond from now takes what came in (the peer's shutdown
// or disconnect among it) and says so, or that the deadline passed.
func alive(c *rsocket.Conn) error {
	c.SetReadDeadline(time.Now().Add(time.Microsecond))
	defer c.SetReadDeadline(time.Time{})
	var b [1]byte
	n, err := c.Read(b[:])
	switch {
	case n > 0:
		return errors.New("the peer sent stream data during a transfer")
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil
	case err == io.EOF:
		return errors.New("the peer closed the connection")
	}
	return err
}
