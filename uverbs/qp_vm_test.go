package uverbs

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

type qpFixture struct {
	c   *Context
	pd  *PD
	cq  *CQ
	gid GIDEntry
}

func newQPFixture(t testing.TB, tr Transport) *qpFixture {
	t.Helper()
	c := openRXE(t, tr)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(64, nil)
	if err != nil {
		t.Fatal(err)
	}
	gid, err := c.RecommendedGID(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cq.Close()
		pd.Close()
	})
	return &qpFixture{c, pd, cq, gid}
}

func (f *qpFixture) qp(t testing.TB, typ QPType) *QP {
	t.Helper()
	qp, err := f.pd.CreateQP(QPInitAttr{Type: typ, SendCQ: f.cq, RecvCQ: f.cq,
		Cap: QPCap{MaxSendWr: 16, MaxRecvWr: 16, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}})
	if err != nil {
		t.Fatalf("CreateQP(%v): %v", typ, err)
	}
	t.Cleanup(func() { qp.Close() })
	return qp
}

func TestQPLifecycle(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.String(), func(t *testing.T) {
			f := newQPFixture(t, tr)
			if f.gid.Index != 1 {
				t.Errorf("recommended GID %+v, want index 1 (IPv4-mapped)", f.gid)
			}
			for _, typ := range []QPType{QPTypeRC, QPTypeUC, QPTypeUD} {
				t.Run(typ.String(), func(t *testing.T) {
					a, b := f.qp(t, typ), f.qp(t, typ)
					if a.QPN() == 0 || a.Cap().MaxSendWr < 16 || a.Cap().MaxInlineData < 64 {
						t.Errorf("QP %d caps %+v", a.QPN(), a.Cap())
					}
					conn := func(x, y *QP, psn uint32) error {
						return x.Connect(ConnectAttr{SGIDIndex: f.gid.Index, Qkey: 0x11111111, LocalPSN: psn,
							Access: AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead,
							Remote: Endpoint{QPN: y.QPN(), PSN: 100, GID: f.gid.GID}})
					}
					if err := conn(a, b, 100); err != nil {
						t.Fatal(err)
					}
					if err := conn(b, a, 100); err != nil {
						t.Fatal(err)
					}
					qa, err := a.Query()
					if err != nil {
						t.Fatal(err)
					}
					if qa.State != QPStateRTS || qa.SQPSN != 100 {
						t.Errorf("after Connect: state %v sq_psn %d", qa.State, qa.SQPSN)
					}
					if typ != QPTypeUD && (qa.DestQPN != b.QPN() || qa.PathMTU != MTU1024 || qa.AH.GRH.DGID != f.gid.GID) {
						t.Errorf("query: dest %d mtu %v dgid %v", qa.DestQPN, qa.PathMTU, qa.AH.GRH.DGID)
					}
					// RTS -> SQD -> RTS, then ERR and RESET. The kernel
					// refuses SQD -> RTS while the send queue drains.
					for _, s := range []QPState{QPStateSQD, QPStateRTS, QPStateErr, QPStateReset} {
						if s == QPStateRTS {
							waitDrained(t, a)
						}
						if err := a.Modify(&QPAttr{State: s}, QPAttrState); err != nil {
							t.Errorf("to %v: %v", s, err)
						}
					}
					if err := a.Modify(&QPAttr{State: QPStateRTS}, QPAttrState); err == nil {
						t.Error("RESET to RTS accepted")
					}
				})
			}
		})
	}
}

func TestQPKernelRejects(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.String(), func(t *testing.T) {
			f := newQPFixture(t, tr)
			attr, err := f.c.QueryDevice()
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: f.cq, RecvCQ: f.cq,
				Cap: QPCap{MaxSendWr: attr.MaxQPWr + 1, MaxRecvWr: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
			if !errors.Is(err, unix.EINVAL) {
				t.Errorf("max_send_wr above the device's %d: %v, want EINVAL", attr.MaxQPWr, err)
			}
			_, err = f.pd.CreateQP(QPInitAttr{Type: QPTypeRawPacket, SendCQ: f.cq, RecvCQ: f.cq, Cap: QPCap{MaxSendWr: 1, MaxSendSGE: 1}})
			if !errors.Is(err, ErrNotSupported) {
				t.Errorf("raw packet QP on rxe: %v, want ErrNotSupported", err)
			}
			qp := f.qp(t, QPTypeRC)
			// The kernel checks what we do not: a port the device lacks.
			err = qp.Modify(&QPAttr{State: QPStateInit, Port: 2}, QPAttrState|QPAttrPort|QPAttrPkeyIndex|QPAttrAccessFlags)
			if !errors.Is(err, unix.EINVAL) {
				t.Errorf("INIT on port 2: %v, want EINVAL", err)
			}
			// Closing a CQ that a QP uses is refused by the kernel.
			if err := f.cq.Close(); !errors.Is(err, unix.EBUSY) {
				t.Errorf("closing a CQ in use: %v, want EBUSY", err)
			}
		})
	}
}

func TestSRQAndAH(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.String(), func(t *testing.T) {
			f := newQPFixture(t, tr)
			srq, err := f.pd.CreateSRQ(SRQAttr{MaxWr: 32, MaxSGE: 2})
			if err != nil {
				t.Fatal(err)
			}
			if srq.MaxWr() < 32 {
				t.Errorf("SRQ max_wr %d", srq.MaxWr())
			}
			if err := srq.Modify(SRQAttr{SRQLimit: 4}, SRQAttrLimit); err != nil {
				t.Fatal(err)
			}
			if err := srq.Modify(SRQAttr{MaxWr: 64}, SRQAttrMaxWr); err != nil {
				t.Fatal(err)
			}
			sa, err := srq.Query()
			if err != nil || sa.SRQLimit != 4 || sa.MaxWr < 64 {
				t.Errorf("SRQ query %+v, %v", sa, err)
			}
			qp, err := f.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: f.cq, RecvCQ: f.cq, SRQ: srq, Cap: QPCap{MaxSendWr: 4, MaxSendSGE: 1}})
			if err != nil {
				t.Fatal(err)
			}
			if err := srq.Close(); !errors.Is(err, unix.EBUSY) {
				t.Errorf("closing an SRQ a QP uses: %v, want EBUSY", err)
			}
			qp.Close()
			if err := srq.Close(); err != nil {
				t.Fatal(err)
			}
			ah, err := f.pd.CreateAH(AHAttr{PortNum: 1, IsGlobal: true, GRH: GlobalRoute{DGID: f.gid.GID, SGIDIndex: f.gid.Index, HopLimit: 1}})
			if err != nil {
				t.Fatal(err)
			}
			if err := ah.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := f.pd.CreateAH(AHAttr{PortNum: 1}); err == nil {
				t.Error("non-global AH on a RoCE port accepted")
			}
			ud := f.qp(t, QPTypeUD)
			mgid := gidOf("ff0e::1")
			if err := ud.AttachMulticast(mgid, 0); err != nil {
				t.Fatal(err)
			}
			// The kernel refuses to destroy a QP still in a multicast group.
			if err := ud.Close(); !errors.Is(err, unix.EBUSY) {
				t.Errorf("closing a QP attached to a group: %v, want EBUSY", err)
			}
			if err := ud.DetachMulticast(mgid, 0); err != nil {
				t.Fatal(err)
			}
			if err := f.qp(t, QPTypeRC).AttachMulticast(mgid, 0); err == nil {
				t.Error("multicast on an RC QP accepted")
			}
		})
	}
}

// waitDrained waits until the kernel reports the QP's send queue drained.
func waitDrained(t *testing.T, qp *QP) {
	t.Helper()
	for i := 0; i < 200; i++ {
		a, err := qp.Query()
		if err != nil {
			t.Fatal(err)
		}
		if !a.SQDraining {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("QP %d still draining after a second", qp.QPN())
}
