package local

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/hostetcd"
	"github.com/ambientmc/ambientmc/topology"
)

// Clusters start in waves: a wave's API servers initialise together, then their
// controller-managers start, then the next wave begins. An API server's start is CPU-bound and
// reads and writes the shared etcd as it initialises; with all 50 at once, etcd reads missed their
// deadlines and an API server exited in its start-service-ip-repair-controllers hook. Part of a
// start is waiting (on etcd, on post-start hooks), so two per core keep the cores busy: 3 clusters
// on 2 shared cores took 8.5 s one at a time (2.6-3.0 s each), 7.3-9.3 s two at a time and
// 4.8-7.3 s all at once.

// DefaultWave is how many clusters start together by default: two per CPU, at least 2, at most 4.
func DefaultWave() int { return min(max(2*runtime.NumCPU(), 2), 4) }

// StartWaves returns the waves of the last Create.
func (p *Provider) StartWaves() []cluster.StartWave {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]cluster.StartWave(nil), p.waves...)
}

func (p *Provider) ready(c *cluster.Cluster) {
	p.mu.Lock()
	fn := p.onReady
	p.mu.Unlock()
	if fn != nil {
		fn(c)
	}
}

func (p *Provider) waveSize() int {
	if p.opts.Wave > 0 {
		return p.opts.Wave
	}
	return DefaultWave()
}

// startWaves starts every cluster of t, a wave at a time, and returns them in t's order.
func (p *Provider) startWaves(ctx context.Context, t *topology.Topology, etcd *hostetcd.Etcd) ([]*cluster.Cluster, error) {
	size := p.waveSize()
	out := make([]*cluster.Cluster, len(t.Clusters))
	begin := time.Now()
	for first := 0; first < len(t.Clusters); first += size {
		last := min(first+size, len(t.Clusters))
		w := cluster.StartWave{Start: time.Since(begin)}
		g, gctx := errgroup.WithContext(ctx)
		for i := first; i < last; i++ {
			tc := t.Clusters[i]
			w.Clusters = append(w.Clusters, tc.Name)
			g.Go(func() error {
				c, err := p.startCluster(gctx, tc, etcd, last-first)
				out[i] = c
				if err == nil {
					p.ready(c)
				}
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		w.Ready = time.Since(begin)
		for i := first; i < last; i++ {
			w.ClusterSeconds = append(w.ClusterSeconds, out[i].StartSeconds)
		}
		p.mu.Lock()
		p.waves = append(p.waves, w)
		p.mu.Unlock()
		if len(t.Clusters) > size {
			fmt.Fprintf(p.opts.Log, "ambientmc: clusters %d-%d of %d ready at %.1fs (wave of %d)\n", first+1, last, len(t.Clusters), w.Ready.Seconds(), size)
		}
	}
	return out, nil
}
