// Package stats holds the small statistics the reports need: medians of repeated samples, means
// with their standard error, least-squares lines with the standard error of their slope, the resolution such a slope has,
// and running sums for fitting cumulative costs.
package stats

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Median returns the median of vs (the mean of the two middle values for an even count), or NaN
// for an empty slice. vs is not modified.
func Median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// Mean returns the arithmetic mean of vs, or NaN for an empty slice.
func Mean(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	var sum float64
	for _, v := range vs {
		sum += v
	}
	return sum / float64(len(vs))
}

// MeanStdErr returns the mean of vs and the standard error of that mean (the sample standard
// deviation over the square root of the count). ok is false for fewer than two values, whose
// spread is unknown, or for non-finite values.
func MeanStdErr(vs []float64) (mean, stdErr float64, ok bool) {
	if len(vs) < 2 || slices.ContainsFunc(vs, func(v float64) bool { return !finite(v) }) {
		return Mean(vs), math.NaN(), false
	}
	mean = Mean(vs)
	var ss float64
	for _, v := range vs {
		ss += (v - mean) * (v - mean)
	}
	n := float64(len(vs))
	return mean, math.Sqrt(ss/(n-1)) / math.Sqrt(n), true
}

// Fit is an ordinary least-squares line y = Intercept + Slope*x.
type Fit struct {
	Slope     float64
	Intercept float64
	// SlopeStdErr is sqrt(SSE/(N-2) / Sxx). With N == 2 the line passes through both points and
	// no degree of freedom is left to estimate the error: it is NaN (unknown), not 0 (exact).
	SlopeStdErr float64
	N           int
}

// ErrDegenerate is returned when the points do not determine a line.
var ErrDegenerate = errors.New("stats: points do not determine a line")

// LinearFit fits a least-squares line through (xs[i], ys[i]). It fails for fewer than two points,
// mismatched lengths, non-finite values, or when all xs are equal.
func LinearFit(xs, ys []float64) (Fit, error) {
	if len(xs) != len(ys) {
		return Fit{}, fmt.Errorf("stats: %d xs but %d ys", len(xs), len(ys))
	}
	n := len(xs)
	if n < 2 {
		return Fit{}, fmt.Errorf("%w: need at least 2 points, have %d", ErrDegenerate, n)
	}
	for i := range xs {
		if !finite(xs[i]) || !finite(ys[i]) {
			return Fit{}, fmt.Errorf("stats: point %d (%v, %v) is not finite", i, xs[i], ys[i])
		}
	}
	mx, my := Mean(xs), Mean(ys)
	// Centred sums avoid the cancellation of the textbook Σx² - n·x̄² form.
	var sxx, sxy float64
	for i := range xs {
		dx := xs[i] - mx
		sxx += dx * dx
		sxy += dx * (ys[i] - my)
	}
	if sxx == 0 {
		return Fit{}, fmt.Errorf("%w: all x values are equal", ErrDegenerate)
	}
	f := Fit{Slope: sxy / sxx, N: n, SlopeStdErr: math.NaN()}
	f.Intercept = my - f.Slope*mx
	if n > 2 {
		var sse float64
		for i := range xs {
			r := ys[i] - (f.Intercept + f.Slope*xs[i])
			sse += r * r
		}
		f.SlopeStdErr = math.Sqrt(sse / float64(n-2) / sxx)
	}
	return f, nil
}

// KnownSlopeStdErr is the slope's standard error where the points leave a residual to estimate it
// (three or more) and it is finite; ok is false otherwise, so that an unknown error is never
// reported as 0 (two points fit exactly).
func (f Fit) KnownSlopeStdErr() (se float64, ok bool) {
	if f.N < 3 || !finite(f.SlopeStdErr) {
		return 0, false
	}
	return f.SlopeStdErr, true
}

// SlopeResolution is the slope that one step of the readings' resolution makes across the range
// of xs: a fitted slope smaller than it is not resolved. xs must span a range (as any xs
// LinearFit fits do); without one the result is +Inf.
func SlopeResolution(step float64, xs []float64) float64 {
	return step / (slices.Max(xs) - slices.Min(xs))
}

// Cumulative returns the running sums of vs (out[i] = vs[0] + ... + vs[i], added in order), the
// points of a cost fitted cumulatively.
func Cumulative(vs []float64) []float64 {
	out := make([]float64, len(vs))
	var sum float64
	for i, v := range vs {
		sum += v
		out[i] = sum
	}
	return out
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
