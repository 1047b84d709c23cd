package proc

import (
	"slices"
	"sync"
	"syscall"
	"time"
)

var registry struct {
	mu    sync.Mutex
	procs []*Process // in start order
}

func register(p *Process) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	registry.procs = append(registry.procs, p)
}

func unregister(p *Process) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	registry.procs = slices.DeleteFunc(registry.procs, func(q *Process) bool { return q == p })
}

// Running returns the processes started and not yet exited, in start order.
func Running() []*Process {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return slices.Clone(registry.procs)
}

// StopAll stops every running process in parallel, each with Stop(grace), and returns when all
// have exited. Stop errors are dropped: StopAll is for teardown.
func StopAll(grace time.Duration) {
	var wg sync.WaitGroup
	for _, p := range Running() {
		wg.Go(func() { _ = p.Stop(grace) })
	}
	wg.Wait()
}

// killAll sends SIGKILL to every running process group without waiting.
func killAll() {
	for _, p := range Running() {
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	}
	killHooks.mu.Lock()
	hooks := killHooks.fns
	killHooks.mu.Unlock()
	for _, h := range hooks {
		h()
	}
}

// killHooks remove what outlives a killed process group: a kind provider's containers and
// network, which Docker keeps whatever happens to the test process.
var killHooks struct {
	mu  sync.Mutex
	fns []func()
}

// OnKill registers fn to run when a second signal kills everything at once (TrapSignals): it
// must be quick and must not wait for anything of the test process.
func OnKill(fn func()) {
	killHooks.mu.Lock()
	defer killHooks.mu.Unlock()
	killHooks.fns = append(killHooks.fns, fn)
}
