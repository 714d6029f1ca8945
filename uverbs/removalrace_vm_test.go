package uverbs

import (
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/internal/transport"
)

// removingKernel makes real system calls, but when armed it first does what
// the library's device-event watcher does on a removal (deviceRemoved), so
// the next command meets the placeholder descriptor: the race of an
// object's Close with the watcher, made certain.
type removingKernel struct {
	transport.System
	c     *Context
	armed atomic.Bool
}

func (k *removingKernel) remove() {
	if k.armed.CompareAndSwap(true, false) {
		k.c.deviceRemoved(unix.ENODEV)
	}
}

func (k *removingKernel) Ioctl(fd int, q *transport.Ioctl, driver abi.DriverID) error {
	k.remove()
	return k.System.Ioctl(fd, q, driver)
}

func (k *removingKernel) Write(fd int, buf, resp []byte) error {
	k.remove()
	return k.System.Write(fd, buf, resp)
}

// TestCloseRacingRemoval: an object whose destroy command fails because the
// library closed the context for a removed device meanwhile is gone (the
// kernel freed it with the file), so its Close succeeds. It once returned
// the command's EBADF.
func TestCloseRacingRemoval(t *testing.T) {
	name := vmenv.RequireRXE(t)
	type closer interface{ Close() error }
	for _, tc := range []struct {
		name string
		make func(t *testing.T, c *Context, pd *PD) closer
	}{
		{"PD", func(t *testing.T, c *Context, pd *PD) closer { return pd }},
		{"CQ", func(t *testing.T, c *Context, pd *PD) closer { return must1(c.CreateCQ(16, nil))(t) }},
		{"QP", func(t *testing.T, c *Context, pd *PD) closer {
			cq := must1(c.CreateCQ(16, nil))(t)
			t.Cleanup(func() { cq.Close() })
			return must1(pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq,
				Cap: QPCap{MaxSendWr: 4, MaxRecvWr: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}))(t)
		}},
		{"SRQ", func(t *testing.T, c *Context, pd *PD) closer {
			return must1(pd.CreateSRQ(SRQAttr{MaxWr: 4, MaxSGE: 1}))(t)
		}},
		{"MR", func(t *testing.T, c *Context, pd *PD) closer {
			buf := must1(AllocBuffer(4096))(t)
			t.Cleanup(func() { buf.Close() })
			return must1(pd.RegisterBuffer(buf, 0, buf.Len(), AccessLocalWrite))(t)
		}},
		{"MW", func(t *testing.T, c *Context, pd *PD) closer { return must1(pd.AllocMW(MWType2))(t) }},
		{"AH", func(t *testing.T, c *Context, pd *PD) closer {
			gid := must1(c.RecommendedGID(1))(t)
			return must1(pd.CreateAH(AHAttr{PortNum: 1, IsGlobal: true,
				GRH: GlobalRoute{DGID: gid.GID, SGIDIndex: gid.Index, HopLimit: 1}}))(t)
		}},
	} {
		for _, tr := range []Transport{TransportIoctl, TransportWrite} {
			t.Run(tc.name+"/"+tr.String(), func(t *testing.T) {
				k := &removingKernel{}
				c, err := Open(name, WithTransport(tr), withKernel(k))
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				k.c = c
				pd := must1(c.AllocPD())(t)
				defer pd.Close()
				obj := tc.make(t, c, pd)
				k.armed.Store(true)
				if err := obj.Close(); err != nil {
					t.Errorf("Close racing the removal: %v", err)
				}
				if k.armed.Load() {
					t.Fatal("Close sent no command")
				}
				if err := obj.Close(); err != nil {
					t.Errorf("second Close: %v", err)
				}
			})
		}
	}
}

// must1 fails t on a constructor's error and returns its value.
func must1[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
