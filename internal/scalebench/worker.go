package main

import (
	"fmt"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/uverbs"
)

// result is one measurement, printed by the workers of both tools as a
// JSON line and collected by the guest.
type result struct {
	Tool string `json:"tool"` // go or c
	Work string `json:"work"` // qps, mr, bw
	N    int64  `json:"n"`    // QPs per device, MR bytes, or QPs of the bandwidth run
	Rep  int    `json:"rep"`
	// qps
	CreateNs  int64 `json:"create_ns,omitempty"`
	ConnectNs int64 `json:"connect_ns,omitempty"`
	DestroyNs int64 `json:"destroy_ns,omitempty"`
	// mr
	RegNs   int64 `json:"reg_ns,omitempty"`
	DeregNs int64 `json:"dereg_ns,omitempty"`
	// The same phases in CPU time (user + system) of the process.
	CreateCPU  int64 `json:"create_cpu,omitempty"`
	ConnectCPU int64 `json:"connect_cpu,omitempty"`
	DestroyCPU int64 `json:"destroy_cpu,omitempty"`
	RegCPU     int64 `json:"reg_cpu,omitempty"`
	DeregCPU   int64 `json:"dereg_cpu,omitempty"`
	// The system part of create's and connect's CPU time.
	CreateSys  int64 `json:"create_sys,omitempty"`
	ConnectSys int64 `json:"connect_sys,omitempty"`
	// bw: MB/s, BW average
	MBps float64 `json:"mbps,omitempty"`
	// Go only: heap bytes allocated during the creation (create + connect,
	// or register), and still live after a GC once it is done.
	AllocBytes int64 `json:"alloc_bytes,omitempty"`
	LiveBytes  int64 `json:"live_bytes,omitempty"`
	Objects    int64 `json:"objects,omitempty"` // heap objects allocated
}

// Queue sizes, as scale.c's.
var qpCap = uverbs.QPCap{MaxSendWr: 64, MaxRecvWr: 64, MaxSendSGE: 1, MaxRecvSGE: 1}

type side struct {
	ctx *uverbs.Context
	pd  *uverbs.PD
	cq  *uverbs.CQ
	gid uverbs.GID
	qps []*uverbs.QP
}

func openSide(dev string, gidIndex int) (*side, error) {
	ctx, err := uverbs.Open(dev)
	if err != nil {
		return nil, err
	}
	s := &side{ctx: ctx}
	if s.pd, err = ctx.AllocPD(); err != nil {
		return nil, err
	}
	if s.cq, err = ctx.CreateCQ(256, nil); err != nil {
		return nil, err
	}
	g, err := ctx.QueryGID(1, gidIndex)
	if err != nil {
		return nil, err
	}
	s.gid = g.GID
	return s, nil
}

func (s *side) close() {
	s.cq.Close()
	s.pd.Close()
	s.ctx.Close()
}

// cpuNs is the process's user + system CPU time (the Go runtime's threads
// included): what a phase cost, apart from the time it waited.
func cpuNs() int64 {
	cpu, _ := cpuSysNs()
	return cpu
}

// cpuSysNs is cpuNs and, of it, the system's part, from one reading.
func cpuSysNs() (cpu, sys int64) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano(), ru.Stime.Nano()
}

// heap reads the Go heap's counters after a full GC.
func heap() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// workQPs creates n RC QPs on rxe0 and n on rxe1, connects each to its
// peer (RESET to RTS), and destroys them, timing each phase.
func workQPs(n, gidIndex int) (result, error) {
	r := result{Tool: "go", Work: "qps", N: int64(n)}
	var s [2]*side
	for k, dev := range []string{"rxe0", "rxe1"} {
		var err error
		if s[k], err = openSide(dev, gidIndex); err != nil {
			return r, err
		}
		defer s[k].close()
		s[k].qps = make([]*uverbs.QP, 0, n)
	}
	m0 := heap()
	c0, s0 := cpuSysNs()
	t0 := time.Now()
	for range n {
		for _, sd := range s {
			qp, err := sd.pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: sd.cq, RecvCQ: sd.cq, Cap: qpCap})
			if err != nil {
				return r, err
			}
			sd.qps = append(sd.qps, qp)
		}
	}
	t1 := time.Now()
	c1, s1 := cpuSysNs()
	access := uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead
	for i := range n {
		for k, sd := range s {
			peer := s[1-k]
			err := sd.qps[i].Connect(uverbs.ConnectAttr{SGIDIndex: gidIndex, MTU: uverbs.MTU1024, Access: access,
				Remote: uverbs.Endpoint{QPN: peer.qps[i].QPN(), GID: peer.gid}})
			if err != nil {
				return r, err
			}
		}
	}
	t2 := time.Now()
	c2, s2 := cpuSysNs()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	m2 := heap()
	c3 := cpuNs()
	t3 := time.Now()
	for i := range n {
		for _, sd := range s {
			if err := sd.qps[i].Close(); err != nil {
				return r, err
			}
		}
	}
	t4 := time.Now()
	c4 := cpuNs()
	r.CreateNs, r.ConnectNs, r.DestroyNs = t1.Sub(t0).Nanoseconds(), t2.Sub(t1).Nanoseconds(), t4.Sub(t3).Nanoseconds()
	r.CreateCPU, r.ConnectCPU, r.DestroyCPU = c1-c0, c2-c1, c4-c3
	r.CreateSys, r.ConnectSys = s1-s0, s2-s1
	r.AllocBytes = int64(m1.TotalAlloc - m0.TotalAlloc)
	r.Objects = int64(m1.Mallocs - m0.Mallocs)
	r.LiveBytes = int64(m2.HeapAlloc) - int64(m0.HeapAlloc)
	return r, nil
}

// workMR registers size bytes of mapped memory, every page touched first
// (one byte a page, as scale.c), and deregisters them, timing both.
func workMR(size int) (result, error) {
	r := result{Tool: "go", Work: "mr", N: int64(size)}
	ctx, err := uverbs.Open("rxe0")
	if err != nil {
		return r, err
	}
	defer ctx.Close()
	pd, err := ctx.AllocPD()
	if err != nil {
		return r, err
	}
	defer pd.Close()
	buf, err := uverbs.AllocBuffer(size)
	if err != nil {
		return r, err
	}
	defer buf.Close()
	mem := buf.Bytes()
	for i := 0; i < len(mem); i += os.Getpagesize() {
		mem[i] = 1
	}
	access := uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead
	m0 := heap()
	c0 := cpuNs()
	t0 := time.Now()
	mr, err := pd.RegisterBuffer(buf, 0, size, access)
	if err != nil {
		return r, fmt.Errorf("register %d bytes: %w", size, err)
	}
	t1 := time.Now()
	c1 := cpuNs()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	m2 := heap()
	c2 := cpuNs()
	t2 := time.Now()
	if err := mr.Close(); err != nil {
		return r, err
	}
	t3 := time.Now()
	c3 := cpuNs()
	r.RegNs, r.DeregNs = t1.Sub(t0).Nanoseconds(), t3.Sub(t2).Nanoseconds()
	r.RegCPU, r.DeregCPU = c1-c0, c3-c2
	r.AllocBytes = int64(m1.TotalAlloc - m0.TotalAlloc)
	r.Objects = int64(m1.Mallocs - m0.Mallocs)
	r.LiveBytes = int64(m2.HeapAlloc) - int64(m0.HeapAlloc)
	return r, nil
}
