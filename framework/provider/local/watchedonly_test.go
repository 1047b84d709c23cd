package local

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/kube/apply"
	"github.com/ambientmc/ambientmc/framework/mesh/crds"
)

// readFromRemotes is what an istiod lists and watches in a cluster it does not run in (istio.io/istio
// pkg/kube/multicluster/cluster.go, and its kube registry's WorkloadEntry store), with the node
// leases the framework renews there.
var readFromRemotes = []schema.GroupVersionResource{
	{Version: "v1", Resource: "pods"}, {Version: "v1", Resource: "services"}, {Version: "v1", Resource: "namespaces"},
	{Version: "v1", Resource: "nodes"}, {Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"},
	{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"},
	{Group: "networking.istio.io", Version: "v1", Resource: "workloadentries"},
	{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
}

// TestWatchedOnlyClusterServesWhatIstiodReads starts a cluster where the istiod runs and one it
// only watches, both real: the second holds every CRD but serves only what an istiod reads from
// it, none of the cuts,
// its controller-manager's remaining controllers all sync and work, and the first stays whole.
func TestWatchedOnlyClusterServesWhatIstiodReads(t *testing.T) {
	p := cachedProvider(t)
	p.opts.IstiodClusters = []string{"cluster-1"}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs, slim := startClustersWithCRDs(t, ctx, p, 2, pinnedCRDs(t, ctx))
	whole, watched := cs[0], cs[1]
	require.NoError(t, crds.Apply(ctx, whole.Dynamic, slim))
	require.NoError(t, crds.Apply(ctx, watched.Dynamic, crds.Set(slim).WhereNoIstiod()))

	// Every CRD is there, as istiod's CRD watcher sees them anywhere; only those it reads are served.
	names := func(c *cluster.Cluster) []string {
		list, err := c.Dynamic.Resource(apply.CRDs).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		var out []string
		for _, c := range list.Items {
			out = append(out, c.GetName())
		}
		return out
	}
	assert.Len(t, names(whole), len(slim))
	assert.Equal(t, names(whole), names(watched), "a watched-only cluster holds every CRD")
	vs := schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices"}
	_, err := watched.Dynamic.Resource(vs).List(ctx, metav1.ListOptions{Limit: 1})
	assert.True(t, apierrors.IsNotFound(err), "an Istio CRD is not served where no istiod runs: %v", err)
	_, err = whole.Dynamic.Resource(vs).List(ctx, metav1.ListOptions{Limit: 1})
	assert.NoError(t, err, "where the istiod runs it is")

	for _, gvr := range readFromRemotes {
		_, err := watched.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		assert.NoError(t, err, "list %s", gvr)
		w, err := watched.Dynamic.Resource(gvr).Watch(ctx, metav1.ListOptions{})
		if assert.NoError(t, err, "watch %s", gvr) {
			w.Stop()
		}
	}
	for _, off := range cutResources(t) {
		_, err := watched.Dynamic.Resource(off).List(ctx, metav1.ListOptions{Limit: 1})
		assert.Error(t, err, "%s is still served in the watched-only cluster", off)
		_, err = whole.Dynamic.Resource(off).List(ctx, metav1.ListOptions{Limit: 1})
		assert.NoError(t, err, "%s is not served in the istiod's cluster", off)
	}

	// The controllers left work: a new namespace gets its service account and root CA, and a
	// deleted one goes away (the namespace controller walks every served resource).
	ns, err := watched.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "watched"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, errSA := watched.Client.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		_, errCM := watched.Client.CoreV1().ConfigMaps(ns.Name).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return errSA == nil && errCM == nil, nil
	}), "the service account and root CA controllers act")
	require.NoError(t, watched.Client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}))
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := watched.Client.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
		return err != nil, nil
	}), "the namespace controller finishes a deletion")

	// No component waits on an informer for something the cluster does not serve (a controller
	// that did would never start); by now each would have retried its list many times.
	for _, log := range []string{"kube-apiserver.log", "kube-controller-manager.log"} {
		raw, err := os.ReadFile(filepath.Join(p.opts.RunDir, watched.Name, log))
		require.NoError(t, err)
		for _, line := range strings.Split(string(raw), "\n") {
			assert.NotContains(t, line, "failed to list", "%s", log)
		}
	}
}

// cutResources are the resources watchedOnlyGroups and watchedOnlyResources name.
func cutResources(t *testing.T) []schema.GroupVersionResource {
	out := []schema.GroupVersionResource{
		{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"},
		{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
	}
	for _, r := range watchedOnlyResources {
		parts := strings.Split(r, "/")
		require.Len(t, parts, 3, r)
		out = append(out, schema.GroupVersionResource{Group: parts[0], Version: parts[1], Resource: parts[2]})
	}
	return out
}

func TestControllersForWatchedOnly(t *testing.T) {
	before := slices.Clone(controllers)
	assert.Equal(t, controllers, controllersFor(false))
	got := controllersFor(true)
	assert.Len(t, got, len(controllers)-len(watchedOnlyControllersOff), "every controller turned off is one the list has")
	assert.Contains(t, got, "endpointslice-controller")
	assert.Contains(t, got, "node-ipam-controller")
	assert.NotContains(t, got, "node-lifecycle-controller")
	assert.NotContains(t, got, "deployment-controller")
	assert.Equal(t, before, controllers, "controllersFor leaves the shared list as it was")
	assert.True(t, needsLeaseRenewal(controllersFor(false)), "a whole cluster's node lifecycle reads the fake nodes' leases")
	assert.False(t, needsLeaseRenewal(got), "nothing in a watched-only cluster reads them")
}
