// Package headofline reproduces istiod's secret controller holding every other remote secret while
// it shuts down a remote cluster deleted during its first sync: the deletion waits for the deleted
// cluster's informer goroutines, and one of them is in an API call that istiod made with
// context.Background(), which stopping the cluster does not cancel.
//
// Source lines (istio.io/istio, release-1.31 at eed52ebb66ad; the same on release-1.30 at 9739e10eb9d7):
//   - pkg/kube/multicluster/secretcontroller.go:192-193 one queue, one worker (processItem) for all
//     remote secrets; :372-374 a deleted secret goes to deleteRemoteConfig, :487 deleteCluster.
//   - pkg/kube/multicluster/secretcontroller.go:499 deleteCluster calls cluster.Client.Shutdown() on
//     that worker: pkg/kube/client.go:803-805 (802-804 on 1.30) -> pkg/kube/informerfactory/factory.go:243-250, whose
//     deferred f.wg.Wait() (:245) waits for every informer goroutine started at factory.go:187-191.
//   - an informer goroutine leaves only when its reflector returns. The reflector returns at once
//     from a list (client-go v0.36.1 tools/cache/reflector.go:685-743 runs the list in its own goroutine),
//     but not from a watch call, made on the reflector's goroutine (reflector.go:605 after a list,
//     and reflector.go:863 for client-go's watch-list initial sync, on by default since client-go
//     1.35: the initial "list" of a real remote IS this watch call). istiod's ListWatch ignores the
//     reflector's context: pkg/config/schema/kubeclient/resources.gen.go:719-732 wraps WatchFunc,
//     and the Pods watch is .Watch(context.Background(), ...) at resources.gen.go:566-568
//     (likewise every type there and in pkg/config/schema/kubeclient/common.go:123-127, 150-154, 259-263).
//
// So a remote API server that is slow to answer (or never answers) one watch of a cluster being
// deleted holds the secret controller's only worker, and with it every remote secret added or
// changed after the deletion, for as long as that call takes. It is not capped by
// PILOT_REMOTE_CLUSTER_TIMEOUT, nor by the kube registry's 30s Cleanup wait
// (pilot/pkg/serviceregistry/kube/controller/controller.go:400), which is not where it waits.
package headofline

import (
	"bytes"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"

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
	slow   = cluster.ID("cluster-slow")
	canary = cluster.ID("cluster-canary")
	// hold is how long the slow cluster's API server takes to answer its pods watch.
	hold = 5 * time.Second
)

func remoteSecret(id cluster.ID) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      "istio-remote-secret-" + string(id),
			Namespace: ns,
			Labels:    map[string]string{multicluster.MultiClusterSecretLabel: "true"},
		},
		Data: map[string][]byte{string(id): []byte("kubeconfig for " + string(id))},
	}
}

func syncStatus(c *multicluster.Controller, id cluster.ID) string {
	for _, d := range c.ListRemoteClusters() {
		if d.ID == id {
			return d.SyncStatus
		}
	}
	return "absent"
}

// framesOf returns the istio frames (function at file:line, paths from the istio module root) of
// the first goroutine whose stack contains match.
func framesOf(match string) string {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	for _, g := range strings.Split(b.String(), "\n\n") {
		if !strings.Contains(g, match) {
			continue
		}
		var out []string
		for _, l := range strings.Split(g, "\n") {
			f := strings.Fields(l) // "#", pc, function+offset, file:line
			if len(f) < 4 || !strings.HasPrefix(f[2], "istio.io/istio/") {
				continue
			}
			file := f[3]
			if i := strings.Index(file, "istio.io/istio@"); i >= 0 {
				rest := file[i+len("istio.io/istio@"):]
				file = rest[strings.Index(rest, "/")+1:]
			}
			out = append(out, "    "+f[2][:strings.LastIndex(f[2], "+")]+" at "+file)
		}
		return strings.Join(out, "\n")
	}
	return "    (no such goroutine)"
}

func TestDeletionMidSyncHoldsOtherSecrets(t *testing.T) {
	release := make(chan struct{})
	var releaseOnce sync.Once
	releaseWatch := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(releaseWatch)
	watchInFlight := make(chan struct{})
	var inFlightOnce sync.Once

	stop := test.NewStop(t)
	configCluster := kube.NewFakeClient()
	c := multicluster.NewController(multicluster.ControllerOptions{
		Client:          configCluster,
		ClusterID:       "cluster-1",
		SystemNamespace: ns,
		MeshConfig:      meshwatcher.NewTestWatcher(nil),
		ClientBuilder: func(_ []byte, id cluster.ID, _ ...func(*rest.Config)) (kube.Client, error) {
			client := kube.NewFakeClient()
			if id == slow {
				// The slow cluster's API server does not answer the pods watch until released. The fake
				// client lists before it watches (it has no watch-list support), so this hangs the
				// reflector's own goroutine, as a real client's watch-list initial sync would.
				client.Kube().(*fake.Clientset).PrependWatchReactor("pods", func(clienttesting.Action) (bool, watch.Interface, error) {
					inFlightOnce.Do(func() { close(watchInFlight) })
					<-release
					return false, nil, nil // then let the fake answer
				})
			}
			return client, nil
		},
	})
	configCluster.RunAndWait(stop)
	if err := c.Run(stop); err != nil {
		t.Fatal(err)
	}
	secrets := clienttest.NewWriter[*corev1.Secret](t, configCluster)

	// The slow cluster joins and starts syncing; its pods watch is in flight.
	secrets.Create(remoteSecret(slow))
	select {
	case <-watchInFlight:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow cluster never started its pods watch")
	}
	if st := syncStatus(c, slow); st != multicluster.SyncStatusSyncing {
		t.Fatalf("the slow cluster should be syncing at the deletion, is %q", st)
	}

	// Delete it mid-sync, then add a healthy cluster.
	secrets.Delete(remoteSecret(slow).Name, ns)
	deleted := time.Now()
	secrets.Create(remoteSecret(canary))

	// A correct istiod syncs the healthy cluster in well under a second, whatever the deleted one does.
	err := retry.Until(func() bool { return syncStatus(c, canary) == multicluster.SyncStatusSynced },
		retry.Timeout(hold), retry.Delay(10*time.Millisecond))
	if err == nil {
		t.Logf("the canary synced %.2fs after the deletion, while the deleted cluster's watch was still hung",
			time.Since(deleted).Seconds())
		return
	}
	during := syncStatus(c, canary)
	worker := framesOf("multicluster.(*Controller).deleteCluster")
	hung := framesOf("kubeclient.getInformerFiltered")

	// The slow cluster's API server answers at last.
	releaseWatch()
	released := time.Now()
	retry.UntilOrFail(t, func() bool { return syncStatus(c, canary) == multicluster.SyncStatusSynced },
		retry.Timeout(10*time.Second), retry.Delay(10*time.Millisecond))
	t.Fatalf("a remote secret added right after another remote's secret was deleted mid-sync was held "+
		"until the deleted cluster's API call returned: the canary cluster's status stayed %q for %.1fs "+
		"(its secret not processed), and it synced %.2fs after the deleted cluster's pods watch was answered. "+
		"A correct istiod syncs it at once (well under a second here): deleting a cluster must not wait for "+
		"API calls of that cluster. The secret controller's only worker was waiting in:\n%s\n"+
		"while the deleted cluster's pods reflector was in its watch call:\n%s\n"+
		"i.e. Client.Shutdown() (secretcontroller.go:499) waits for the informer goroutines "+
		"(informerfactory/factory.go:245), one of which is in a watch istiod made with context.Background() "+
		"(pkg/config/schema/kubeclient/resources.gen.go:566-568), which stopping the cluster does not cancel.",
		during, hold.Seconds(), time.Since(released).Seconds(), worker, hung)
}
