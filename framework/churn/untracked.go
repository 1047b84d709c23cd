package churn

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/workload"
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
	ns, name := p.scale.ServiceNamespace(svc), workload.ServiceName(svc)
	if _, err := p.c.Client.CoreV1().Pods(ns).Create(ctx, workload.NewPod(ns, pd.name, name, name, workload.NodeName(pd.node)), metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("cluster %s: creating pod %s/%s: %w", p.c.Name, ns, pd.name, err)
	}
	return pd, p.writeStatus(ctx, pd, true)
}

// RemovePod deletes pd, untracked.
func (p *Pods) RemovePod(ctx context.Context, pd *Pod) error {
	p.mu.Lock()
	p.forget(indexOf(p.order, pd), pd)
	p.mu.Unlock()
	ns := p.scale.ServiceNamespace(pd.svc)
	if err := p.c.Client.CoreV1().Pods(ns).Delete(ctx, pd.name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}); err != nil {
		return fmt.Errorf("cluster %s: deleting pod %s/%s: %w", p.c.Name, ns, pd.name, err)
	}
	p.mu.Lock()
	delete(p.usedIPs, pd.ip)
	p.mu.Unlock()
	return nil
}
