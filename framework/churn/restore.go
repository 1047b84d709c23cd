package churn

import (
	"context"

	"golang.org/x/sync/errgroup"

	"github.com/ambientmc/ambientmc/framework/workload"
)

// Restore puts the cluster's scale pods back as NewPods found them: each replacement deleted, each
// pod it replaced created again under its name, address and node, and every pod's readiness as
// it was. A later test then meets the cluster a run without churn would have left it: a fresh
// istiod joined to churned remotes holds measurably more live heap per remote than one joined to
// untouched ones (docs/measurements.md#why-the-settings-are-what-they-are). It returns how many
// pods it recreated.
func (p *Pods) Restore(ctx context.Context) (int, error) {
	p.mu.Lock()
	found := map[string]Pod{}
	for _, o := range p.found {
		found[o.name] = o
	}
	live := map[string]*Pod{}
	var extra []*Pod
	for _, pd := range p.order {
		live[pd.name] = pd
		if _, ok := found[pd.name]; !ok {
			extra = append(extra, pd)
		}
	}
	var missing, flipped []*Pod
	for _, o := range p.found {
		switch pd := live[o.name]; {
		case pd == nil:
			missing = append(missing, &o) // o is this iteration's own copy
		case pd.ready != o.ready:
			pd.ready = o.ready
			flipped = append(flipped, pd)
		}
	}
	p.mu.Unlock()

	// Writes in flight as the workloads step sends them: one after another is far slower
	// (docs/measurements.md#why-the-settings-are-what-they-are), and this is cleanup, not
	// measurement.
	each := func(pods []*Pod, f func(context.Context, *Pod) error) error {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(workload.DefaultInFlight)
		for _, pd := range pods {
			g.Go(func() error { return f(gctx, pd) })
		}
		return g.Wait()
	}
	if err := each(extra, func(ctx context.Context, pd *Pod) error {
		if err := p.deletePod(ctx, pd); err != nil {
			return err
		}
		p.mu.Lock()
		p.forget(indexOf(p.order, pd), pd)
		p.mu.Unlock()
		return nil
	}); err != nil {
		return 0, err
	}
	if err := each(missing, func(ctx context.Context, pd *Pod) error {
		if err := p.createPod(ctx, pd); err != nil {
			return err
		}
		if err := p.writeStatus(ctx, pd, pd.ready); err != nil {
			return err
		}
		p.mu.Lock()
		p.services[pd.svc] = append(p.services[pd.svc], pd)
		p.order = append(p.order, pd)
		p.usedIPs[pd.ip] = true
		p.mu.Unlock()
		return nil
	}); err != nil {
		return 0, err
	}
	if err := each(flipped, func(ctx context.Context, pd *Pod) error { return p.writeStatus(ctx, pd, pd.ready) }); err != nil {
		return 0, err
	}
	return len(missing), nil
}
