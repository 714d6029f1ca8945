package main

import (
	"math"
	"strconv"
)

// The C conversions the examples' output depends on that cmd/ibinfo does
// not share (those it shares are in internal/cli).

// cFixed2 is C's printf("%.2f", v): Go's %.2f except for the infinities
// and NaN, which glibc spells "inf", "-inf" and "nan"/"-nan".
func cFixed2(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	case math.IsNaN(v):
		if math.Signbit(v) {
			return "-nan"
		}
		return "nan"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}
