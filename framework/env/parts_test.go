package env

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/topology"
)

// wavesProvider is a fake at the provider seam: the test plays its Create, handing over clusters
// one by one as the local provider's waves do (Facts.ReadyEarly, through the Env's OnReady). Nothing
// else is called.
type wavesProvider struct{ cluster.Provider }

func (p *wavesProvider) Facts() cluster.Facts { return cluster.Facts{ReadyEarly: true} }

// onceProvider hands over nothing early: every cluster at once, as kind and kube do.
type onceProvider struct{ cluster.Provider }

func (onceProvider) Facts() cluster.Facts { return cluster.Facts{} }

func testClusters(n int) []*cluster.Cluster {
	var cs []*cluster.Cluster
	topo, _ := topology.Generate(n)
	for _, tc := range topo.Clusters {
		cs = append(cs, &cluster.Cluster{Cluster: tc})
	}
	return cs
}

// partsRecorder is a step whose part in each cluster records the cluster, and fails where told.
type partsRecorder struct {
	mu   sync.Mutex
	done []string
	fail map[string]error
	// held parts wait for the parts' context to end.
	held map[string]bool
}

func (r *partsRecorder) step() Step {
	return Step{Name: "workloads", Each: func(ctx context.Context, _ *Env, c *cluster.Cluster) error {
		if r.held[c.Name] {
			<-ctx.Done()
			return ctx.Err()
		}
		if err := r.fail[c.Name]; err != nil {
			return err
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.done = append(r.done, c.Name)
		return nil
	}}
}

func (r *partsRecorder) clusters() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.done...)
}

func TestClusterPartsStartAsEachClusterIsReady(t *testing.T) {
	p := &wavesProvider{}
	e := &Env{Log: io.Discard, Provider: p}
	rec := &partsRecorder{}
	s := rec.step()
	ran := false
	s.Run = func(context.Context, *Env) error {
		ran = true
		assert.Len(t, rec.clusters(), 2, "Run follows every cluster's part")
		return nil
	}
	e.parts = newClusterParts(context.Background(), []Step{{Name: "mesh"}, s})
	defer e.parts.stop()
	ctx := e.parts.startEarly(e)
	require.NotNil(t, e.onReady.Load(), "clusters handed over start the parts")

	cs := testClusters(2)
	e.clusterReady(cs[0]) // Create is still starting cluster-2
	require.Eventually(t, func() bool { return len(rec.clusters()) == 1 }, 5*time.Second, 10*time.Millisecond,
		"cluster-1's part ran before Create returned")
	e.clusterReady(cs[1])
	require.NoError(t, ctx.Err())
	e.Clusters = cs

	require.NoError(t, s.run(context.Background(), e))
	assert.True(t, ran)
	assert.ElementsMatch(t, []string{"cluster-1", "cluster-2"}, rec.clusters(), "each part ran once")
}

func TestClusterPartsRunInTheirTurnWhereTheProviderHandsOverNothing(t *testing.T) {
	e := &Env{Log: io.Discard, Provider: onceProvider{}}
	rec := &partsRecorder{}
	s := rec.step()
	e.parts = newClusterParts(context.Background(), []Step{s})
	defer e.parts.stop()
	e.parts.startEarly(e)
	assert.Empty(t, rec.clusters())
	e.Clusters = testClusters(3)
	require.NoError(t, s.run(context.Background(), e))
	assert.ElementsMatch(t, []string{"cluster-1", "cluster-2", "cluster-3"}, rec.clusters())
}

// A part that fails stops the clusters still starting (Create's context) and the other parts, and
// the step's error is that fault alone, not every part it stopped.
func TestAFailedClusterPartStopsCreateAndTheOtherParts(t *testing.T) {
	p := &wavesProvider{}
	e := &Env{Log: io.Discard, Provider: p}
	fault := errors.New("cluster-2: create Pod ns-0/svc-0-0: etcdserver: request timed out")
	rec := &partsRecorder{fail: map[string]error{"cluster-2": fault}, held: map[string]bool{"cluster-1": true}}
	s := rec.step()
	e.parts = newClusterParts(context.Background(), []Step{s})
	defer e.parts.stop()
	ctx := e.parts.startEarly(e)
	cs := testClusters(3)
	e.clusterReady(cs[0]) // held until the fault stops it
	e.clusterReady(cs[1])
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Create's context was not cancelled by the failed part")
	}
	require.Error(t, e.parts.failed())
	assert.ErrorIs(t, e.parts.failed(), fault)
	assert.Contains(t, e.parts.failed().Error(), "workloads: ", "names the step")

	e.Clusters = cs[:2]
	err := s.run(context.Background(), e)
	require.ErrorIs(t, err, fault)
	assert.NotErrorIs(t, err, context.Canceled, "the part the fault stopped is not reported")
}
