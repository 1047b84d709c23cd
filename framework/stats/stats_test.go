package stats

import (
	"errors"
	"math"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{5}, 5},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{10, -1, 7, 7, 100}, 7},
	} {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median(nil) should be NaN")
	}
	// Median sorts a copy: the caller's samples keep their order (they are time series).
	in := []float64{3, 1, 2}
	Median(in)
	if in[0] != 3 || in[1] != 1 || in[2] != 2 {
		t.Errorf("Median modified its input: %v", in)
	}
}

func TestMean(t *testing.T) {
	if got := Mean([]float64{1, 2, 3, 10}); got != 4 {
		t.Errorf("Mean = %v, want 4", got)
	}
	if !math.IsNaN(Mean(nil)) {
		t.Error("Mean(nil) should be NaN")
	}
}

func TestLinearFitExactLine(t *testing.T) {
	xs := []float64{0, 1, 2, 3, 4, 5}
	ys := make([]float64, len(xs))
	for i, x := range xs {
		ys[i] = 7 - 2.5*x
	}
	f, err := LinearFit(xs, ys)
	if err != nil {
		t.Fatal(err)
	}
	if !near(f.Slope, -2.5, 1e-12) || !near(f.Intercept, 7, 1e-12) || !near(f.SlopeStdErr, 0, 1e-12) || f.N != 6 {
		t.Errorf("fit = %+v, want slope -2.5, intercept 7, stderr 0, n 6", f)
	}
}

func TestLinearFitNoisy(t *testing.T) {
	// By hand: x̄=2, ȳ=3, Sxx=10, Sxy=8 → slope 0.8, intercept 1.4;
	// residuals -0.4, 0.8, -1.0, 1.2, -0.6 → SSE 3.6; stderr = sqrt(3.6/3/10) = sqrt(0.12).
	f, err := LinearFit([]float64{0, 1, 2, 3, 4}, []float64{1, 3, 2, 5, 4})
	if err != nil {
		t.Fatal(err)
	}
	if !near(f.Slope, 0.8, 1e-12) || !near(f.Intercept, 1.4, 1e-12) || f.N != 5 {
		t.Errorf("fit = %+v, want slope 0.8 intercept 1.4 n 5", f)
	}
	if !near(f.SlopeStdErr, math.Sqrt(0.12), 1e-12) {
		t.Errorf("stderr = %v, want %v", f.SlopeStdErr, math.Sqrt(0.12))
	}
}

func TestLinearFitTwoPoints(t *testing.T) {
	// Two points: exact line, no degrees of freedom: the stderr is unknown (NaN), not 0.
	f, err := LinearFit([]float64{1, 3}, []float64{10, 20})
	if err != nil {
		t.Fatal(err)
	}
	if f.Slope != 5 || f.Intercept != 5 || !math.IsNaN(f.SlopeStdErr) || f.N != 2 {
		t.Errorf("fit = %+v", f)
	}
}

func TestLinearFitErrors(t *testing.T) {
	for name, tc := range map[string]struct{ xs, ys []float64 }{
		"empty":      {nil, nil},
		"one point":  {[]float64{1}, []float64{1}},
		"equal xs":   {[]float64{2, 2, 2}, []float64{1, 2, 3}},
		"mismatched": {[]float64{1, 2}, []float64{1}},
		"nan":        {[]float64{1, 2, 3}, []float64{1, math.NaN(), 3}},
	} {
		if _, err := LinearFit(tc.xs, tc.ys); err == nil {
			t.Errorf("%s: expected an error", name)
		}
	}
	if _, err := LinearFit([]float64{2, 2}, []float64{1, 2}); !errors.Is(err, ErrDegenerate) {
		t.Errorf("equal xs: err = %v, want ErrDegenerate", err)
	}
}

func TestKnownSlopeStdErr(t *testing.T) {
	xs, ys := []float64{0, 1, 2, 3}, []float64{1, 3, 4, 7}
	f, err := LinearFit(xs, ys)
	if err != nil {
		t.Fatal(err)
	}
	if se, ok := f.KnownSlopeStdErr(); !ok || se != f.SlopeStdErr || se <= 0 {
		t.Errorf("four noisy points: KnownSlopeStdErr = %v, %v; want %v, true", se, ok, f.SlopeStdErr)
	}
	two, err := LinearFit(xs[:2], ys[:2])
	if err != nil {
		t.Fatal(err)
	}
	if se, ok := two.KnownSlopeStdErr(); ok {
		t.Errorf("two points leave no residual, yet the standard error is known: %v", se)
	}
	// Three points past what float64 holds: the error is not finite, so not known.
	huge := Fit{Slope: 1, N: 3, SlopeStdErr: math.Inf(1)}
	if _, ok := huge.KnownSlopeStdErr(); ok {
		t.Error("an infinite standard error counts as known")
	}
}

func TestSlopeResolution(t *testing.T) {
	// A 0.01-core step across 0..4 remote clusters: a slope below 0.0025 is one unresolved step.
	if got := SlopeResolution(0.01, []float64{2, 0, 4, 1}); got != 0.0025 {
		t.Errorf("SlopeResolution = %v, want 0.0025", got)
	}
	if got := SlopeResolution(0.01, []float64{3, 3}); !math.IsInf(got, 1) {
		t.Errorf("no range: %v, want +Inf", got)
	}
}

func TestCumulative(t *testing.T) {
	got := Cumulative([]float64{3, 0.5, 2})
	want := []float64{3, 3.5, 5.5}
	if len(got) != len(want) {
		t.Fatalf("Cumulative = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Cumulative = %v, want %v", got, want)
		}
	}
	if len(Cumulative(nil)) != 0 {
		t.Error("Cumulative(nil) is not empty")
	}
}

func TestMeanStdErr(t *testing.T) {
	m, se, ok := MeanStdErr([]float64{3.96, 4.06, 4.06})
	// sd = sqrt(((-0.0667)^2 + 2*(0.0333)^2)/2) = 0.05774; over sqrt(3)
	if !ok || !near(m, 4.0267, 1e-4) || !near(se, 0.03333, 1e-4) {
		t.Errorf("MeanStdErr = %g, %g, %v; want 4.0267, 0.03333, true", m, se, ok)
	}
	if _, se, ok := MeanStdErr([]float64{4}); ok || !math.IsNaN(se) {
		t.Errorf("one value: stderr %g ok %v; want NaN, false (no spread to estimate)", se, ok)
	}
	if _, _, ok := MeanStdErr([]float64{1, math.Inf(1)}); ok {
		t.Error("a non-finite value gave ok")
	}
}
