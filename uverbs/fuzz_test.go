package uverbs

import (
	"context"
	"testing"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/sysfs"
	"github.com/goverbs/goverbs/sysfs/sysfstest"
)

// FuzzKernelResponses opens a context on a kernel that answers every
// command, ioctl or write(), with fuzz bytes (transport.Scribbler): odd
// errnos, handles, output buffers and write() responses, VALID_OUTPUT set
// or not. Then it drives every verb: each must return a value or an error,
// never panic, and closing must release every descriptor it got (the
// package's TestMain checks the process's descriptors after the run).
// Seeds in testdata/fuzz/FuzzKernelResponses are responses recorded on
// the 6.1 and 6.12 kernels.
func FuzzKernelResponses(f *testing.F) {
	f.Add(byte(0), []byte{})
	f.Add(byte(1), []byte{0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff})
	tree := sysfstest.MustLoad("../sysfs/testdata/rxe-6.12.txtar")
	f.Fuzz(func(t *testing.T, mode byte, data []byte) {
		dev := deviceInfo{name: "rxe0", charDev: "/dev/null", abiVersion: 2, driver: abi.DriverRXE,
			ports: []int{1}, sys: sysfs.NewFS(tree)}
		tr := []Transport{TransportAuto, TransportIoctl, TransportWrite}[int(mode)%3]
		c, err := openDevice(dev, &options{transport: tr, kernel: &transport.Scribbler{Data: data}})
		if err != nil {
			return
		}
		defer c.Close()
		c.QueryDevice()
		c.QueryPort(1)
		c.QueryGID(1, 1)
		c.QueryGIDTable()
		c.RecommendedGID(1)
		c.QueryPKey(1, 0)
		ch, err := c.NewCompChannel()
		if err == nil {
			defer ch.Close()
		}
		cq, err := c.CreateCQ(4, &CQOptions{Channel: ch})
		if err == nil {
			defer cq.Close()
			cq.Resize(8)
			cq.RequestNotify(false)
			cq.Poll(make([]WC, 4))
		}
		pd, err := c.AllocPD()
		if err != nil {
			return
		}
		defer pd.Close()
		if mw, err := pd.AllocMW(MWType2); err == nil {
			mw.Close()
		}
		if buf, err := AllocBuffer(4096); err == nil {
			if mr, err := pd.RegisterBuffer(buf, 0, 4096, AccessLocalWrite); err == nil {
				mr.ReReg(ReregAccess, nil, AccessLocalWrite|AccessRemoteRead)
				mr.Close()
			}
			buf.Close()
		}
		srq, err := pd.CreateSRQ(SRQAttr{MaxWr: 4, MaxSGE: 1})
		if err == nil {
			defer srq.Close()
			srq.Query()
			srq.Modify(SRQAttr{SRQLimit: 1}, SRQAttrLimit)
		}
		if cq == nil {
			return
		}
		qp, err := pd.CreateQP(QPInitAttr{Type: QPTypeUD, SendCQ: cq, RecvCQ: cq,
			Cap: QPCap{MaxSendWr: 2, MaxRecvWr: 2, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err == nil {
			defer qp.Close()
			qp.Query()
			qp.Connect(ConnectAttr{SGIDIndex: 1, Qkey: 1})
			qp.PostRecv([]RecvWR{{}})
		}
		if ah, err := pd.CreateAH(AHAttr{PortNum: 1, IsGlobal: true, GRH: GlobalRoute{SGIDIndex: 1, HopLimit: 1}}); err == nil {
			ah.Close()
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		c.WaitAsyncEvent(ctx)
	})
}
