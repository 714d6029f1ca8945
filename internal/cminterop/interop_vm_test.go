package cminterop

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/grh"
	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// Every test runs across the veth pair (the client or sender on rxe1,
// 10.99.0.2; the server or receiver on rxe0, 10.99.0.1) and on one device
// (both on rxe0).
var placements = []struct {
	name string
	src  string // the client's (sender's) address
}{
	{"rxe1-to-rxe0", vmenv.AddrB},
	{"rxe0", vmenv.AddrA},
}

// TestUcmatoseInteropVM: ucmatose -c 10 (RC, ten connections, ten
// messages each way on each) against the Go peer in both roles.
func TestUcmatoseInteropVM(t *testing.T) {
	requireVM(t)
	const conns, count, size = 10, 10, 100
	port := ucmatosePort
	for _, pl := range placements {
		t.Run(pl.name+"/go-server", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			port++
			setup := newSetup(count, size)
			l, err := rdmacm.Listen(ctx, vmenv.AddrA+":"+strconv.Itoa(port), setup.option(),
				rdmacm.WithQPCap(uverbs.QPCap{MaxSendWr: count, MaxRecvWr: count, MaxSendSGE: 1, MaxRecvSGE: 1}))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			srv := make(chan error, 1)
			go func() { srv <- ucmatoseServer(ctx, l, setup, conns, count, size) }()
			c := <-startC(ctx, t, "ucmatose", "-s", vmenv.AddrA, "-b", pl.src, "-p", strconv.Itoa(port),
				"-c", strconv.Itoa(conns), "-C", strconv.Itoa(count), "-S", strconv.Itoa(size))
			if err := <-srv; err != nil {
				t.Errorf("Go server: %v", err)
			}
			checkC(t, "ucmatose client", c, "receiving data transfers", "sending replies", "data transfers complete", "return status 0")
		})
		t.Run(pl.name+"/go-client", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			port++
			done := startC(ctx, t, "ucmatose", "-b", vmenv.AddrA, "-p", strconv.Itoa(port),
				"-c", strconv.Itoa(conns), "-C", strconv.Itoa(count), "-S", strconv.Itoa(size))
			waitListening(ctx, t, "TCP", port, done)
			if err := ucmatoseClient(ctx, vmenv.AddrA+":"+strconv.Itoa(port), pl.src, conns, count, size); err != nil {
				t.Errorf("Go client: %v", err)
				cancel()
			}
			checkC(t, "ucmatose server", <-done, "initiating data transfers", "completing sends", "receiving data transfers",
				"data transfers complete", "disconnected", "return status 0")
		})
	}
}

// TestUdaddyInteropVM: udaddy (UD through SIDR, ten datagrams each way)
// against the Go peer in both roles.
func TestUdaddyInteropVM(t *testing.T) {
	requireVM(t)
	const conns, count, size = 1, 10, 100
	for _, pl := range placements {
		t.Run(pl.name+"/go-server", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			setup := newSetup(count, size+grh.Size)
			l, err := rdmacm.Listen(ctx, vmenv.AddrA+":"+strconv.Itoa(udaddyPort), rdmacm.WithUD(), setup.option(),
				rdmacm.WithQPCap(uverbs.QPCap{MaxSendWr: count, MaxRecvWr: count, MaxSendSGE: 1, MaxRecvSGE: 1}))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			srv := make(chan error, 1)
			go func() { srv <- udaddyServer(ctx, l, setup, conns, count, size) }()
			c := <-startC(ctx, t, "udaddy", "-s", vmenv.AddrA, "-b", pl.src, "-c", strconv.Itoa(conns),
				"-C", strconv.Itoa(count), "-S", strconv.Itoa(size))
			if err := <-srv; err != nil {
				t.Errorf("Go server: %v", err)
			}
			checkC(t, "udaddy client", c, "initiating data transfers", "receiving data transfers", "data transfers complete", "return status 0")
		})
		t.Run(pl.name+"/go-client", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			done := startC(ctx, t, "udaddy", "-b", vmenv.AddrA, "-c", strconv.Itoa(conns),
				"-C", strconv.Itoa(count), "-S", strconv.Itoa(size))
			waitListening(ctx, t, "UDP", udaddyPort, done)
			if err := udaddyClient(ctx, vmenv.AddrA+":"+strconv.Itoa(udaddyPort), pl.src, conns, count, size); err != nil {
				t.Errorf("Go client: %v", err)
				cancel()
			}
			checkC(t, "udaddy server", <-done, "receiving data transfers", "sending replies", "data transfers complete", "return status 0")
		})
	}
}

// TestMckeyInteropVM: mckey's multicast (ten datagrams to an IPv4 group)
// with a Go sender to mckey's receiver and mckey's sender to a Go
// receiver.
func TestMckeyInteropVM(t *testing.T) {
	requireVM(t)
	const count, size = 10, 100
	groups := []string{"239.1.1.11", "239.1.1.12", "239.1.1.13", "239.1.1.14"}
	k := 0
	for _, pl := range placements {
		recvAddr := vmenv.AddrA
		t.Run(pl.name+"/go-sender", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			group := groups[k]
			k++
			done := startC(ctx, t, "mckey", "-m", group, "-b", recvAddr, "-C", strconv.Itoa(count), "-S", strconv.Itoa(size))
			// mckey joins, then sleeps 3 s before it polls: send once it
			// has joined (a sent datagram nobody receives is lost).
			waitJoined(ctx, t, group)
			m, err := joinGroup(ctx, netip.MustParseAddr(pl.src), netip.MustParseAddr(group), false, count, size)
			if err != nil {
				t.Fatalf("Go sender: join: %v", err)
			}
			defer m.close()
			if err := m.send(ctx, count, size); err != nil {
				t.Errorf("Go sender: %v", err)
			}
			r := <-done
			checkC(t, "mckey receiver", r, "receiving data transfers", "data transfers complete", "return status 0")
			if want := "mckey: joined dgid: ::ffff:" + group; !strings.Contains(r.Stdout, want) {
				t.Errorf("mckey receiver did not print %q:\n%s", want, r.Stdout)
			}
		})
		t.Run(pl.name+"/go-receiver", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			group := groups[k]
			k++
			m, err := joinGroup(ctx, netip.MustParseAddr(recvAddr), netip.MustParseAddr(group), true, count, size)
			if err != nil {
				t.Fatalf("Go receiver: join: %v", err)
			}
			defer m.close()
			if got, want := m.mc.MGID(), uverbs.GID(netip.MustParseAddr("::ffff:"+group).As16()); got != want {
				t.Errorf("MGID %v, want %v", got, want)
			}
			// mckey's sender posts its datagrams unsignaled and at once
			// leaves the group and destroys its QP. On 6.12, where rxe
			// sends from a work item, the QP was often gone before any of
			// its datagrams left (the sender's device counted 0 of 10
			// under load). So the sender runs traced: after its sleep each
			// write (rxe's doorbell per post, librdmacm's leave) waits
			// 50 ms, time for the work item to send. Its device's packet
			// counter must then show every datagram sent, and the
			// receiver, which polls once the sender has ended (the
			// datagrams wait in its receive queue), must get them all.
			before := sentPkts(pl.src)
			r := runSlowWrites(ctx, t, 50*time.Millisecond, "mckey", "-m", group, "-b", pl.src, "-s", "-C", strconv.Itoa(count), "-S", strconv.Itoa(size))
			checkC(t, "mckey sender", r, "initiating data transfers", "data transfers complete", "return status 0")
			sent := sentPkts(pl.src) - before
			if sent < count {
				t.Fatalf("mckey's sender destroyed its QP when rxe had sent %d of its %d datagrams (%s)", sent, count, counters())
			}
			rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
			defer rcancel()
			if err := m.receive(rctx, count, size); err != nil {
				t.Errorf("Go receiver: %v (%d sent, %s)", err, sent, counters())
			}
		})
	}
}

// waitJoined waits until an rdma_cm ID resolved towards the group shows
// in the kernel's connection manager (for 3 s at most: mckey's output is
// not seen before it exits), then half a second more for its join.
func waitJoined(ctx context.Context, t *testing.T, group string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !mcJoined(group) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for a member of %s: %v", group, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	time.Sleep(500 * time.Millisecond)
}

func mcJoined(group string) bool {
	out, err := exec.Command("rdma", "resource", "show", "cm_id").Output()
	return err == nil && strings.Contains(string(out), fmt.Sprintf("dst-addr %s:", group))
}

// counters is what the devices counted, for a failure's message.
func counters() string {
	var b strings.Builder
	for _, dev := range []string{vmenv.RXE0, vmenv.RXE1} {
		for _, c := range []string{"sent_pkts", "rcvd_pkts"} {
			v, _ := os.ReadFile("/sys/class/infiniband/" + dev + "/ports/1/hw_counters/" + c)
			fmt.Fprintf(&b, "%s %s %s ", dev, c, strings.TrimSpace(string(v)))
		}
	}
	return strings.TrimSpace(b.String())
}

// sentPkts is the packets sent by the device of the address (rxe0's or
// rxe1's), a loopback included.
func sentPkts(addr string) int {
	dev := vmenv.RXE0
	if addr == vmenv.AddrB {
		dev = vmenv.RXE1
	}
	v, _ := os.ReadFile("/sys/class/infiniband/" + dev + "/ports/1/hw_counters/sent_pkts")
	n, _ := strconv.Atoi(strings.TrimSpace(string(v)))
	return n
}
