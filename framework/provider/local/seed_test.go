package local

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/kube/apply"
	"github.com/ambientmc/ambientmc/framework/mesh/crds"
)

// TestCRDSeed: a cold run creates the CRDs through the API and captures the seed; a warm run's
// clusters start with every CRD Established and served, each with its own uid, and Apply then
// writes nothing. A damaged seed is thrown away.
func TestCRDSeed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	set := pinnedCRDs(t, ctx)
	seedDir := t.TempDir()
	start := func(n int) (*Provider, []*cluster.Cluster, []*unstructured.UnstructuredList) {
		p := cachedProvider(t)
		p.seedDir = seedDir
		cs, slim := startClustersWithCRDs(t, ctx, p, n, set)
		var lists []*unstructured.UnstructuredList
		for _, c := range cs {
			if p.SeededCRDs() {
				// Before Apply: what the API server serves straight from the seed.
				l, err := c.Dynamic.Resource(apply.CRDs).List(ctx, metav1.ListOptions{})
				require.NoError(t, err)
				lists = append(lists, l)
			}
			require.NoError(t, crds.Apply(ctx, c.Dynamic, slim))
		}
		require.NoError(t, p.SaveCRDSeed(ctx, cs[0]))
		return p, cs, lists
	}

	cold, _, _ := start(1)
	assert.False(t, cold.SeededCRDs())
	files, _ := filepath.Glob(filepath.Join(seedDir, "crd-seed-*.json"))
	require.Len(t, files, 1, "the cold run captured a seed")
	require.NoError(t, cold.Destroy(ctx))

	warm, cs, lists := start(2)
	require.True(t, warm.SeededCRDs())
	uids := map[string]bool{}
	for _, l := range lists {
		require.Len(t, l.Items, len(set))
		for _, crd := range l.Items {
			assert.Equal(t, "True", condition(&crd, "Established"), crd.GetName())
			assert.False(t, uids[string(crd.GetUID())], "uid %s reused", crd.GetUID())
			uids[string(crd.GetUID())] = true
		}
	}
	// Apply found the seeded CRDs current and wrote nothing.
	for i, c := range cs {
		l, err := c.Dynamic.Resource(apply.CRDs).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for j, crd := range l.Items {
			assert.Equal(t, lists[i].Items[j].GetResourceVersion(), crd.GetResourceVersion(), crd.GetName())
		}
	}

	require.NoError(t, os.WriteFile(files[0], []byte(`{"entries":[]}`), 0o644))
	_, err := warm.PreloadCRDs(set)
	require.NoError(t, err)
	assert.False(t, warm.SeededCRDs(), "a seed without every CRD is not used")
	assert.NoFileExists(t, files[0])
}

func condition(crd *unstructured.Unstructured, typ string) any {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m["status"]
		}
	}
	return nil
}

// TestWatchedOnlyCRDSeed: a watched-only cluster's CRDs (every one, most unserved) get a seed of
// their own, which make bins' preparation writes beside the whole clusters' (once: a second
// preparation writes nothing) and a later run stores before its API server starts, after which
// Apply writes nothing.
func TestWatchedOnlyCRDSeed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	set := pinnedCRDs(t, ctx)
	seedDir := t.TempDir()
	prepare := func() bool {
		p := cachedProvider(t)
		p.seedDir = seedDir
		wrote, err := p.prepareSeeds(ctx, set)
		require.NoError(t, err)
		return wrote
	}
	require.True(t, prepare(), "no seed yet: both written")
	files, _ := filepath.Glob(filepath.Join(seedDir, "crd-seed-*.json"))
	require.Len(t, files, 2, "the whole clusters' seed and the watched-only clusters'")
	require.False(t, prepare(), "both seeds there: nothing written")

	warm := cachedProvider(t)
	warm.seedDir, warm.opts.IstiodClusters = seedDir, []string{"cluster-1"}
	cs, slim := startClustersWithCRDs(t, ctx, warm, 2, set)
	watched, light := cs[1], crds.Set(slim).WhereNoIstiod()
	before, err := watched.Dynamic.Resource(apply.CRDs).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, before.Items, len(set), "every CRD stored before the API server started")
	for _, crd := range before.Items {
		assert.Equal(t, "True", condition(&crd, "Established"), crd.GetName())
	}
	require.NoError(t, crds.Apply(ctx, watched.Dynamic, light))
	after, err := watched.Dynamic.Resource(apply.CRDs).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for j, crd := range after.Items {
		assert.Equal(t, before.Items[j].GetResourceVersion(), crd.GetResourceVersion(), "Apply rewrote %s", crd.GetName())
	}
	_, err = watched.Dynamic.Resource(schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices"}).List(ctx, metav1.ListOptions{Limit: 1})
	assert.Error(t, err, "the seeded CRDs are the unserved ones")
	require.NoError(t, warm.Destroy(ctx))
}
