package analysis

import "github.com/ambientmc/ambientmc/framework/report"

// ProfilesCost is the wall time the profiles cost a run: the heap and goroutine profiles' seconds
// plus the time the suite waited for CPU profiles to end (see report.Profile).
func ProfilesCost(ps []report.Profile) float64 {
	var s float64
	for _, p := range ps {
		if p.Kind == "cpu" {
			if p.WaitedSeconds != nil {
				s += *p.WaitedSeconds
			}
			continue
		}
		s += p.Seconds
	}
	return s
}
