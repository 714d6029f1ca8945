package main

import (
	"sort"
	"time"
)

// cyclesPerMicrosecond calibrates cycles against the monotonic clock, as
// perftest's sample_get_cpu_mhz does against gettimeofday: the median of
// a few short spins, so that one preempted spin does not skew it.
func cyclesPerMicrosecond() float64 {
	var rates []float64
	for i := 0; i < 5; i++ {
		t0, c0 := time.Now(), cycles()
		for time.Since(t0) < 2*time.Millisecond {
		}
		c1, t1 := cycles(), time.Now()
		rates = append(rates, float64(c1-c0)/(float64(t1.Sub(t0))/1e3))
	}
	sort.Float64s(rates)
	return rates[len(rates)/2]
}
