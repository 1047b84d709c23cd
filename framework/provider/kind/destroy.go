package kind

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ambientmc/ambientmc/framework/dockerhost"
	"github.com/ambientmc/ambientmc/framework/kindconfig"
)

// CollectLogs writes kind's logs of every created cluster to RunDir/logs/<name> (after a failed
// create, and when the env keeps a failed run's logs); it returns the directory, or "" when no
// cluster exists.
func (p *Provider) CollectLogs() string {
	p.mu.Lock()
	names := append([]string(nil), p.created...)
	p.mu.Unlock()
	if len(names) == 0 {
		return ""
	}
	dir := filepath.Join(p.opts.RunDir, "logs")
	fmt.Fprintf(p.opts.Log, "ambientmc: kind: collecting the logs of %d clusters into %s\n", len(names), dir)
	for _, n := range names {
		if err := p.kind.CollectLogs(n, filepath.Join(dir, n)); err != nil {
			fmt.Fprintf(p.opts.Log, "ambientmc: kind: collecting logs of %s: %v\n", n, err)
		}
	}
	return dir
}

// createStopWait bounds how long Destroy waits for a kind create whose nodes it removed to
// return: its next docker command fails once the node is gone, which takes seconds.
var createStopWait = 30 * time.Second

// Destroy deletes every cluster Create started, the run network, and puts the host's kernel
// settings back. A kind create still running (Ctrl-C, SIGTERM or the deadline guard while the
// clusters start) is stopped first (stopCreates). It is idempotent, safe after a partial create,
// and runs once at a time: a second caller waits for the first and finds nothing left. With Keep
// it deletes nothing and prints the one command that removes it all (keep.go).
func (p *Provider) Destroy(context.Context) error {
	p.destroying.Lock()
	defer p.destroying.Unlock()
	p.mu.Lock()
	p.closed = true
	if p.guard != nil {
		p.guard.Stop()
	}
	p.mu.Unlock()
	if p.opts.Keep {
		p.store.Remove()
		p.printKept()
		return nil
	}
	stopped := p.stopCreates()
	p.store.Remove()
	p.mu.Lock()
	names := slices.Clone(p.created)
	handedOver := p.handedOver
	p.handedOver = false
	p.mu.Unlock()
	if handedOver {
		// The clusters go as a whole: the kube part only has to stop its port-forwards and
		// node keepers, not wait for its objects to be deleted one by one.
		done, cancel := context.WithCancel(context.Background())
		cancel()
		_ = p.opts.InCluster.Destroy(done)
	}
	var mu sync.Mutex
	var errs []error
	if live := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return slices.Contains(stopped, n) }); p.guarded && len(live) > 0 {
		lines := p.guardCounters(live)
		for _, l := range lines {
			fmt.Fprintf(p.opts.Log, "ambientmc: kind: %s\n", l)
		}
		_ = os.WriteFile(filepath.Join(p.opts.RunDir, "egress-guard.txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	}
	sem := make(chan struct{}, p.opts.Parallel)
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			err := p.kind.Delete(n, p.KubeconfigPath(strings.TrimPrefix(n, kindconfig.NamePrefix)))
			if err != nil && p.thawNodes(n) {
				err = p.kind.Delete(n, p.KubeconfigPath(strings.TrimPrefix(n, kindconfig.NamePrefix)))
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("kind delete cluster --name %s: %w", n, err))
				return
			}
			p.forget(n)
			fmt.Fprintf(p.opts.Log, "ambientmc: kind: deleted %s\n", n)
		})
	}
	wg.Wait()
	if len(errs) == 0 {
		// The network goes once no node is left on it.
		if err := p.removeRunNetwork(context.Background()); err != nil {
			errs = append(errs, err)
		}
	}
	p.mu.Lock()
	k := p.kernel
	p.mu.Unlock()
	changed, err := k.Restore()
	if len(changed) > 0 {
		fmt.Fprintf(p.opts.Log, "ambientmc: kind: put the host back as it was: %s\n", strings.Join(changed, ", "))
	}
	if err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// stopCreates ends the kind creates still running and returns their names. kind cannot cancel a
// create, and waiting one out can take all of -kind.wait: removing its node containers (by kind's
// cluster label) makes its next step fail at once. A create that has not made them yet (still
// checking the image, or in its docker run) makes them later, so they are removed every second
// until the create returns, for at most createStopWait. Destroy's kind delete, once the create
// returned, removes by the same label whatever it made meanwhile.
func (p *Provider) stopCreates() []string {
	p.mu.Lock()
	running := maps.Clone(p.inflight)
	p.mu.Unlock()
	if len(running) == 0 {
		return nil
	}
	names := slices.Sorted(maps.Keys(running))
	fmt.Fprintf(p.opts.Log, "ambientmc: kind: stopping the create of %s: removing its node containers until it returns\n", strings.Join(names, ", "))
	ctx, cancel := context.WithTimeout(context.Background(), createStopWait)
	defer cancel()
	for pending := slices.Clone(names); ; {
		for _, n := range pending {
			if err := p.removeContainers(ctx, n); err != nil && ctx.Err() == nil {
				fmt.Fprintf(p.opts.Log, "ambientmc: kind: %s: removing its containers: %v\n", n, err)
			}
		}
		pending = slices.DeleteFunc(pending, func(n string) bool { return closed(running[n]) })
		if len(pending) == 0 {
			return names
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			fmt.Fprintf(p.opts.Log, "ambientmc: kind: the create of %s did not return within %s of the removal of its nodes: deleting what it made so far\n", strings.Join(pending, ", "), createStopWait)
			return names
		}
	}
}

// closed says whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// kindClusterLabel is the label kind gives every container of a cluster, valued with its name.
const kindClusterLabel = "io.x-k8s.kind.cluster"

// removeContainers force-removes kind cluster name's containers through Docker, thawing a node
// whose frozen cgroup keeps it from dying.
func (p *Provider) removeContainers(ctx context.Context, name string) error {
	ids, err := p.docker.LabelledContainers(ctx, kindClusterLabel+"="+name)
	if err != nil || len(ids) == 0 {
		return err
	}
	err = p.docker.RemoveContainers(ctx, ids)
	if err != nil && p.thawContainers(name, ids) {
		err = p.docker.RemoveContainers(ctx, ids)
	}
	return err
}

// forget drops kind name from the clusters left to delete.
func (p *Provider) forget(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.created = slices.DeleteFunc(p.created, func(n string) bool { return n == name })
}

// thawNodes thaws the frozen cgroups that keep cluster name's nodes from dying (dockerhost.ThawFrozen) and says
// whether it thawed any, so the delete is worth another try.
func (p *Provider) thawNodes(name string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ids, err := p.docker.LabelledContainers(ctx, kindClusterLabel+"="+name)
	if err != nil {
		fmt.Fprintf(p.opts.Log, "ambientmc: kind: %s: listing its containers: %v\n", name, err)
		return false
	}
	return p.thawContainers(name, ids)
}

// thawContainers is thawNodes for cluster name's containers ids, already listed.
func (p *Provider) thawContainers(name string, ids []string) bool {
	thawed, err := dockerhost.ThawFrozen(p.freezerRoot(), ids)
	if err != nil {
		fmt.Fprintf(p.opts.Log, "ambientmc: kind: %s: thawing its frozen cgroups: %v\n", name, err)
	}
	if len(thawed) > 0 {
		fmt.Fprintf(p.opts.Log, "ambientmc: kind: %s: the delete failed with %d frozen cgroup(s) in its node (a pod container frozen mid-update by runc on cgroup v1), thawed them and deleting again: %s\n",
			name, len(thawed), strings.Join(thawed, ", "))
	}
	return len(thawed) > 0
}

// freezerRoot is cgroup v1's freezer hierarchy, or a test's stand-in.
func (p *Provider) freezerRoot() string {
	if p.opts.FreezerRoot != "" {
		return p.opts.FreezerRoot
	}
	return dockerhost.FreezerRoot
}

// killNow removes the clusters' containers and the run network at once, without kind: the hook a
// second Ctrl-C runs (proc.OnKill), when there is no time for kind's orderly delete. It reads
// what is left to delete, so a Destroy the first Ctrl-C started and this one interrupts leaves
// nothing either.
func (p *Provider) killNow() {
	p.mu.Lock()
	names := append([]string(nil), p.created...)
	k := p.kernel
	keep := p.opts.Keep
	p.mu.Unlock()
	if keep {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range names {
		_ = p.removeContainers(ctx, n)
	}
	_ = p.removeRunNetwork(ctx)
	_, _ = k.Restore()
}
