package uverbs

import (
	"errors"
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/sysfs"
)

// transports are the paths every VM test runs each verb through.
var transports = []Transport{TransportIoctl, TransportWrite, TransportAuto}

func openRXE(t testing.TB, tr Transport) *Context {
	t.Helper()
	name := vmenv.RequireRXE(t)
	c, err := Open(name, WithTransport(tr))
	if err != nil {
		t.Fatalf("Open(%s, %v): %v", name, tr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestOpenAndQuery(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.String(), func(t *testing.T) {
			c := openRXE(t, tr)
			if c.Provider() != "rxe" || c.NumCompVectors() < 1 {
				t.Errorf("provider %q, %d completion vectors", c.Provider(), c.NumCompVectors())
			}
			attr, err := c.QueryDevice()
			if err != nil {
				t.Fatal(err)
			}
			dev, err := sysfs.New("/").Device(c.Name())
			if err != nil {
				t.Fatal(err)
			}
			if uint64(attr.NodeGUID) != uint64(dev.NodeGUID) || attr.PhysPortCnt != uint8(len(dev.Ports)) {
				t.Errorf("node GUID %v ports %d; sysfs says %v and %d", attr.NodeGUID, attr.PhysPortCnt, dev.NodeGUID, len(dev.Ports))
			}
			if !attr.Extended || attr.MaxQP == 0 || attr.MaxCQE == 0 || attr.FWVer == "" {
				t.Errorf("implausible device attributes: %+v", attr)
			}
			if attr.VendorID != 0xffffff {
				t.Errorf("rxe vendor id %#x, want 0xffffff", attr.VendorID)
			}
			pa, err := c.QueryPort(1)
			if err != nil {
				t.Fatal(err)
			}
			if pa.State != PortActive || pa.LinkLayer != LinkLayerEthernet || pa.GIDTblLen == 0 {
				t.Errorf("port 1: %+v", pa)
			}
			if tr == TransportWrite && pa.PortCapFlags2 != 0 {
				t.Errorf("the write path has no port_cap_flags2, got %#x", pa.PortCapFlags2)
			}
			// GID 1 of an rxe port on an IPv4 netdev is the IPv4-mapped RoCE v2 GID.
			g, err := c.QueryGID(1, 1)
			if err != nil {
				t.Fatal(err)
			}
			if !g.GID.Addr().Is4In6() || g.Type != GIDTypeRoCEv2 || g.NetdevIfindex == 0 || g.Index != 1 || g.Port != 1 {
				t.Errorf("GID[1] = %+v (%v)", g, g.GID)
			}
			sysGID := dev.Ports[0].GIDs
			found := false
			for _, sg := range sysGID {
				if sg.Index == 1 {
					found = sg.GID == g.GID
				}
			}
			if !found {
				t.Errorf("GID[1] %v not in sysfs table %+v", g.GID, sysGID)
			}
			if _, err := c.QueryGID(1, int(pa.GIDTblLen)-1); !errors.Is(err, ErrNoGID) {
				t.Errorf("last GID slot: err = %v, want ErrNoGID", err)
			}
			table, err := c.QueryGIDTable()
			if err != nil {
				t.Fatal(err)
			}
			if len(table) < 2 {
				t.Errorf("GID table has %d entries: %+v", len(table), table)
			}
			for _, e := range table {
				one, err := c.QueryGID(e.Port, e.Index)
				if err != nil || one != e {
					t.Errorf("table entry %+v, single query %+v (%v)", e, one, err)
				}
			}
			pk, err := c.QueryPKey(1, 0)
			if err != nil || pk != 0xffff {
				t.Errorf("pkey[0] = %#x, %v; want 0xffff", pk, err)
			}
		})
	}
}

func TestKernelRejects(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.String(), func(t *testing.T) {
			c := openRXE(t, tr)
			_, err := c.QueryPort(2)
			var e *Error
			if !errors.Is(err, unix.EINVAL) || !errors.As(err, &e) || e.Verb != "query_port" {
				t.Errorf("QueryPort(2) on a one-port device: %v, want a query_port EINVAL", err)
			}
			if _, err := c.QueryPort(0); err == nil {
				t.Error("QueryPort(0) accepted")
			}
			if _, err := c.QueryGID(1, 1<<20); err == nil {
				t.Error("QueryGID beyond the table accepted")
			}
			if _, err := c.QueryGID(7, 0); err == nil {
				t.Error("QueryGID on port 7 accepted")
			}
		})
	}
}

func TestCloseIdempotentNoLeaks(t *testing.T) {
	name := vmenv.RequireRXE(t)
	before := deviceFDs()
	for _, tr := range transports {
		c, err := Open(name, WithTransport(tr))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if _, err := c.QueryDevice(); !errors.Is(err, ErrClosed) {
			t.Errorf("QueryDevice after Close: %v, want ErrClosed", err)
		}
	}
	runtime.GC()
	if after := deviceFDs(); after != before {
		t.Errorf("%d uverbs fds open before, %d after", before, after)
	}
}

func TestOpenErrors(t *testing.T) {
	vmenv.RequireRXE(t)
	if _, err := Open("nosuch0"); err == nil {
		t.Error("Open(nosuch0) succeeded")
	}
	if _, err := Open("rxe0", WithTransport(Transport(9))); err == nil {
		t.Error("unknown transport accepted")
	}
}

func countDir(dir string) (int, error) {
	ents, err := os.ReadDir(dir)
	return len(ents), err
}
