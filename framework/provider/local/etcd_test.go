package local

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/hostetcd"
)

// TestSharedEtcdCompactionKeepsClustersApart runs two clusters on the shared etcd. Cluster B churns
// far past a compaction of the whole database; cluster A's objects, its open watch and a new watch
// from the resource version it had before the churn are all unaffected.
func TestSharedEtcdCompactionKeepsClustersApart(t *testing.T) {
	p := cachedProvider(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs := startClusters(t, ctx, p, 2)
	a, b := cs[0].Client.CoreV1().ConfigMaps("default"), cs[1].Client.CoreV1().ConfigMaps("default")
	// Only the test's own objects count: kube-controller-manager publishes kube-root-ca.crt into
	// every namespace at a moment of its own choosing.
	ours := metav1.ListOptions{LabelSelector: "ambientmc-test=compaction"}
	mine := func(name, v string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"ambientmc-test": "compaction"}}, Data: map[string]string{"v": v}}
	}
	from := func(rv string) metav1.ListOptions { o := ours; o.ResourceVersion = rv; return o }

	for i := range 5 {
		_, err := a.Create(ctx, mine(fmt.Sprintf("a-%d", i), "a"), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	before, err := a.List(ctx, ours)
	require.NoError(t, err)
	require.Len(t, before.Items, 5)
	open, err := a.Watch(ctx, from(before.ResourceVersion))
	require.NoError(t, err)
	defer open.Stop()

	// B churns: every create, update and delete is a revision of the shared database.
	churn := func(round int) {
		for i := range 40 {
			name := fmt.Sprintf("b-%d-%d", round, i)
			cm, err := b.Create(ctx, mine(name, "0"), metav1.CreateOptions{})
			require.NoError(t, err)
			cm.Data["v"] = "1"
			_, err = b.Update(ctx, cm, metav1.UpdateOptions{})
			require.NoError(t, err)
			if i%2 == 0 {
				require.NoError(t, b.Delete(ctx, name, metav1.DeleteOptions{}))
			}
		}
	}
	churn(0)
	st, err := p.etcd.ReadStatus(ctx)
	require.NoError(t, err)
	require.NoError(t, p.etcd.Compact(ctx, st.Header.Revision))
	// The compaction is real: A's list revision can no longer be read from etcd.
	err = p.etcd.Call(ctx, "/v3/kv/range", map[string]string{"key": base64.StdEncoding.EncodeToString([]byte(hostetcd.Prefix(cs[0].Name) + "/configmaps/default/a-0")), "revision": before.ResourceVersion}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "compacted")
	churn(1)

	after, err := a.List(ctx, ours)
	require.NoError(t, err)
	require.Len(t, after.Items, 5, "A holds only its own objects, all of them")
	for i, cm := range after.Items {
		assert.Equal(t, before.Items[i].ResourceVersion, cm.ResourceVersion, "A's objects are untouched")
		assert.Equal(t, "a", cm.Data["v"])
	}

	_, err = a.Create(ctx, mine("a-new", "a"), metav1.CreateOptions{})
	require.NoError(t, err)
	// The watch opened before the churn is still delivering, and so is one opened now from the
	// resource version A had before it: A's watch cache never saw B's events.
	late, err := a.Watch(ctx, from(before.ResourceVersion))
	require.NoError(t, err)
	defer late.Stop()
	for name, w := range map[string]watch.Interface{"watch open across the compaction": open, "watch from the pre-churn version": late} {
		select {
		case ev, ok := <-w.ResultChan():
			require.True(t, ok, "%s closed", name)
			require.Equal(t, watch.Added, ev.Type, "%s: %v", name, ev.Object)
			assert.Equal(t, "a-new", ev.Object.(*corev1.ConfigMap).Name, name)
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: no event within 20s", name)
		}
	}

	ok, err := b.List(ctx, ours)
	require.NoError(t, err)
	assert.Len(t, ok.Items, 40, "B keeps its own survivors only")
	s, err := p.etcd.ReadStatus(ctx)
	require.NoError(t, err)
	assert.Positive(t, s.DBSize)
}

// hostetcd's PutAll transactions and RangePrefix pages on a real etcd: more keys than a page and a
// transaction hold, large values split by size, and nothing outside the prefix read back.
func TestEtcdPutAllAndRangePrefixPages(t *testing.T) {
	p := cachedProvider(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, p.ensureBinaries(ctx)) // built already: cachedProvider skips otherwise
	e, err := hostetcd.Start(ctx, t.TempDir(), p.paths[bins.Etcd], 1, time.Minute)
	require.NoError(t, err)
	defer e.Stop()
	var want []hostetcd.KV
	for i := range 2*hostetcd.RangePage + 7 {
		v := []byte(fmt.Sprintf("value-%d", i))
		if i%20 == 0 {
			v = make([]byte, 300<<10) // six to a transaction would pass etcd's request limit: split by size
		}
		want = append(want, hostetcd.KV{Key: []byte(fmt.Sprintf("/k/%06d", i)), Value: v})
	}
	require.NoError(t, e.PutAll(ctx, "/in", want))
	require.NoError(t, e.Put(ctx, "/in0", []byte("just past the prefix")))
	got, err := e.RangePrefix(ctx, "/in/k/")
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for i := range want {
		assert.Equal(t, "/in"+string(want[i].Key), string(got[i].Key))
		assert.Equal(t, want[i].Value, got[i].Value, string(want[i].Key))
	}
	one, err := e.Get(ctx, "/in/k/000007")
	require.NoError(t, err)
	require.Len(t, one, 1)
	assert.Equal(t, "value-7", string(one[0].Value))
	none, err := e.Get(ctx, "/in/k/missing")
	require.NoError(t, err)
	assert.Empty(t, none)
}
