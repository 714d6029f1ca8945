package uverbs

import "testing"

// TestSingleThreadedReachesProvider: CQOptions.SingleThreaded and
// QPInitAttr.SingleThreaded reach the provider, and only when set.
func TestSingleThreadedReachesProvider(t *testing.T) {
	c, _ := openRecording(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	for _, solo := range []bool{false, true} {
		cq, err := c.CreateCQ(16, &CQOptions{SingleThreaded: solo})
		if err != nil {
			t.Fatal(err)
		}
		if got := cq.Provider().(*xrcTestCQ).solo; got != solo {
			t.Errorf("SingleThreaded %v: the provider's CQ was asked %v", solo, got)
		}
		if cq.SingleThreaded() != solo {
			t.Errorf("SingleThreaded %v: CQ.SingleThreaded() = %v", solo, cq.SingleThreaded())
		}
		qp, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, SingleThreaded: solo,
			Cap: QPCap{MaxSendWr: 1, MaxRecvWr: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if got := qp.prov.(xrcTestQP).init.SingleThreaded; got != solo {
			t.Errorf("SingleThreaded %v: the provider's QPInit says %v", solo, got)
		}
	}
}
