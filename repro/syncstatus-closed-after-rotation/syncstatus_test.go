// Package syncstatus reproduces istiod reporting a remote cluster as "closed" after an in-place
// rotation of its remote secret, while the cluster is synced.
//
// Source lines (istio.io/istio, release-1.31 at eed52ebb66ad; the same on release-1.30 at 9739e10eb9d7):
//   - pkg/kube/multicluster/secretcontroller.go:439-473 an Update of a secret with the same cluster
//     ID and a new kubeconfig builds a new *Cluster and swaps it in (c.cs.Swap, :470) under the same ID.
//   - pkg/kube/multicluster/cluster.go:193-196 the new generation's Run defers swap.Complete();
//     cluster.go:275-276 it reports "synced" first.
//   - pkg/kube/multicluster/clusterstore.go:50-56 Complete stops the previous generation;
//     cluster.go:363-372 its Stop reports "closed" under the shared cluster ID.
//   - pkg/kube/multicluster/secretcontroller.go:301-308 onClusterSyncStatusChange records any status
//     whose cluster ID is still in the store (the new generation holds it), so "closed" overwrites
//     "synced" in istiod_remote_cluster_sync_status (secretcontroller.go:310-327), and nothing
//     writes "synced" again.
package syncstatus

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"istio.io/istio/pkg/cluster"
	"istio.io/istio/pkg/config/mesh/meshwatcher"
	"istio.io/istio/pkg/kube"
	"istio.io/istio/pkg/kube/kclient/clienttest"
	"istio.io/istio/pkg/kube/multicluster"
	"istio.io/istio/pkg/monitoring/monitortest"
	"istio.io/istio/pkg/test"
	"istio.io/istio/pkg/test/util/retry"
)

const (
	ns     = "istio-system"
	remote = cluster.ID("cluster-2")
	metric = "istiod_remote_cluster_sync_status"
)

func remoteSecret(kubeconfig string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      "istio-remote-secret-cluster-2",
			Namespace: ns,
			Labels:    map[string]string{multicluster.MultiClusterSecretLabel: "true"},
		},
		// The data key is the cluster ID; the value is the kubeconfig (only its bytes matter here:
		// the fake client builder ignores it, istiod compares its sha256).
		Data: map[string][]byte{string(remote): []byte(kubeconfig)},
	}
}

// gauge returns istiod_remote_cluster_sync_status{cluster=id,status=status}, or -1 if absent.
func gauge(t *testing.T, id cluster.ID, status string) float64 {
	t.Helper()
	families, err := monitortest.TestRegistry(t).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["cluster"] == string(id) && labels["status"] == status {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

func TestSyncStatusAfterInPlaceRotation(t *testing.T) {
	monitortest.New(t) // registers the Prometheus exporter that gauge reads
	stop := test.NewStop(t)
	configCluster := kube.NewFakeClient()
	c := multicluster.NewController(multicluster.ControllerOptions{
		Client:          configCluster,
		ClusterID:       "cluster-1",
		SystemNamespace: ns,
		MeshConfig:      meshwatcher.NewTestWatcher(nil),
		// Each generation of the remote gets its own fake client, as a real rotation gets a new client.
		ClientBuilder: func([]byte, cluster.ID, ...func(*rest.Config)) (kube.Client, error) {
			return kube.NewFakeClient(), nil
		},
	})
	configCluster.RunAndWait(stop)
	if err := c.Run(stop); err != nil {
		t.Fatal(err)
	}
	secrets := clienttest.NewWriter[*corev1.Secret](t, configCluster)

	// Join: the first generation syncs and the metric says synced.
	secrets.Create(remoteSecret("kubeconfig with token 1"))
	var first *multicluster.Cluster
	retry.UntilOrFail(t, func() bool {
		first = c.ClusterStore().GetByID(remote)
		return first != nil && first.SyncStatus() == multicluster.SyncStatusSynced
	}, retry.Timeout(10*time.Second))
	retry.UntilOrFail(t, func() bool { return gauge(t, remote, multicluster.SyncStatusSynced) == 1 }, retry.Timeout(5*time.Second))

	// In-place rotation: same secret name, same data key (cluster ID), new kubeconfig bytes.
	secrets.Update(remoteSecret("kubeconfig with token 2"))
	var second *multicluster.Cluster
	retry.UntilOrFail(t, func() bool {
		second = c.ClusterStore().GetByID(remote)
		// The new generation is synced and the previous one has been stopped by swap.Complete().
		return second != nil && second != first && second.SyncStatus() == multicluster.SyncStatusSynced && first.Closed()
	}, retry.Timeout(10*time.Second))
	time.Sleep(200 * time.Millisecond) // let any later status report land

	var clusterz string
	for _, d := range c.ListRemoteClusters() {
		if d.ID == remote {
			clusterz = d.SyncStatus
		}
	}
	synced, closed := gauge(t, remote, multicluster.SyncStatusSynced), gauge(t, remote, multicluster.SyncStatusClosed)
	t.Logf("after the rotation: /debug/clusterz (ListRemoteClusters) says %q; %s{status=synced}=%v, {status=closed}=%v",
		clusterz, metric, synced, closed)
	if synced != 1 || closed != 0 {
		t.Fatalf("after an in-place rotation %s is synced (ListRemoteClusters: %q, new generation SyncStatus %q), "+
			"but %s{cluster=%q} has synced=%v closed=%v; a correct istiod reports synced=1 closed=0. "+
			"The previous generation's Stop (pkg/kube/multicluster/cluster.go:363-372), called by swap.Complete() "+
			"(clusterstore.go:50-56) after the new generation reported synced, recorded \"closed\" under the shared "+
			"cluster ID (secretcontroller.go:301-308).",
			remote, clusterz, second.SyncStatus(), metric, remote, synced, closed)
	}
}
