package churn

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"istio.io/istio/pkg/workloadapi"

	"github.com/ambientmc/ambientmc/framework/xdswatch"
)

// RestoreReady makes every churned pod Ready again (unmeasured) and waits for the watcher to agree.
func RestoreReady(ctx context.Context, w *xdswatch.Watcher, targets []*Pods, limit time.Duration) error {
	for _, p := range targets {
		if _, err := p.RestoreReady(ctx); err != nil {
			return err
		}
	}
	return WaitShown(ctx, w, targets, limit)
}

// RestorePods puts every churned cluster's scale pods back as they were found (names, addresses,
// nodes, readiness), each cluster at once, and waits for the watcher to agree; it returns how many
// replaced pods it recreated.
func RestorePods(ctx context.Context, w *xdswatch.Watcher, targets []*Pods, limit time.Duration) (int, error) {
	var recreated atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for _, p := range targets {
		g.Go(func() error {
			n, err := p.Restore(gctx)
			recreated.Add(int64(n))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return int(recreated.Load()), fmt.Errorf("restoring the churned pods: %w", err)
	}
	return int(recreated.Load()), WaitShown(ctx, w, targets, limit)
}

// WaitShown waits until the watcher shows every target's pods as the API has them.
func WaitShown(ctx context.Context, w *xdswatch.Watcher, targets []*Pods, limit time.Duration) error {
	truth, err := truthOf(ctx, targets)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	if err := w.WaitFor(wctx, func(w *xdswatch.Watcher) bool { return Shows(w.Addresses(), truth) }); err != nil {
		return fmt.Errorf("the watcher never showed the pods as the API has them: %w", err)
	}
	return nil
}

// Shows says whether every key of truth is in its state in addrs.
func Shows(addrs map[string]*workloadapi.Address, truth map[string]string) bool {
	for k, v := range truth {
		if StateOf(k, addrs[k]) != v {
			return false
		}
	}
	return true
}
