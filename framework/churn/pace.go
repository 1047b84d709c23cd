package churn

import (
	"context"
	"fmt"
	"time"
)

// Pacer schedules change k at start + k/rate. A change that starts late does not shift the ones
// after it, so the average rate holds when the writer catches up; the late starts are counted.
type Pacer struct {
	start    time.Time
	interval time.Duration
	n        int
	// Late counts changes that began more than one interval behind their schedule.
	Late int
}

// NewPacer paces changes at rate per second from start.
func NewPacer(start time.Time, rate float64) (*Pacer, error) {
	if !(rate > 0) || rate > 1e6 {
		return nil, fmt.Errorf("churn rate %g pods/s: must be above 0 and at most 1e6", rate)
	}
	return &Pacer{start: start, interval: time.Duration(float64(time.Second) / rate)}, nil
}

// Next is when change number Count() is due.
func (p *Pacer) Next() time.Time { return p.start.Add(time.Duration(p.n) * p.interval) }

// Count is how many changes have been started.
func (p *Pacer) Count() int { return p.n }

// Interval is the time between two changes.
func (p *Pacer) Interval() time.Duration { return p.interval }

// Wait sleeps until the next change is due and counts it as started at now(); it returns early
// with ctx's error.
func (p *Pacer) Wait(ctx context.Context) error {
	if d := time.Until(p.Next()); d > 0 {
		if err := sleep(ctx, d); err != nil {
			return err
		}
	}
	p.Started(time.Now())
	return nil
}

// Started counts the due change as started at now.
func (p *Pacer) Started(now time.Time) {
	if now.Sub(p.Next()) > p.interval {
		p.Late++
	}
	p.n++
}

// Due is how many changes the schedule puts before end.
func (p *Pacer) Due(end time.Time) int {
	d := end.Sub(p.start)
	if d <= 0 {
		return 0
	}
	return int((d + p.interval - 1) / p.interval)
}
