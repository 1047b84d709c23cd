package churn

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/expctx"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/framework/xdswatch"
)

// RemoteUnreadyFinding turns one, then every endpoint of a remote service unready and records the
// capacity the watched istiod (of x's observed cluster) sends for it. The pinned source counts every
// workload of the service on the network, Ready or not (pilot/pkg/serviceregistry/ambient/
// multicluster.go 342-348); each reading is fenced by a capacity change of another service in the
// same cluster, which istiod sees after the flips. Everything is put back before it returns. It
// needs two services (one to fence with).
func RemoteUnreadyFinding(ctx context.Context, x *expctx.Context, w *xdswatch.Watcher, c *cluster.Cluster, p *Pods, limit time.Duration) (f *report.ChurnFinding, err error) {
	observer, scale := x.Observed.Name, x.Scale
	if scale.Services < 2 {
		return nil, fmt.Errorf("the remote readiness finding needs two services (one to fence with); the scale has %d", scale.Services)
	}
	keys, err := SplitHorizonKeys(w.Addresses(), c, scale)
	if err != nil {
		return nil, err
	}
	key, fenceKey := keys[0], keys[1]
	n, nFence := p.Count(0), p.Count(1)
	capacity := func() int {
		v, _ := strconv.Atoi(strings.TrimPrefix(StateOf(key, w.Addresses()[key]), "capacity="))
		return v
	}
	waitState := func(k, want string) error {
		wctx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		if err := w.WaitFor(wctx, func(w *xdswatch.Watcher) bool { return StateOf(k, w.Addresses()[k]) == want }); err != nil {
			return fmt.Errorf("watcher: %s to reach %s (has %s): %w", k, want, StateOf(k, w.Addresses()[k]), err)
		}
		return nil
	}
	// fence adds a pod of the other service and waits for its capacity to show.
	var fences []*Pod
	fence := func() error {
		pd, err := p.AddPod(ctx, 1)
		if err != nil {
			return err
		}
		fences = append(fences, pd)
		return waitState(fenceKey, Capacity(nFence+len(fences)))
	}
	var flipped []*Pod
	for i := range n {
		flipped = append(flipped, p.PodAt(0, i))
	}
	// Put everything back and wait for the watcher to agree, whatever happened.
	defer func() {
		for _, pd := range flipped {
			err = errors.Join(err, p.SetPodReady(ctx, pd, true))
		}
		for _, pd := range fences {
			err = errors.Join(err, p.RemovePod(ctx, pd))
		}
		if err == nil {
			err = errors.Join(waitState(fenceKey, Capacity(nFence)), waitState(key, Capacity(n)))
		}
	}()

	before := capacity()
	if err := p.SetPodReady(ctx, flipped[0], false); err != nil {
		return nil, err
	}
	if err := fence(); err != nil {
		return nil, err
	}
	one := capacity()
	for _, pd := range flipped[1:] {
		if err := p.SetPodReady(ctx, pd, false); err != nil {
			return nil, err
		}
	}
	if err := fence(); err != nil {
		return nil, err
	}
	all := capacity()
	status := w.Addresses()[key].GetWorkload().GetStatus().String()

	f = &report.ChurnFinding{
		Cluster: c.Name, Service: workload.ServiceName(0), Endpoints: n,
		CapacityBefore: before, CapacityWithOneUnready: one, CapacityWithAllUnready: all,
		UnreadyCountedInCapacity: one == n && all == n,
	}
	if f.UnreadyCountedInCapacity {
		f.Detail = fmt.Sprintf("Unready remote endpoints stay in the split-horizon capacity, as the pinned source reads (multicluster.go:342-348): "+
			"with 1 of %d endpoints of %s in %s unready, istiod %s still sends capacity %d; with all %d unready, still %d (workload status %s). "+
			"A ztunnel in another cluster keeps weighting %s's network by endpoints that cannot serve, and keeps sending to its gateway when none can.",
			n, f.Service, c.Name, observer, one, n, all, status, c.Name)
	} else {
		f.Detail = fmt.Sprintf("Unready remote endpoints leave the split-horizon capacity: with 1 of %d endpoints of %s in %s unready the capacity was %d, "+
			"with all unready %d (workload status %s), unlike the pinned source's reading of multicluster.go:342-348.", n, f.Service, c.Name, one, all, status)
	}
	return f, nil
}
