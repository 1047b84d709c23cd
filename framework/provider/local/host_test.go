package local

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/topology"
)

// TestHostMemoryCountsIstiodsAndPods: preflight asks for what the run will start, so 50 clusters
// with only the observed istiod fit where 50 istiods would not, and published scale needs more.
func TestHostMemoryCountsIstiodsAndPods(t *testing.T) {
	topo, err := topology.Generate(50)
	require.NoError(t, err)
	need := func(istiods, pods int) uint64 {
		return (&Provider{opts: Options{Istiods: istiods, PodsPerCluster: pods}}).hostMemory(topo)
	}
	observed, all := need(1, 100), need(0, 100)
	assert.Less(t, observed, uint64(16<<30), "50 small clusters with one istiod fit a 24 GB host")
	assert.Greater(t, all, observed+uint64(49*istiodMemory), "every primary's istiod is counted")
	assert.Greater(t, need(1, 4000), observed+uint64(50*3900*apiServerPerPod), "pods are counted")
	without := (&Provider{opts: Options{Istiods: 1, PodsPerCluster: 100, NoControllers: true}}).hostMemory(topo)
	assert.Greater(t, observed, without+uint64(50*controllersMemory), "the controller-managers are counted")

	hundred, err := topology.Generate(100)
	require.NoError(t, err)
	whole := (&Provider{opts: Options{Istiods: 1, PodsPerCluster: 100}}).hostMemory(hundred)
	light := (&Provider{opts: Options{Istiods: 1, IstiodClusters: []string{"cluster-1"}, PodsPerCluster: 100}}).hostMemory(hundred)
	assert.Greater(t, whole, uint64(24<<30), "100 whole small clusters do not fit a 24 GiB host")
	assert.Less(t, light, uint64(18<<30), "100 small clusters the one istiod only watches do")
	assert.Equal(t, whole-light, uint64(99*(apiServerMemory-watchedOnlyAPIServerMemory+controllersMemory-watchedOnlyControllersMemory)),
		"every cluster but the istiod's is counted watched-only")
}

// TestAPIServerGCTradesMemoryForCPUUpToTwentyClusters: Go's default GC for the small runs it
// speeds up, GOGC=35 where memory runs out first, and the preflight model counts the difference.
func TestAPIServerGCTradesMemoryForCPUUpToTwentyClusters(t *testing.T) {
	assert.Equal(t, []string{"GOGC=100"}, apiServerGC(10, 100))
	assert.Equal(t, []string{"GOGC=35"}, apiServerGC(21, 100))
	assert.Equal(t, []string{"GOGC=35", "GOMEMLIMIT=295MiB"}, apiServerGC(10, 4000))
	need := func(clusters int) uint64 {
		topo, err := topology.Generate(clusters)
		require.NoError(t, err)
		return (&Provider{noIstiod: true, opts: Options{PodsPerCluster: 100}}).hostMemory(topo)
	}
	perCluster := func(clusters int) uint64 { return (need(clusters) - controllersBinary) / uint64(clusters) }
	assert.Equal(t, uint64(defaultGCMemory), perCluster(20)-perCluster(30), "an API server with the default GC is counted larger")

	assert.Equal(t, []string{"GOGC=35"}, Options{PodsPerCluster: 100}.apiServerEnv(21, false), "without APIServerGOGC, apiServerGC's choice")
	assert.Equal(t, []string{"GOGC=400"}, Options{PodsPerCluster: 4000, APIServerGOGC: 400}.apiServerEnv(21, false), "APIServerGOGC overrides it, memory limit and all")
	assert.Equal(t, []string{"GOGC=400"}, Options{PodsPerCluster: 100}.apiServerEnv(10, true), "roomy: roomyGOGC")
	assert.Equal(t, []string{"GOGC=200"}, Options{PodsPerCluster: 100, APIServerGOGC: 200}.apiServerEnv(10, true), "APIServerGOGC before roomy")
}

// A run whose API servers would run Go's default GC gets roomyGOGC only where the extra memory
// leaves a third of the host's available memory free.
func TestRoomyGCNeedsAThirdOfTheMemoryToSpare(t *testing.T) {
	ten, err := topology.Generate(10)
	require.NoError(t, err)
	p := &Provider{opts: Options{PodsPerCluster: 100}}
	need := roomyNeed(ten, p.hostMemory(ten))
	assert.Equal(t, p.hostMemory(ten)+10*roomyGCMemory, need, "315 MB more per cluster")
	assert.True(t, p.roomyGC(ten, need, need*3/2+3), "exactly two thirds")
	assert.False(t, p.roomyGC(ten, need, need*3/2-3), "a little less than a third to spare")
	assert.False(t, p.roomyGC(ten, need, need), "no room: Go's default, which preflight asked for")

	big := &Provider{opts: Options{PodsPerCluster: 4000}}
	assert.False(t, big.roomyGC(ten, need, 1<<40), "not where apiServerGC rules memory (2000 pods and more)")
	many, err := topology.Generate(21)
	require.NoError(t, err)
	assert.False(t, p.roomyGC(many, roomyNeed(many, p.hostMemory(many)), 1<<40), "nor beyond 20 clusters")
	set := &Provider{opts: Options{PodsPerCluster: 100, APIServerGOGC: 200}}
	assert.False(t, set.roomyGC(ten, need, 1<<40), "nor where the caller set the GC")
}

// TestCheckHostRefusesWhatDoesNotFit names the flags that make a run smaller.
func TestCheckHostRefusesWhatDoesNotFit(t *testing.T) {
	avail, err := measure.HostMemoryAvailable()
	require.NoError(t, err)
	err = checkHost(50, 2*avail)
	require.Error(t, err)
	for _, want := range []string{"50 local clusters", "-clusters", "-scale", "-mesh.istiods=observed"} {
		assert.Contains(t, err.Error(), want)
	}
	require.NoError(t, checkHost(1, 1<<20))
}

// The endpoint controllers batch their writes only at published scale; smaller runs keep each
// write's latency as a cluster without the flags has it.
func TestEndpointBatchingOnlyAtScale(t *testing.T) {
	assert.Nil(t, endpointBatching(100))
	assert.Nil(t, endpointBatching(1000), "medium scale")
	assert.Equal(t, []string{"--endpoint-updates-batch-period=2s", "--endpointslice-updates-batch-period=2s"}, endpointBatching(4000))
}
