package join

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/report"
)

// statusPoll spaces the status samples.
const statusPoll = 200 * time.Millisecond

// StatusGone is the status of a cluster istiod no longer lists; the others are istiod's own
// spelling (measure.Status*).
const StatusGone = "gone"

// StatusWatch samples what istiod says of one remote cluster's sync, through its metric and its
// /debug/clusterz, beside what the framework knows it must be (Expect), until stopped. A stretch
// where istiod said otherwise for longer than allowed (one sync period) is a disagreement.
type StatusWatch struct {
	i       *mesh.Istiod
	id      string
	start   time.Time
	allowed time.Duration
	stopped chan struct{}
	done    chan struct{}

	mu      sync.Mutex
	want    []string // statuses that are true now; nil: a change is under way, anything goes
	why     string   // what the framework knows, for the disagreement text
	samples []statusSample
	// disagreed are the first samples of the stretches judged disagreements, once stopped.
	disagreed []statusSample
}

type statusSample struct {
	at               time.Duration // since start
	metric, clusterz string
	want             []string
	why              string
}

// WatchStatus starts sampling istiod i's status of cluster id; allowed is how long a disagreement
// may last (one sync period). It expects nothing until Expect is called.
func WatchStatus(ctx context.Context, i *mesh.Istiod, id string, allowed time.Duration) *StatusWatch {
	w := newStatusWatch(i, id, allowed)
	go func() {
		defer close(w.done)
		t := time.NewTicker(statusPoll)
		defer t.Stop()
		for {
			w.sample(ctx)
			select {
			case <-ctx.Done():
				return
			case <-w.stopped:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func newStatusWatch(i *mesh.Istiod, id string, allowed time.Duration) *StatusWatch {
	return &StatusWatch{i: i, id: id, start: time.Now(), allowed: allowed, stopped: make(chan struct{}), done: make(chan struct{})}
}

// Expect says which statuses are true from now on, and why (what the framework knows); no
// statuses means a change is under way.
func (w *StatusWatch) Expect(why string, statuses ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.want, w.why = statuses, why
}

func (w *StatusWatch) sample(ctx context.Context) {
	m, err := w.i.Sampler().Scrape(ctx)
	if err != nil {
		return // istiod away (a restart): nothing said, nothing to compare
	}
	metric := m.RemoteStatus[w.id]
	if metric == "" {
		metric = StatusGone
	}
	clusterz := "unread"
	if cs, err := w.i.Sampler().Clusterz(ctx); err == nil {
		clusterz = StatusGone
		if st, ok := measure.SyncStatusOf(cs, w.id); ok {
			clusterz = st
		}
	}
	w.record(metric, clusterz)
}

func (w *StatusWatch) record(metric, clusterz string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples = append(w.samples, statusSample{at: time.Since(w.start), metric: metric, clusterz: clusterz, want: w.want, why: w.why})
}

// Saw says whether istiod's metric said status in any sample so far.
func (w *StatusWatch) Saw(status string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.ContainsFunc(w.samples, func(s statusSample) bool { return s.metric == status })
}

// Stop ends the sampling and judges it.
func (w *StatusWatch) Stop() *report.StatusFigures {
	close(w.stopped)
	<-w.done
	return w.judge()
}

func (w *StatusWatch) judge() *report.StatusFigures {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := &report.StatusFigures{Samples: len(w.samples), AllowedSeconds: w.allowed.Seconds()}
	w.disagreed = nil
	var run []statusSample
	flush := func() {
		if len(run) > 0 && run[len(run)-1].at-run[0].at >= w.allowed {
			f, l := run[0], run[len(run)-1]
			w.disagreed = append(w.disagreed, f)
			out.Disagreements = append(out.Disagreements, fmt.Sprintf("%.1f-%.1fs: istiod said %s (clusterz %s) while the framework knew %s (%s)",
				f.at.Seconds(), l.at.Seconds(), f.metric, f.clusterz, strings.Join(f.want, " or "), f.why))
		}
		run = nil
	}
	for _, s := range w.samples {
		wrong := s.want != nil && !slices.Contains(s.want, s.metric)
		split := s.clusterz != "unread" && s.clusterz != s.metric
		if !wrong && !split {
			flush()
			continue
		}
		if len(run) > 0 && (run[0].metric != s.metric || run[0].clusterz != s.clusterz) {
			flush()
		}
		run = append(run, s)
	}
	flush()
	return out
}

// OnlyDisagreedAs says, once stopped, whether there were disagreements and every one of them was
// istiod's metric saying metric while /debug/clusterz said clusterz: one known fault, and no other.
func (w *StatusWatch) OnlyDisagreedAs(metric, clusterz string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.disagreed) > 0 && !slices.ContainsFunc(w.disagreed, func(s statusSample) bool { return s.metric != metric || s.clusterz != clusterz })
}

// StatusText sums up a status watch for a check's detail.
func StatusText(s *report.StatusFigures) string {
	if len(s.Disagreements) == 0 {
		return fmt.Sprintf("sync status agreed with what the framework knew in all %d samples", s.Samples)
	}
	return fmt.Sprintf("sync status disagreed for longer than %.1fs: %s", s.AllowedSeconds, strings.Join(s.Disagreements, "; "))
}

// SyncPeriod is how long a disagreement may last: the remote's own sync time as measured, at
// least a second (two status polls and istiod's debounce).
func SyncPeriod(measured time.Duration) time.Duration { return max(time.Second, measured) }
