// Package benchstat holds the summary statistics the comparison harnesses
// (internal/mlx5bench, internal/scalebench) print: medians, ranges, and
// whether two samples' ranges separate.
package benchstat

import "slices"

// Median is the median of v (the mean of the two middle values for an
// even count), 0 for none.
func Median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	n := len(s)
	if n == 0 {
		return 0
	}
	return (s[(n-1)/2] + s[n/2]) / 2
}

// MinMax is the smallest and largest of v, 0 and 0 for none.
func MinMax(v []float64) (lo, hi float64) {
	if len(v) == 0 {
		return 0, 0
	}
	return slices.Min(v), slices.Max(v)
}

// Separate reports whether the ranges of two non-empty samples do not
// overlap.
func Separate(a, b []float64) bool {
	return slices.Max(a) < slices.Min(b) || slices.Max(b) < slices.Min(a)
}

// Relation is "separate" or "overlap", for a table.
func Relation(a, b []float64) string {
	if Separate(a, b) {
		return "separate"
	}
	return "overlap"
}

// Column projects each element of xs to a number.
func Column[T any](xs []T, f func(T) float64) []float64 {
	v := make([]float64, 0, len(xs))
	for _, x := range xs {
		v = append(v, f(x))
	}
	return v
}
