// Package churn makes endpoint changes at a rate (pods replaced or flipped unready in a cluster)
// and tracks when a ztunnel-like xDS watcher reflects each of them.
//
// A tracked change is one API write with one expected effect at the watcher: a key (a pod's
// workload UID, or a remote network's split-horizon workload of a service) and the state the key
// must reach (absent, healthy, unhealthy, or a capacity). Its latency runs from sending the write
// to the arrival, in this process, of the update that shows the state.
package churn

import (
	"fmt"
	"sync"
	"time"
)

// Absent is the state of a key the watcher does not hold.
const Absent = ""

// Change is one tracked API write.
type Change struct {
	Key  string
	Want string
	// Wrote is when the write was sent (before the API server saw it).
	Wrote time.Time

	// Set once, under the tracker's lock, when the watcher first held Want (or a later change to
	// the same key was reflected first: Superseded).
	reflected  time.Time
	superseded bool
	done       chan struct{}
}

// Done is closed once the change is reflected.
func (c *Change) Done() <-chan struct{} { return c.done }

// Tracker matches the watcher's updates to the changes written so far.
type Tracker struct {
	mu      sync.Mutex
	state   map[string]string    // what the watcher holds now, by key
	pending map[string][]*Change // unreflected changes by key, in write order
	all     []*Change
	seen    map[string]bool // keys Observe has set
}

// NewTracker starts from the watcher's state at subscription (keys to states; absent keys are
// Absent).
func NewTracker(initial map[string]string) *Tracker {
	t := &Tracker{state: map[string]string{}, pending: map[string][]*Change{}, seen: map[string]bool{}}
	t.Seed(initial)
	return t
}

// Seed sets the state of keys no update has reached yet: a watcher snapshot taken at
// subscription, which updates observed since then supersede.
func (t *Tracker) Seed(initial map[string]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, v := range initial {
		if v != Absent && !t.seen[k] {
			t.state[k] = v
		}
	}
}

// Expect registers a change before its write is sent. It refuses a change that would not change
// what the watcher is due to hold (the last pending state of the key, else its current state):
// such a write could never be seen, so it cannot be timed.
func (t *Tracker) Expect(key, want string, wrote time.Time) (*Change, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	due := t.state[key]
	if p := t.pending[key]; len(p) > 0 {
		due = p[len(p)-1].Want
	}
	if due == want {
		return nil, fmt.Errorf("change of %s to %q: the watcher is already due to hold that state", key, show(want))
	}
	c := &Change{Key: key, Want: want, Wrote: wrote, done: make(chan struct{})}
	t.pending[key] = append(t.pending[key], c)
	t.all = append(t.all, c)
	return c, nil
}

// Observe records that the watcher now holds state for key (Absent: removed), from an update
// that arrived at at. The latest pending change of key whose state this is counts as reflected,
// and so does every earlier pending change of the key: their states were superseded by a later
// one before any push showed them, so this push is when a ztunnel caught up with them.
func (t *Tracker) Observe(key, state string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seen[key] = true
	if state == Absent {
		delete(t.state, key)
	} else {
		t.state[key] = state
	}
	p := t.pending[key]
	hit := -1
	for i, c := range p {
		if c.Want == state {
			hit = i
		}
	}
	if hit < 0 {
		return
	}
	for i, c := range p[:hit+1] {
		c.reflected = at
		c.superseded = i < hit
		close(c.done)
	}
	if rest := p[hit+1:]; len(rest) > 0 {
		t.pending[key] = rest
	} else {
		delete(t.pending, key)
	}
}

// State is what the watcher holds for key now.
func (t *Tracker) State(key string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state[key]
}

// Pending is how many changes are not reflected yet.
func (t *Tracker) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, p := range t.pending {
		n += len(p)
	}
	return n
}

// Busy says whether key has a change not reflected yet.
func (t *Tracker) Busy(key string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pending[key]) > 0
}

// LastWrite is when the newest tracked write was sent (zero when none was).
func (t *Tracker) LastWrite() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	var last time.Time
	for _, c := range t.all {
		if c.Wrote.After(last) {
			last = c.Wrote
		}
	}
	return last
}

// Result is one change as the tracker saw it.
type Result struct {
	Key, Want string
	Wrote     time.Time
	// Latency is from the write to the reflecting update; meaningful only when Reflected.
	Latency    time.Duration
	Reflected  bool
	Superseded bool
}

// Results returns every change in write order.
func (t *Tracker) Results() []Result {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Result, 0, len(t.all))
	for _, c := range t.all {
		r := Result{Key: c.Key, Want: c.Want, Wrote: c.Wrote, Superseded: c.superseded}
		if !c.reflected.IsZero() {
			r.Reflected, r.Latency = true, c.reflected.Sub(c.Wrote)
		}
		out = append(out, r)
	}
	return out
}

// Mismatches compares the watcher's state with the truth (key to state, for every key the run
// touched) and returns the keys that differ, with what the watcher holds.
func (t *Tracker) Mismatches(truth map[string]string) map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]string{}
	for k, want := range truth {
		if got := t.state[k]; got != want {
			out[k] = got
		}
	}
	return out
}

func show(state string) string {
	if state == Absent {
		return "absent"
	}
	return state
}
