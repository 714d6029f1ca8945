package main

import (
	"bytes"
	"context"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/internal/testvm/vmproc"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// TestCMControlPeerLeavesVM: a control message the peer never
// acknowledges ends when the peer disconnects, instead of waiting for an
// acknowledgement that cannot come (errPeerLeft). The peer here accepts
// the control connection with no receive posted, so the client's first
// message is refused with RNR NAKs, retried for ever (RNR retry 7), until
// the peer disconnects.
func TestCMControlPeerLeavesVM(t *testing.T) {
	requireVM(t)
	vmenv.RequireCM(t)
	port := vmproc.FreePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()

	ch, err := rdmacm.NewEventChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	l, err := ch.CreateID(rdmacm.PortSpaceTCP, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Bind(netip.AddrPortFrom(netip.MustParseAddr(vmenv.AddrA), uint16(port))); err != nil {
		t.Fatal(err)
	}
	if err := l.Listen(1); err != nil {
		t.Fatal(err)
	}
	peerErr := make(chan error, 1)
	go func() { peerErr <- acceptAndLeave(ctx, l, 500*time.Millisecond) }()

	var out, errb bytes.Buffer
	args := []string{"ibperf", "send_lat", "-R", "-n", "10", "-d", vmenv.RXE0, "-x", strconv.Itoa(vmenv.GIDIndex),
		"-p", strconv.Itoa(port), vmenv.AddrA}
	exit := runContext(ctx, args, &out, &errb, nil)
	if err := <-peerErr; err != nil {
		t.Fatalf("peer: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("the client ran until the test's deadline (%v): exit %d\nstderr:\n%s", runTimeout, exit, errb.String())
	}
	if exit == 0 || !strings.Contains(errb.String(), errPeerLeft.Error()) {
		t.Errorf("exit %d, want 1 with %q\nstdout:\n%s\nstderr:\n%s", exit, errPeerLeft, out.String(), errb.String())
	}
}

// acceptAndLeave accepts one connection on l with a QP that has no
// receive posted, waits for it to be established, lingers and
// disconnects.
func acceptAndLeave(ctx context.Context, l *rdmacm.ID, linger time.Duration) error {
	ev, err := l.WaitFor(ctx, rdmacm.EventConnectRequest)
	if err != nil {
		return err
	}
	id := ev.ID
	defer id.Close()
	dev, err := id.Context()
	if err != nil {
		return err
	}
	pd, err := dev.AllocPD()
	if err != nil {
		return err
	}
	defer pd.Close()
	cq, err := dev.CreateCQ(4, nil)
	if err != nil {
		return err
	}
	defer cq.Close()
	if _, err := id.CreateQP(pd, uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: uverbs.QPCap{MaxSendWr: 1, MaxRecvWr: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return err
	}
	defer id.DestroyQP()
	if err := id.Accept(&rdmacm.ConnParam{RetryCount: 7, RNRRetryCount: 7}); err != nil {
		return err
	}
	if _, err := id.WaitFor(ctx, rdmacm.EventEstablished); err != nil {
		return err
	}
	time.Sleep(linger)
	return id.Disconnect()
}
