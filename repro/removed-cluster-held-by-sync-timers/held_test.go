// Package held reproduces istiod keeping a removed remote cluster (its *multicluster.Cluster, with
// its kube client and informer caches) reachable until its PILOT_REMOTE_CLUSTER_TIMEOUT timer fires.
//
// Source lines (istio.io/istio, release-1.31 at eed52ebb66ad; the same on release-1.30 at 9739e10eb9d7):
//   - pkg/kube/multicluster/cluster.go:199-213 Cluster.Run arms time.AfterFunc(features.RemoteClusterTimeout, ...)
//     whose callback captures c, the whole *Cluster. The timer is never stopped: not when the sync
//     completes (cluster.go:275-279) and not when the cluster stops (Stop, cluster.go:363-372).
//   - pkg/kube/multicluster/secretcontroller.go:493-502 deleteCluster stops the cluster, removes it
//     from the store and shuts its informers down, but the pending timer still references it.
//   - pilot/pkg/features/pilot.go:135-140 PILOT_REMOTE_CLUSTER_TIMEOUT (default 30s) sets the timer's duration.
//
// The kube registry built for the same cluster arms a second such timer
// (pilot/pkg/serviceregistry/kube/controller/controller.go:699-706 on release-1.31, 701-708 on 1.30; duration set at
// pilot/pkg/serviceregistry/kube/controller/multicluster.go:165-167); this test exercises the first.
package held

import (
	"fmt"
	"runtime"
	"testing"
	"time"
	"weak"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"istio.io/istio/pilot/pkg/features"
	"istio.io/istio/pkg/cluster"
	"istio.io/istio/pkg/config/mesh/meshwatcher"
	"istio.io/istio/pkg/kube"
	"istio.io/istio/pkg/kube/kclient/clienttest"
	"istio.io/istio/pkg/kube/multicluster"
	"istio.io/istio/pkg/test"
	"istio.io/istio/pkg/test/util/retry"
)

const (
	ns     = "istio-system"
	remote = cluster.ID("cluster-2")
	// timeout stands in for PILOT_REMOTE_CLUSTER_TIMEOUT (30s by default) to keep the test short.
	timeout = 4 * time.Second
)

func remoteSecret() *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      "istio-remote-secret-cluster-2",
			Namespace: ns,
			Labels:    map[string]string{multicluster.MultiClusterSecretLabel: "true"},
		},
		Data: map[string][]byte{string(remote): []byte("kubeconfig")},
	}
}

// collectedWithin runs the GC until w's target is collected or d has passed, and reports whether it was.
func collectedWithin(w weak.Pointer[multicluster.Cluster], d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		runtime.GC()
		if w.Value() == nil {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// joinAndLeave adds a remote cluster, waits for it to sync, removes its secret and waits for the
// cluster to leave the store. It returns a weak pointer to the removed *Cluster and the join time.
func joinAndLeave(t *testing.T) (weak.Pointer[multicluster.Cluster], time.Time) {
	stop := test.NewStop(t)
	configCluster := kube.NewFakeClient()
	c := multicluster.NewController(multicluster.ControllerOptions{
		Client:          configCluster,
		ClusterID:       "cluster-1",
		SystemNamespace: ns,
		MeshConfig:      meshwatcher.NewTestWatcher(nil),
		ClientBuilder: func([]byte, cluster.ID, ...func(*rest.Config)) (kube.Client, error) {
			return kube.NewFakeClient(), nil
		},
	})
	configCluster.RunAndWait(stop)
	if err := c.Run(stop); err != nil {
		t.Fatal(err)
	}
	secrets := clienttest.NewWriter[*corev1.Secret](t, configCluster)

	joined := time.Now()
	secrets.Create(remoteSecret())
	retry.UntilOrFail(t, func() bool {
		cl := c.ClusterStore().GetByID(remote)
		return cl != nil && cl.SyncStatus() == multicluster.SyncStatusSynced
	}, retry.Timeout(timeout/2))
	w := weak.Make(c.ClusterStore().GetByID(remote))

	secrets.Delete(remoteSecret().Name, ns)
	retry.UntilOrFail(t, func() bool {
		cl := w.Value() // nil once collected, which a correct istiod may do at once
		return c.ClusterStore().GetByID(remote) == nil && (cl == nil || cl.Closed())
	}, retry.Timeout(timeout/2))
	return w, joined
}

// TestRemovedClusterIsCollectable removes a remote cluster right after it synced and checks that
// the removed *Cluster can be garbage collected. A correct istiod lets it go once it is removed.
func TestRemovedClusterIsCollectable(t *testing.T) {
	t.Run("control: no sync timer (PILOT_REMOTE_CLUSTER_TIMEOUT=0s)", func(t *testing.T) {
		test.SetForTest(t, &features.RemoteClusterTimeout, 0)
		w, _ := joinAndLeave(t)
		if !collectedWithin(w, 2*time.Second) {
			t.Fatalf("the removed cluster is still reachable 2s after its removal even without a sync timer: " +
				"something other than the timer holds it, so the test below proves nothing")
		}
	})

	t.Run(fmt.Sprintf("PILOT_REMOTE_CLUSTER_TIMEOUT=%s", timeout), func(t *testing.T) {
		test.SetForTest(t, &features.RemoteClusterTimeout, timeout)
		w, joined := joinAndLeave(t)
		removed := time.Since(joined)
		heldAfterRemoval := !collectedWithin(w, 1*time.Second)
		heldFor := time.Since(joined)
		// Wait past the timer, then look again.
		time.Sleep(time.Until(joined.Add(timeout + 200*time.Millisecond)))
		collectedAfterTimer := collectedWithin(w, 2*time.Second)
		t.Logf("joined at 0s, removed at %.1fs; still reachable at %.1fs: %v; collected after the %s timer: %v",
			removed.Seconds(), heldFor.Seconds(), heldAfterRemoval, timeout, collectedAfterTimer)
		if heldAfterRemoval {
			t.Fatalf("the removed cluster %s (its *multicluster.Cluster with its kube client and informer caches) "+
				"is still reachable %.1fs after its removal at %.1fs, and became collectable after the sync timer "+
				"fired at %s: %v. The time.AfterFunc of pkg/kube/multicluster/cluster.go:199-213 captures the "+
				"*Cluster and is not stopped when the cluster is removed (secretcontroller.go:493-502). "+
				"A correct istiod lets the removed cluster be collected at once (see the control subtest), "+
				"not PILOT_REMOTE_CLUSTER_TIMEOUT (30s by default) after the join.",
				remote, heldFor.Seconds()-removed.Seconds(), removed.Seconds(), timeout, collectedAfterTimer)
		}
	})
}
