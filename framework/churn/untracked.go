package churn

import (
	"context"
)

// PodAt returns the i-th oldest live pod of service svc.
func (p *Pods) PodAt(svc, i int) *Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.services[svc][i]
}

// Count is how many live pods service svc has.
func (p *Pods) Count(svc int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.services[svc])
}

// SetPodReady writes the Ready condition of pd untracked and records it.
func (p *Pods) SetPodReady(ctx context.Context, pd *Pod, ready bool) error {
	p.mu.Lock()
	pd.ready = ready
	p.mu.Unlock()
	return p.writeStatus(ctx, pd, ready)
}

// AddPod creates one more Ready pod for svc, untracked, and returns it.
func (p *Pods) AddPod(ctx context.Context, svc int) (*Pod, error) {
	p.mu.Lock()
	pd, err := p.newPod(svc)
	p.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := p.createPod(ctx, pd); err != nil {
		return nil, err
	}
	return pd, p.writeStatus(ctx, pd, true)
}

// RemovePod deletes pd, untracked.
func (p *Pods) RemovePod(ctx context.Context, pd *Pod) error {
	p.mu.Lock()
	p.forget(indexOf(p.order, pd), pd)
	p.mu.Unlock()
	return p.deletePod(ctx, pd)
}
