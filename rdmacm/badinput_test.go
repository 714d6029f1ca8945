package rdmacm

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/uverbs"
)

// badInput is one row of the package's bad-input table: the call must
// return an error matching want whose text names field, never panic.
type badInput struct {
	name  string
	cm    bool // needs the connection manager (runs in the VM only)
	call  func(t *testing.T, env *badEnv) error
	want  error
	field string
}

// badEnv holds what the rows that need the connection manager use.
type badEnv struct {
	ch       *EventChannel
	fresh    func(ps PortSpace) *ID // a new ID, closed at the end
	resolved func(ps PortSpace) *ID // an ID with its route resolved
}

var nilCtx context.Context // a nil context, for the rows that pass one

var badInputs = []badInput{
	{name: "Dial nil context", call: func(*testing.T, *badEnv) error { _, err := Dial(nilCtx, "10.99.0.1:1"); return err },
		want: unix.EINVAL, field: "nil context"},
	{name: "Listen nil context", call: func(*testing.T, *badEnv) error { _, err := Listen(nilCtx, ":1"); return err },
		want: unix.EINVAL, field: "nil context"},
	{name: "Dial no port", call: func(*testing.T, *badEnv) error { _, err := Dial(context.Background(), "10.99.0.1"); return err },
		want: unix.EINVAL, field: `"10.99.0.1"`},
	{name: "Dial not an address", call: func(*testing.T, *badEnv) error { _, err := Dial(context.Background(), "rdma!:1"); return err },
		want: unix.EINVAL, field: `"rdma!"`},
	{name: "Dial port out of range", call: func(*testing.T, *badEnv) error {
		_, err := Dial(context.Background(), "10.99.0.1:70000")
		return err
	}, want: unix.EINVAL, field: "port"},
	{name: "Dial unspecified", call: func(*testing.T, *badEnv) error { _, err := Dial(context.Background(), "0.0.0.0:1"); return err },
		want: unix.EINVAL, field: "unspecified"},
	{name: "Dial nil option", call: func(*testing.T, *badEnv) error {
		_, err := Dial(context.Background(), "10.99.0.1:1", nil)
		return err
	}, want: unix.EINVAL, field: "option 0"},
	{name: "WithPrivateData too long", call: func(*testing.T, *badEnv) error {
		_, err := Dial(context.Background(), "10.99.0.1:1", WithPrivateData(make([]byte, 197)))
		return err
	}, want: unix.EINVAL, field: "WithPrivateData"},
	{name: "WithRetryCount 8", call: func(*testing.T, *badEnv) error {
		_, err := Dial(context.Background(), "10.99.0.1:1", WithRetryCount(8))
		return err
	}, want: unix.EINVAL, field: "WithRetryCount"},
	{name: "WithRNRRetryCount 9", call: func(*testing.T, *badEnv) error {
		_, err := Dial(context.Background(), "10.99.0.1:1", WithRNRRetryCount(9))
		return err
	}, want: unix.EINVAL, field: "WithRNRRetryCount"},
	{name: "WithAckTimeout 32", call: func(*testing.T, *badEnv) error {
		_, err := Dial(context.Background(), "10.99.0.1:1", WithAckTimeout(32))
		return err
	}, want: unix.EINVAL, field: "WithAckTimeout"},
	{name: "WithSource not an address", call: func(*testing.T, *badEnv) error {
		_, err := Dial(context.Background(), "10.99.0.1:1", WithSource("eth0"))
		return err
	}, want: unix.EINVAL, field: "WithSource"},
	{name: "WithCQSize 0", call: func(*testing.T, *badEnv) error {
		_, err := Dial(context.Background(), "10.99.0.1:1", WithCQSize(0, 1))
		return err
	}, want: unix.EINVAL, field: "WithCQSize"},
	{name: "WithPD nil", call: func(*testing.T, *badEnv) error {
		_, err := Dial(context.Background(), "10.99.0.1:1", WithPD(nil))
		return err
	}, want: unix.EINVAL, field: "WithPD"},
	{name: "WithSetup nil", call: func(*testing.T, *badEnv) error {
		_, err := Dial(context.Background(), "10.99.0.1:1", WithSetup(nil))
		return err
	}, want: unix.EINVAL, field: "WithSetup"},
	{name: "WithBacklog negative", call: func(*testing.T, *badEnv) error {
		_, err := Listen(context.Background(), ":1", WithBacklog(-1))
		return err
	}, want: unix.EINVAL, field: "WithBacklog"},
	{name: "nil EventChannel", call: func(*testing.T, *badEnv) error {
		_, err := (*EventChannel)(nil).CreateID(PortSpaceTCP, 0)
		return err
	}, want: unix.EINVAL, field: "nil EventChannel"},
	{name: "nil ID Bind", call: func(*testing.T, *badEnv) error { return (*ID)(nil).Bind(netip.AddrPort{}) },
		want: unix.EINVAL, field: "nil ID"},
	{name: "nil ID Connect", call: func(*testing.T, *badEnv) error { _, err := (*ID)(nil).Connect(context.Background(), nil); return err },
		want: unix.EINVAL, field: "nil ID"},
	{name: "nil ID Event", call: func(*testing.T, *badEnv) error { _, err := (*ID)(nil).Event(context.Background()); return err },
		want: unix.EINVAL, field: "nil ID"},
	{name: "nil Listener Request", call: func(*testing.T, *badEnv) error {
		_, err := (*Listener)(nil).Request(context.Background())
		return err
	}, want: unix.EINVAL, field: "nil Listener"},
	{name: "nil Request Accept", call: func(*testing.T, *badEnv) error {
		_, err := (*Request)(nil).Accept(context.Background())
		return err
	}, want: unix.EINVAL, field: "already answered"},
	{name: "CreateQP on a PD with no context", call: func(t *testing.T, _ *badEnv) error {
		// A zero uverbs.PD, on an ID bound to a device (as after ResolveAddr).
		ch, _ := pipeChannel(t)
		id := &ID{ch: ch, ps: PortSpaceTCP, qpType: uverbs.QPTypeRC, notify: make(chan struct{}), dev: &device{name: "rxe0", refs: 1}}
		cq := new(uverbs.CQ)
		_, err := id.CreateQP(new(uverbs.PD), uverbs.QPInitAttr{SendCQ: cq, RecvCQ: cq})
		return err
	}, want: unix.EINVAL, field: "the PD has no context"},
	{name: "UD Reject private data 137", call: func(t *testing.T, _ *badEnv) error {
		// A UD reject is a SIDR REP: 136 bytes.
		ch, _ := pipeChannel(t)
		id := &ID{ch: ch, ps: PortSpaceUDP, qpType: uverbs.QPTypeUD, notify: make(chan struct{})}
		return id.Reject(make([]byte, 137))
	}, want: unix.EINVAL, field: "136"},

	// Rows that need /dev/infiniband/rdma_cm.
	{name: "CreateID bad port space", cm: true, call: func(t *testing.T, e *badEnv) error {
		_, err := e.ch.CreateID(PortSpace(7), 0)
		return err
	}, want: unix.EINVAL, field: "PortSpace"},
	{name: "CreateID UD on TCP", cm: true, call: func(t *testing.T, e *badEnv) error {
		_, err := e.ch.CreateID(PortSpaceTCP, uverbs.QPTypeUD)
		return err
	}, want: unix.EINVAL, field: "QPType"},
	{name: "Bind invalid address", cm: true, call: func(t *testing.T, e *badEnv) error {
		return e.fresh(PortSpaceTCP).Bind(netip.AddrPort{})
	}, want: unix.EINVAL, field: "addr"},
	{name: "Bind link-local without zone", cm: true, call: func(t *testing.T, e *badEnv) error {
		return e.fresh(PortSpaceTCP).Bind(netip.MustParseAddrPort("[fe80::1]:0"))
	}, want: unix.EINVAL, field: "zone"},
	{name: "ResolveAddr mixed families", cm: true, call: func(t *testing.T, e *badEnv) error {
		return e.fresh(PortSpaceTCP).ResolveAddr(context.Background(), netip.MustParseAddrPort("10.99.0.2:0"),
			netip.MustParseAddrPort("[2001:db8::1]:1"))
	}, want: unix.EINVAL, field: "different families"},
	{name: "ResolveAddr nil context", cm: true, call: func(t *testing.T, e *badEnv) error {
		return e.fresh(PortSpaceTCP).ResolveAddr(nilCtx, netip.AddrPort{}, netip.MustParseAddrPort("10.99.0.1:1"))
	}, want: unix.EINVAL, field: "nil context"},
	{name: "closed ID Bind", cm: true, call: func(t *testing.T, e *badEnv) error {
		id := e.fresh(PortSpaceTCP)
		id.Close()
		return id.Bind(netip.MustParseAddrPort("10.99.0.1:0"))
	}, want: uverbs.ErrClosed, field: "bind"},
	{name: "closed ID Event", cm: true, call: func(t *testing.T, e *badEnv) error {
		id := e.fresh(PortSpaceTCP)
		id.Close()
		_, err := id.Event(context.Background())
		return err
	}, want: uverbs.ErrClosed, field: "get event"},
	{name: "Connect before resolving", cm: true, call: func(t *testing.T, e *badEnv) error {
		_, err := e.fresh(PortSpaceTCP).Connect(context.Background(), &ConnParam{})
		return err
	}, want: unix.EINVAL, field: "connect"},
	{name: "Accept on an ID that is no request", cm: true, call: func(t *testing.T, e *badEnv) error {
		return e.fresh(PortSpaceTCP).Accept(nil)
	}, want: unix.EINVAL, field: "CONNECT_REQUEST"},
	{name: "Establish unconnected", cm: true, call: func(t *testing.T, e *badEnv) error {
		return e.fresh(PortSpaceTCP).Establish()
	}, want: unix.EINVAL, field: "establish"},
	{name: "Disconnect unconnected", cm: true, call: func(t *testing.T, e *badEnv) error {
		return e.fresh(PortSpaceTCP).Disconnect()
	}, want: unix.EINVAL, field: "disconnect"},
	{name: "CreateQP before binding a device", cm: true, call: func(t *testing.T, e *badEnv) error {
		_, err := e.fresh(PortSpaceTCP).CreateQP(nil, uverbs.QPInitAttr{})
		return err
	}, want: unix.EINVAL, field: "nil PD"},
	{name: "InitQPAttr bad state", cm: true, call: func(t *testing.T, e *badEnv) error {
		_, _, err := e.fresh(PortSpaceTCP).InitQPAttr(9)
		return err
	}, want: unix.EINVAL, field: "state 9"},
	{name: "SetAckTimeout on UD", cm: true, call: func(t *testing.T, e *badEnv) error {
		return e.fresh(PortSpaceUDP).SetAckTimeout(14)
	}, want: unix.EINVAL, field: "ACK_TIMEOUT"},
	{name: "JoinMulticast on RC", cm: true, call: func(t *testing.T, e *badEnv) error {
		_, err := e.fresh(PortSpaceTCP).JoinMulticast(context.Background(), netip.MustParseAddr("239.1.1.1"), false)
		return err
	}, want: unix.EINVAL, field: "UD ID"},
	{name: "JoinMulticast unicast group", cm: true, call: func(t *testing.T, e *badEnv) error {
		_, err := e.fresh(PortSpaceUDP).JoinMulticast(context.Background(), netip.MustParseAddr("10.99.0.1"), false)
		return err
	}, want: unix.EINVAL, field: "not a multicast"},
	{name: "RC connect private data 57", cm: true, call: func(t *testing.T, e *badEnv) error {
		_, err := e.resolved(PortSpaceTCP).Connect(context.Background(), &ConnParam{PrivateData: make([]byte, 57)})
		return err
	}, want: unix.EINVAL, field: "PrivateData is 57 bytes, the most a RC connect carries is 56"},
	{name: "UD connect private data 181", cm: true, call: func(t *testing.T, e *badEnv) error {
		_, err := e.resolved(PortSpaceUDP).Connect(context.Background(), &ConnParam{PrivateData: make([]byte, 181)})
		return err
	}, want: unix.EINVAL, field: "the most a UD connect carries is 180"},
	{name: "Connect RetryCount 8", cm: true, call: func(t *testing.T, e *badEnv) error {
		_, err := e.resolved(PortSpaceTCP).Connect(context.Background(), &ConnParam{RetryCount: 8})
		return err
	}, want: unix.EINVAL, field: "RetryCount"},
	{name: "Connect QPNum over 24 bits", cm: true, call: func(t *testing.T, e *badEnv) error {
		_, err := e.resolved(PortSpaceTCP).Connect(context.Background(), &ConnParam{QPNum: 1 << 24})
		return err
	}, want: unix.EINVAL, field: "QPNum"},
	{name: "Connect ResponderResources above the device", cm: true, call: func(t *testing.T, e *badEnv) error {
		_, err := e.resolved(PortSpaceTCP).Connect(context.Background(), &ConnParam{ResponderResources: 200})
		return err
	}, want: unix.EINVAL, field: "ResponderResources 200"},
	{name: "Migrate to nil", cm: true, call: func(t *testing.T, e *badEnv) error {
		return e.fresh(PortSpaceTCP).Migrate(nil)
	}, want: unix.EINVAL, field: "nil EventChannel"},
	{name: "Reject private data 149", cm: true, call: func(t *testing.T, e *badEnv) error {
		return e.fresh(PortSpaceTCP).Reject(make([]byte, 149))
	}, want: unix.EINVAL, field: "148"},
}

// acceptLimits are the accept-side private data limits, checked on real
// requests: RC 196, UD 136.
func testAcceptLimits(t *testing.T) {
	for _, tc := range []struct {
		ud   bool
		size int
		max  string
	}{{false, 197, "196"}, {true, 137, "136"}} {
		ctx := testCtx(t, 30*time.Second)
		var lopts, dopts []Option
		if tc.ud {
			lopts, dopts = []Option{WithUD()}, []Option{WithUD()}
		}
		l, err := Listen(ctx, vmenv.AddrA+":0", lopts...)
		if err != nil {
			t.Fatal(err)
		}
		dialed := make(chan error, 1)
		go func() {
			_, err := Dial(ctx, l.Addr().String(), append(dopts, WithSource(vmenv.AddrB))...)
			dialed <- err
		}()
		r, err := l.Request(ctx)
		if err != nil {
			t.Fatal(err)
		}
		err = r.ID.Accept(&ConnParam{PrivateData: make([]byte, tc.size)})
		if !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), tc.max) {
			t.Errorf("accept (UD %v) with %d bytes: %v", tc.ud, tc.size, err)
		}
		if err := r.Reject(make([]byte, 149)); !errors.Is(err, unix.EINVAL) {
			t.Errorf("Request.Reject with 149 bytes: %v", err)
		}
		if err := r.Reject(nil); err != nil {
			t.Errorf("Request.Reject after a refused one: %v", err)
		}
		if err := r.Reject(nil); !errors.Is(err, unix.EINVAL) {
			t.Errorf("second Request.Reject: %v", err)
		}
		if err := <-dialed; !errors.Is(err, unix.ECONNREFUSED) {
			t.Errorf("the rejected Dial: %v", err)
		}
		l.Close()
	}
}

// TestBadInput runs the bad-input table: on the host the rows that need no
// connection manager, in the VM all of them.
func TestBadInput(t *testing.T) {
	var env *badEnv
	if vmenv.InVM() {
		requireCM(t)
		ch, err := NewEventChannel()
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		env = &badEnv{ch: ch}
		env.fresh = func(ps PortSpace) *ID {
			id, err := ch.CreateID(ps, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { id.Close() })
			return id
		}
		env.resolved = func(ps PortSpace) *ID {
			id := env.fresh(ps)
			ctx := testCtx(t, 10*time.Second)
			if err := id.ResolveAddr(ctx, netip.MustParseAddrPort(vmenv.AddrB+":0"), netip.MustParseAddrPort(vmenv.AddrA+":7999")); err != nil {
				t.Fatal(err)
			}
			if err := id.ResolveRoute(ctx); err != nil {
				t.Fatal(err)
			}
			return id
		}
	}
	for _, row := range badInputs {
		t.Run(row.name, func(t *testing.T) {
			if row.cm && env == nil {
				t.Skip("needs /dev/infiniband/rdma_cm: runs in the VM")
			}
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("panic: %v", p)
					}
				}()
				err = row.call(t, env)
			}()
			if !errors.Is(err, row.want) {
				t.Fatalf("error %v, want %v", err, row.want)
			}
			if !strings.Contains(err.Error(), row.field) {
				t.Errorf("error %q does not name %q", err, row.field)
			}
		})
	}
	if env != nil {
		t.Run("accept limits", testAcceptLimits)
	}
}
