package rdmacm

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// TestCaptureEventSeedsVM records the raw GET_EVENT responses of a run
// through RC (request, reply, established, reject, disconnect), UD (SIDR)
// and multicast, and an unreachable address, as fuzz seeds. It runs only
// with GOVERBS_RDMACM_CAPTURE=1 and prints "SEED <event> <hex>" lines; copy them
// into testdata/fuzz/FuzzParseEvent with the command in its log.
func TestCaptureEventSeedsVM(t *testing.T) {
	if os.Getenv("GOVERBS_RDMACM_CAPTURE") == "" {
		t.Skip("set GOVERBS_RDMACM_CAPTURE=1 to record fuzz seeds")
	}
	requireCM(t)
	var mu sync.Mutex
	seen := make(map[string]bool)
	phase := "rc"
	eventHook = func(b []byte) {
		ev, _ := parseEvent(b)
		mu.Lock()
		key := fmt.Sprintf("%s-%v-%d", phase, ev.typ, ev.status)
		defer mu.Unlock()
		if !seen[key] {
			seen[key] = true
			fmt.Printf("SEED %s-%s %s\n", vmenv.KernelName(), key, hex.EncodeToString(b))
		}
	}
	defer func() { eventHook = nil }()
	ctx := testCtx(t, 60*time.Second)
	cli, srv := pair(t, ctx, vmenv.AddrA, vmenv.AddrB, []Option{WithPrivateData([]byte("seed request"))},
		[]Option{WithPrivateData([]byte("seed reply"))})
	cli.Close()
	srv.WaitDisconnect(ctx)
	srv.Close()
	setPhase := func(p string) { mu.Lock(); phase = p; mu.Unlock() }
	setPhase("ud")
	ucli, usrv := pair(t, ctx, vmenv.AddrA, vmenv.AddrB, []Option{WithUD(), WithPrivateData([]byte("ud seed"))},
		[]Option{WithUD(), WithPrivateData([]byte("ud reply"))})
	ucli.Close()
	usrv.Close()
	setPhase("rc")
	l, _ := Listen(ctx, vmenv.AddrA+":0")
	go func() {
		if r, err := l.Request(ctx); err == nil {
			r.Reject([]byte("rejected seed"))
		}
	}()
	Dial(ctx, l.Addr().String(), WithSource(vmenv.AddrB))
	l.Close()
	Dial(ctx, vmenv.AddrA+":7999", WithSource(vmenv.AddrB))
	setPhase("mc")
	ch, _ := NewEventChannel()
	defer ch.Close()
	e := newUDEnd(t, ctx, ch, vmenv.AddrB, "239.1.2.4")
	if mc, err := e.id.JoinMulticast(ctx, netip.MustParseAddr("239.1.2.4"), false); err == nil {
		mc.Leave()
	}
	sctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	Dial(sctx, "10.99.0.77:1", WithSource(vmenv.AddrB))
	time.Sleep(time.Second) // TIMEWAIT_EXIT of closed IDs is never seen: they are gone
}
