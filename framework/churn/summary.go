package churn

import (
	"math"
	"slices"
	"time"
)

// Summary is what a run's changes add up to.
type Summary struct {
	// Samples is how many changes were tracked; Reflected how many the watcher showed in time.
	Samples, Reflected int
	// Superseded counts changes reflected by a later change's push (included in Reflected).
	Superseded int
	// Late were reflected, but after the limit; Unseen never were. Mismatched counts keys whose
	// final state at the watcher differs from the truth. Lost is their sum.
	Late, Unseen, Mismatched, Lost int
	// Percentiles of the latency of the changes reflected in time; nil when none was.
	P50, P90, P99, Max *time.Duration
}

// Summarize counts a run's results: a change is lost when it was not reflected within limit
// (istiod's debounce maximum plus a margin), and each key in mismatched (final state differs from
// the truth) is lost too. Latency percentiles cover the changes reflected within limit.
func Summarize(results []Result, limit time.Duration, mismatched int) Summary {
	s := Summary{Samples: len(results), Mismatched: mismatched}
	var lat []time.Duration
	for _, r := range results {
		switch {
		case !r.Reflected:
			s.Unseen++
		case r.Latency > limit:
			s.Late++
		default:
			s.Reflected++
			lat = append(lat, r.Latency)
			if r.Superseded {
				s.Superseded++
			}
		}
	}
	s.Lost = s.Late + s.Unseen + s.Mismatched
	if len(lat) > 0 {
		slices.Sort(lat)
		s.P50, s.P90, s.P99 = rank(lat, 0.50), rank(lat, 0.90), rank(lat, 0.99)
		s.Max = &lat[len(lat)-1]
	}
	return s
}

// rank is the nearest-rank percentile of sorted values: the smallest value with at least q of the
// values at or below it (no interpolation, so it is always a measured latency).
func rank(sorted []time.Duration, q float64) *time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	v := sorted[min(max(i, 0), len(sorted)-1)]
	return &v
}

// Knee is the lowest rate whose p50 exceeds twice the p50 at the lowest rate; ok is false when no
// rate does (or fewer than two rates have a p50). p50s maps rate to p50.
func Knee(p50s map[float64]time.Duration) (rate float64, ok bool) {
	rates := make([]float64, 0, len(p50s))
	for r := range p50s {
		rates = append(rates, r)
	}
	slices.Sort(rates)
	if len(rates) < 2 {
		return 0, false
	}
	base := p50s[rates[0]]
	for _, r := range rates[1:] {
		if p50s[r] > 2*base {
			return r, true
		}
	}
	return 0, false
}
