package main

import (
	"sync"
	"sync/atomic"
	"time"
)

// The phases of a duration run (-D), perftest's START_STATE, SAMPLE_STATE,
// STOP_SAMPLE_STATE and END_STATE: a warm-up margin, the sample, a
// cool-down margin, the end. Only what completes during the sample counts.
const (
	phaseWarmUp int32 = iota
	phaseSample
	phaseCoolDown
	phaseEnd
)

// durationClock moves a duration run through its phases on Go timers
// where perftest uses SIGALRM; the loops look at the phase with one atomic
// load, so the fast path neither allocates nor takes a lock. The sample's
// first and last cycle counts go to tposted[0] and tcompleted[0], as
// perftest's catch_alarm records them.
type durationClock struct {
	phase          atomic.Int32
	sample, margin time.Duration
	tposted        *uint64
	tcompleted     *uint64

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
}

// startDuration starts the clock of a duration run: the loop's
// tposted[0] and tcompleted[0] receive the sample's bounds. It returns nil
// for an iteration run.
func (p *perf) startDuration() *durationClock {
	c := p.cfg
	if c.duration == 0 {
		return nil
	}
	if len(p.tposted) == 0 || len(p.tcompleted) == 0 {
		p.tposted, p.tcompleted = make([]uint64, 1), make([]uint64, 1)
	}
	d := &durationClock{
		sample:  time.Duration(c.duration-2*c.margin) * time.Second,
		margin:  time.Duration(c.margin) * time.Second,
		tposted: &p.tposted[0], tcompleted: &p.tcompleted[0],
	}
	if d.margin > 0 {
		d.after(d.margin)
	} else {
		d.advance()
	}
	return d
}

func (d *durationClock) after(wait time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.stopped {
		d.timer = time.AfterFunc(wait, d.advance)
	}
}

// advance is catch_alarm: the next phase, and the timer for the one after.
func (d *durationClock) advance() {
	switch d.phase.Load() {
	case phaseWarmUp:
		*d.tposted = cycles()
		d.phase.Store(phaseSample)
		d.after(d.sample)
	case phaseSample:
		*d.tcompleted = cycles()
		d.phase.Store(phaseCoolDown)
		if d.margin > 0 {
			d.after(d.margin)
		} else {
			d.advance()
		}
	case phaseCoolDown:
		d.phase.Store(phaseEnd)
	}
}

// sampling reports whether what completes now counts.
func (d *durationClock) sampling() bool { return d != nil && d.phase.Load() == phaseSample }

// ended reports whether the run is over; never for an iteration run.
func (d *durationClock) ended() bool { return d != nil && d.phase.Load() == phaseEnd }

// stop cancels the pending timer of a run that ends early (an error).
func (d *durationClock) stop() {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	if d.timer != nil {
		d.timer.Stop()
	}
}
