package env

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ambientmc/ambientmc/framework/cluster"
)

// clusterParts runs the setup steps' per-cluster parts (Step.Each). Where the provider makes
// clusters ready a few at a time (cluster.Facts.ReadyEarly), each part starts as soon as its cluster
// is ready, while later clusters start: a hundred clusters start in waves for minutes, and their
// workloads need nothing but their own cluster. Elsewhere each step's parts run in the step's turn.
type clusterParts struct {
	steps []Step // those with Each, in order
	// ctx is the parts' (and an early Create's): a failed part cancels it, with its error as cause.
	ctx    context.Context
	cancel context.CancelCauseFunc
	early  bool
	runs   map[string]*stepParts // by step name, fixed at construction
	mu     sync.Mutex
	first  error // the first part's failure, naming its step
}

// stepParts are one step's running parts.
type stepParts struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

func newClusterParts(ctx context.Context, steps []Step) *clusterParts {
	p := &clusterParts{runs: map[string]*stepParts{}}
	for _, s := range steps {
		if s.Each != nil {
			p.steps = append(p.steps, s)
			p.runs[s.Name] = &stepParts{}
		}
	}
	p.ctx, p.cancel = context.WithCancelCause(ctx)
	return p
}

// startEarly has the provider hand over each cluster as it is ready, where it can. Create runs on
// the context it returns, so a failed part stops it.
func (p *clusterParts) startEarly(e *Env) context.Context {
	if !e.Provider.Facts().ReadyEarly || len(p.steps) == 0 {
		return p.ctx
	}
	p.early = true
	for _, s := range p.steps {
		e.Statusf("%s: starting in each cluster as soon as it is ready", s.Name)
	}
	start := func(c *cluster.Cluster) {
		for _, s := range p.steps {
			p.start(e, s, c)
		}
	}
	e.onReady.Store(&start)
	return p.ctx
}

func (p *clusterParts) start(e *Env, s Step, c *cluster.Cluster) {
	r := p.runs[s.Name]
	r.wg.Go(func() {
		err := s.Each(p.ctx, e, c)
		if err == nil {
			return
		}
		r.mu.Lock()
		r.errs = append(r.errs, err)
		r.mu.Unlock()
		p.mu.Lock()
		if p.first == nil {
			p.first = fmt.Errorf("%s: %w", s.Name, err)
		}
		p.mu.Unlock()
		p.cancel(err)
	})
}

// failed is the first part's error, nil while none has failed.
func (p *clusterParts) failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.first
}

// finish runs step s's parts in every cluster, where they did not start early, and waits for them
// all. It returns the errors of the parts that failed, each naming its cluster, leaving out those
// that only stopped because another had failed.
func (p *clusterParts) finish(e *Env, s Step) error {
	r := p.runs[s.Name]
	if !p.early {
		for _, c := range e.Clusters {
			p.start(e, s, c)
		}
	}
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	var faults []error
	for _, err := range r.errs {
		if !errors.Is(err, context.Canceled) {
			faults = append(faults, err)
		}
	}
	if len(faults) == 0 && len(r.errs) > 0 {
		return r.errs[0] // every part stopped on the run's own end (a timeout, Ctrl-C): once is enough
	}
	return errors.Join(faults...)
}

// stop cancels every part still running and waits for them, so none outlives a failed setup.
func (p *clusterParts) stop() {
	p.cancel(context.Canceled)
	for _, r := range p.runs {
		r.wg.Wait()
	}
}

// run does step s: its part in every cluster (Each), then Run.
func (s Step) run(ctx context.Context, e *Env) error {
	if s.Each != nil {
		if err := e.parts.finish(e, s); err != nil {
			return err
		}
	}
	if s.Run == nil {
		return nil
	}
	return s.Run(ctx, e)
}
