package bench

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Quantile returns the nearest-rank quantile q (0 < q ≤ 1) of xs: with an
// even count the median is the lower middle value, with fewer than 100
// values p99 is the maximum. ok is false if xs is empty. xs is not
// changed.
func Quantile[T cmp.Ordered](xs []T, q float64) (v T, ok bool) {
	if len(xs) == 0 {
		return v, false
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)], true
}

// Mean is the mean of xs, NaN if xs is empty.
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// MeanSE is a mean and its standard error (NaN with fewer than two
// samples).
type MeanSE struct{ Mean, SE float64 }

// MeanSEOf returns the mean of xs and its standard error: the samples'
// standard deviation over √n.
func MeanSEOf(xs []float64) MeanSE {
	m := Mean(xs)
	if len(xs) < 2 {
		return MeanSE{m, math.NaN()}
	}
	var ss float64
	for _, x := range xs {
		ss += (x - m) * (x - m)
	}
	return MeanSE{m, math.Sqrt(ss/float64(len(xs)-1)) / math.Sqrt(float64(len(xs)))}
}

// String is "mean ± error" with one decimal, or the mean alone when
// there is no error.
func (v MeanSE) String() string {
	if math.IsNaN(v.SE) {
		return fmt.Sprintf("%.1f", v.Mean)
	}
	return fmt.Sprintf("%.1f ± %.1f", v.Mean, v.SE)
}
