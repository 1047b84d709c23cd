package churn

import (
	"context"
	"time"
)

func (p *Pods) replaceLocal(tr *Tracker) (func(context.Context) error, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := -1
	for i, pd := range p.order {
		if !p.inflight[pd] && !tr.Busy(p.uid(pd)) {
			old = i
			break
		}
	}
	if old < 0 {
		return nil, errNoIdle
	}
	victim := p.order[old]
	p.forget(old, victim)
	repl, err := p.newPod(victim.svc)
	if err != nil {
		return nil, err
	}
	p.inflight[repl] = true
	return func(ctx context.Context) error {
		defer p.done(repl)
		if _, err := p.delete(ctx, tr, victim, p.uid(victim), Absent); err != nil {
			return err
		}
		_, err := p.create(ctx, tr, repl, p.uid(repl), Healthy)
		return err
	}, nil
}

func (p *Pods) replaceRemote(tr *Tracker) (func(context.Context) error, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	svc := -1
	for i := range p.scale.Services {
		s := (p.cursor + i) % p.scale.Services
		if !p.busySvc[s] && !tr.Busy(p.shKeys[s]) {
			svc = s
			break
		}
	}
	if svc < 0 {
		return nil, errNoIdle
	}
	p.cursor = svc + 1
	victim := p.services[svc][0]
	n := len(p.services[svc])
	p.forget(indexOf(p.order, victim), victim)
	repl, err := p.newPod(svc)
	if err != nil {
		return nil, err
	}
	p.busySvc[svc] = true
	return func(ctx context.Context) error {
		defer func() {
			p.mu.Lock()
			delete(p.busySvc, svc)
			p.mu.Unlock()
		}()
		key := p.shKeys[svc]
		ch, err := p.delete(ctx, tr, victim, key, Capacity(n-1))
		if err != nil {
			return err
		}
		p.waitShown(ctx, ch)
		if ch, err = p.create(ctx, tr, repl, key, Capacity(n)); err != nil {
			return err
		}
		p.waitShown(ctx, ch)
		return ctx.Err()
	}, nil
}

// waitShown waits until ch is reflected, or the limit passed (the change is then lost, and
// Summarize counts it).
func (p *Pods) waitShown(ctx context.Context, ch *Change) {
	t := time.NewTimer(p.limit)
	defer t.Stop()
	select {
	case <-ch.Done():
	case <-t.C:
	case <-ctx.Done():
	}
}
