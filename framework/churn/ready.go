package churn

import (
	"context"
	"time"
)

func (p *Pods) flipLocal(tr *Tracker) (func(context.Context) error, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var pd *Pod
	for i := range p.order {
		cand := p.order[(p.cursor+i)%len(p.order)]
		if !p.inflight[cand] && !tr.Busy(p.uid(cand)) {
			pd = cand
			p.cursor = (p.cursor + i + 1) % len(p.order)
			break
		}
	}
	if pd == nil {
		return nil, errNoIdle
	}
	pd.ready = !pd.ready
	ready := pd.ready
	p.inflight[pd] = true
	return func(ctx context.Context) error {
		defer p.done(pd)
		want := Unhealthy
		if ready {
			want = Healthy
		}
		key := p.uid(pd)
		if _, err := tr.Expect(key, want, time.Now()); err != nil {
			return err
		}
		p.touch(key)
		return p.writeStatus(ctx, pd, ready)
	}, nil
}

// RestoreReady makes every pod Ready again, untracked; it returns the pods it flipped.
func (p *Pods) RestoreReady(ctx context.Context) (int, error) {
	p.mu.Lock()
	var flip []*Pod
	for _, pd := range p.order {
		if !pd.ready {
			pd.ready = true
			flip = append(flip, pd)
		}
	}
	p.mu.Unlock()
	for _, pd := range flip {
		if err := p.writeStatus(ctx, pd, true); err != nil {
			return 0, err
		}
	}
	return len(flip), nil
}
