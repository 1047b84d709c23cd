package rotationrace

import (
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"istio.io/istio/pkg/cluster"
	"istio.io/istio/pkg/config/mesh/meshwatcher"
	"istio.io/istio/pkg/kube"
	"istio.io/istio/pkg/kube/kclient/clienttest"
	"istio.io/istio/pkg/kube/krt"
	"istio.io/istio/pkg/kube/multicluster"
	"istio.io/istio/pkg/ptr"
	"istio.io/istio/pkg/test"
	"istio.io/istio/pkg/test/util/retry"
)

// siblingDelay makes the sibling's transformation lose the race with the dependent one: in istiod
// nothing orders the two (each is its own krt.NewManyCollection over ctrl.Clusters(),
// pkg/kube/multicluster/collections.go:102), so this only fixes an order the scheduler may pick
// anyway. Set -sibling-delay=0 to leave it to chance.
var siblingDelay = flag.Duration("sibling-delay", 200*time.Millisecond, "delay of the sibling's per-cluster transformation")

type nsWithCluster struct {
	Cluster cluster.ID
	Name    string
}

func (n nsWithCluster) ResourceName() string { return string(n.Cluster) + "/" + n.Name }

// TestNestedCollectionUsesCurrentGeneration is the mechanism of TestRotationKeepsRemoteNetworkGateway at
// the pkg/kube/multicluster + krt level: two nested collections built with
// multicluster.NestedCollectionFromLocalAndRemote, the second fetching the first by cluster ID, in
// the shape of GatewaysWithCluster (pilot/pkg/serviceregistry/ambient/multicluster.go:91-116) and
// NetworkGateways (pilot/pkg/serviceregistry/ambient/networks.go:132-168).
func TestNestedCollectionUsesCurrentGeneration(t *testing.T) {
	stop := test.NewStop(t)
	configCluster := kube.NewFakeClient()
	mc := multicluster.NewController(multicluster.ControllerOptions{
		Client: configCluster, ClusterID: "cluster-1", SystemNamespace: ns, MeshConfig: meshwatcher.NewTestWatcher(nil),
		ClientBuilder: func([]byte, cluster.ID, ...func(*rest.Config)) (kube.Client, error) {
			c := kube.NewFakeClient()
			clienttest.NewWriter[*corev1.Namespace](t, c).Create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "remote-only"}})
			return c, nil
		},
	})
	opts := krt.NewOptionsBuilder(stop, "test", nil)
	local := mc.ConfigCluster().Namespaces()

	// The sibling: per cluster a MapCollection over the cluster's informer, like GatewaysWithCluster.
	var mu sync.Mutex
	siblingOf := map[<-chan struct{}]krt.Collection[*corev1.Namespace]{} // by generation (its stop channel)
	Sibling := multicluster.NestedCollectionFromLocalAndRemote(mc, local,
		func(_ krt.HandlerContext, c *multicluster.Cluster) *krt.Collection[*corev1.Namespace] {
			time.Sleep(*siblingDelay)
			col := krt.MapCollection(c.Namespaces(), func(n *corev1.Namespace) *corev1.Namespace { return n },
				krt.WithName(fmt.Sprintf("Sibling[%s]", c.ID)))
			mu.Lock()
			siblingOf[c.GetStop()] = col
			mu.Unlock()
			return ptr.Of(col)
		}, "Sibling", opts)
	siblingByCluster := multicluster.NestedCollectionIndexByCluster(Sibling)

	// The dependent: per cluster, fetch the sibling by cluster ID and build on it, like NetworkGateways.
	type build struct {
		onCurrentGeneration bool
		col                 krt.Collection[nsWithCluster]
	}
	var builds []build
	localDependent := krt.MapCollection(local, func(n *corev1.Namespace) nsWithCluster { return nsWithCluster{"cluster-1", n.Name} })
	Dependent := multicluster.NestedCollectionFromLocalAndRemote(mc, localDependent,
		func(ctx krt.HandlerContext, c *multicluster.Cluster) *krt.Collection[nsWithCluster] {
			sibling := krt.FetchOne(ctx, Sibling, krt.FilterIndex(siblingByCluster, c.ID))
			if sibling == nil {
				return nil // not cached: retried when the sibling appears (collections.go:111-115)
			}
			col := krt.NewManyCollection(*sibling, func(_ krt.HandlerContext, n *corev1.Namespace) []nsWithCluster {
				return []nsWithCluster{{c.ID, n.Name}}
			}, krt.WithName(fmt.Sprintf("Dependent[%s]", c.ID)), krt.WithStop(c.GetStop()),
				krt.WithMetadata(krt.Metadata{multicluster.ClusterKRTMetadataKey: c.ID}))
			mu.Lock()
			builds = append(builds, build{siblingOf[c.GetStop()] == *sibling, col})
			mu.Unlock()
			return ptr.Of(col)
		}, "Dependent", opts)
	Merged := krt.NestedJoinWithMergeCollection(Dependent, func(ts []nsWithCluster) *nsWithCluster { return &ts[0] },
		opts.WithName("Merged")...)
	servesRemote := func() bool { return Merged.GetKey("cluster-2/remote-only") != nil }

	configCluster.RunAndWait(stop)
	if err := mc.Run(stop); err != nil {
		t.Fatal(err)
	}
	secrets := clienttest.NewWriter[*corev1.Secret](t, configCluster)
	secrets.Create(remoteSecret(0))
	retry.UntilOrFail(t, servesRemote, retry.Timeout(10*time.Second), retry.Message("served after the join"))

	lost := 0
	for i := 1; i <= *rotations; i++ {
		prev := mc.ClusterStore().GetByID(remote)
		secrets.Update(remoteSecret(i))
		retry.UntilOrFail(t, func() bool {
			cur := mc.ClusterStore().GetByID(remote)
			return cur != nil && cur != prev && cur.SyncStatus() == multicluster.SyncStatusSynced && prev.Closed()
		}, retry.Timeout(10*time.Second))
		served := retry.Until(servesRemote, retry.Timeout(2*time.Second)) == nil
		mu.Lock()
		last := builds[len(builds)-1]
		mu.Unlock()
		if served && last.onCurrentGeneration {
			continue
		}
		lost++
		msg := fmt.Sprintf("in-place rotation %d: the dependent collection for %s was built on the previous generation's "+
			"sibling: %v (a correct istiod builds it on the current one), it has synced=%v, and the merged "+
			"collection serves %s's objects: %v, 2s after the new generation synced and the previous one was stopped. "+
			"The dependent's transformation fetched the sibling by cluster ID before the sibling had processed the new "+
			"generation, built on the stale (stopped) collection, and NestedManyCollectionsFromLocalAndRemote cached that "+
			"under the new kubeconfig sha (pkg/kube/multicluster/collections.go:108-116), so the later recompute keeps it.",
			i, remote, !last.onCurrentGeneration, last.col.HasSynced(), remote, served)
		if !*all {
			t.Fatal(msg)
		}
		t.Log(msg)
	}
	if *all {
		t.Logf("%d of %d in-place rotations built the dependent on a stale sibling (sibling delay %s)", lost, *rotations, *siblingDelay)
		if lost > 0 {
			t.Fail()
		}
	}
}
