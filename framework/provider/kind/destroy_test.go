package kind

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startHeldCreate starts Create of n clusters whose kind creates stay running until their node
// containers are removed, and waits until all n are in flight; the channel gets Create's error.
func startHeldCreate(t *testing.T, f *fixture, n int) <-chan error {
	t.Helper()
	f.kind.hold = make(chan struct{})
	var once sync.Once
	f.docker.onRemove = func([]string) { once.Do(func() { close(f.kind.hold) }) }
	errc := make(chan error, 1)
	go func() {
		_, err := f.p.Create(context.Background(), generate(t, n))
		errc <- err
	}()
	require.Eventually(t, func() bool {
		f.kind.mu.Lock()
		defer f.kind.mu.Unlock()
		return f.kind.running == n
	}, 5*time.Second, 10*time.Millisecond, "both kind creates running")
	return errc
}

// Ctrl-C, SIGTERM or the deadline guard while kind creates the clusters: Destroy removes the node
// containers at once (kind cannot cancel a create, and waiting one out takes all of -kind.wait),
// the creates fail and return, kind deletes what they made meanwhile, and only then the run
// network goes. Create returns after that, saying it was stopped, and collects no logs.
func TestDestroyStopsCreatesInFlightFakeDocker(t *testing.T) {
	f := newFixture(t, nil)
	f.docker.containers = map[string][]string{"ambientmc-cluster-1": {"id-1"}, "ambientmc-cluster-2": {"id-2"}}
	alive := -1
	f.docker.beforeNetworkRemove = func(string) { alive = f.kind.alive() }
	errc := startHeldCreate(t, f, 2)

	start := time.Now()
	require.NoError(t, f.p.Destroy(context.Background()))
	assert.Less(t, time.Since(start), 5*time.Second, "no wait for the creates to finish on their own")
	assert.ElementsMatch(t, []string{"id-1", "id-2"}, f.docker.removedContainers, "the node containers removed by kind's cluster label")
	assert.ElementsMatch(t, []string{"ambientmc-cluster-1", "ambientmc-cluster-2"}, f.kind.deletes, "kind deletes what the stopped creates made")
	assert.Equal(t, 0, alive, "the run network is removed only once no node is left on it")
	assert.Contains(t, f.docker.removed, f.p.netName)
	assert.Contains(t, f.log.String(), "stopping the create of ambientmc-cluster-1, ambientmc-cluster-2: removing its node containers until it returns")

	err := <-errc
	require.ErrorIs(t, err, errStopped)
	assert.Empty(t, f.kind.logs, "no logs collected from clusters being removed")
	assert.Len(t, f.kind.deletes, 2, "Create's own Destroy found nothing left")
}

// A create that does not return once its nodes are gone holds Destroy for createStopWait only.
func TestDestroyWaitsForAStoppedCreateBoundedFakeDocker(t *testing.T) {
	defer func(d time.Duration) { createStopWait = d }(createStopWait)
	createStopWait = 200 * time.Millisecond
	f := newFixture(t, nil)
	errc := startHeldCreate(t, f, 1)
	f.docker.onRemove = nil // the create stays stuck
	start := time.Now()
	require.NoError(t, f.p.Destroy(context.Background()))
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Contains(t, f.log.String(), "the create of ambientmc-cluster-1 did not return within 200ms of the removal of its nodes")
	close(f.kind.hold)
	require.ErrorIs(t, <-errc, errStopped)
}

// The teardown and Create's failure path may call Destroy at once: the second waits for the
// first, so the network is never removed while the first still deletes the nodes on it (which
// left both nodes and the network: "docker network rm ...: has active endpoints").
func TestConcurrentDestroysRemoveTheNetworkLastFakeDocker(t *testing.T) {
	f := newFixture(t, nil)
	_, err := f.p.Create(context.Background(), generate(t, 2))
	require.NoError(t, err)
	f.kind.deleteDelay = 100 * time.Millisecond
	var mu sync.Mutex
	var aliveAtRemove []int
	f.docker.beforeNetworkRemove = func(string) {
		mu.Lock()
		defer mu.Unlock()
		aliveAtRemove = append(aliveAtRemove, f.kind.alive())
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { assert.NoError(t, f.p.Destroy(context.Background())) })
	}
	wg.Wait()
	assert.Equal(t, []int{0}, aliveAtRemove, "the network removed once, with no cluster left")
	assert.Len(t, f.kind.deletes, 2, "each cluster deleted once")
}

// A network the create path would make after Destroy began is not made: nothing would remove it.
func TestNoRunNetworkAfterDestroyFakeDocker(t *testing.T) {
	f := newFixture(t, nil)
	require.NoError(t, f.p.Destroy(context.Background()))
	_, err := f.p.Create(context.Background(), generate(t, 1))
	require.ErrorIs(t, err, errStopped)
	assert.Empty(t, f.docker.created, "no network created")
	assert.Empty(t, f.kind.creates, "no cluster created")
}

// The second Ctrl-C's kill during the first one's Destroy still removes what that Destroy has not
// deleted yet.
func TestKillNowDuringDestroyFakeDocker(t *testing.T) {
	f := newFixture(t, nil)
	f.docker.containers = map[string][]string{"ambientmc-cluster-1": {"id-1"}, "ambientmc-cluster-2": {"id-2"}}
	_, err := f.p.Create(context.Background(), generate(t, 2))
	require.NoError(t, err)
	f.kind.deleteDelay = time.Second
	done := make(chan struct{})
	go func() {
		_ = f.p.Destroy(context.Background())
		close(done)
	}()
	time.Sleep(100 * time.Millisecond) // Destroy is deleting
	f.p.killNow()
	assert.ElementsMatch(t, []string{"id-1", "id-2"}, f.docker.removedContainers)
	<-done
}

// A create that had not made its node containers when Destroy began (still checking the image, or
// in its docker run) makes them later: they are removed as they appear, and the create returns.
func TestDestroyRemovesContainersACreateMakesLaterFakeDocker(t *testing.T) {
	f := newFixture(t, nil)
	errc := startHeldCreate(t, f, 1)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		f.docker.addContainers("ambientmc-cluster-1", "id-1")
	}()
	start := time.Now()
	require.NoError(t, f.p.Destroy(context.Background()))
	assert.Equal(t, []string{"id-1"}, f.docker.removedIDs(), "the container removed once it appeared")
	assert.Less(t, time.Since(start), 5*time.Second, "not a wait for createStopWait")
	require.ErrorIs(t, <-errc, errStopped)
}
