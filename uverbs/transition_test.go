package uverbs

import "testing"

// TestValidTransition: the bit table allows exactly the IB spec's moves
// (RESET and ERR, allowed from anywhere, are checked before it) and
// refuses states past the table, as a caller-given CurState may be.
func TestValidTransition(t *testing.T) {
	allowed := map[[2]QPState]bool{
		{QPStateReset, QPStateInit}: true, {QPStateInit, QPStateInit}: true, {QPStateInit, QPStateRTR}: true,
		{QPStateRTR, QPStateRTS}: true, {QPStateRTS, QPStateRTS}: true, {QPStateRTS, QPStateSQD}: true,
		{QPStateSQD, QPStateRTS}: true, {QPStateSQD, QPStateSQD}: true, {QPStateSQE, QPStateRTS}: true,
	}
	for from := range QPState(255) {
		for to := QPStateReset; to <= QPStateErr; to++ {
			if to == QPStateReset || to == QPStateErr {
				continue
			}
			if got, want := validTransition(from, to), allowed[[2]QPState{from, to}]; got != want {
				t.Errorf("validTransition(%v, %v) = %v, want %v", from, to, got, want)
			}
		}
	}
}
