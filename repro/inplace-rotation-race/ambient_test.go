// Package rotationrace reproduces istiod losing a remote cluster's network gateway after an
// in-place rotation of its remote secret (same secret name, same data key = cluster ID, new
// kubeconfig), because a per-cluster nested collection is built on the previous, stopped
// generation's sibling collection.
//
// Source lines (istio.io/istio, release-1.31 at eed52ebb66ad; release-1.30 at 9739e10eb9d7 has the same
// code, with other line numbers in networks.go, kclient/client.go, ambient/multicluster.go:350-358 and
// services.go: see README.md):
//   - pkg/kube/multicluster/collections.go:75-126 NestedManyCollectionsFromLocalAndRemote: one
//     krt.NewManyCollection per nested collection over ctrl.Clusters() (:102-118), its result
//     cached per (cluster ID, kubeconfig sha) (:108-110, :116); a nil result is not cached (:112-115).
//   - pilot/pkg/serviceregistry/ambient/multicluster.go:91-116 GlobalGatewaysWithCluster: per
//     cluster a MapCollection over c.Gateways() (:108-113), indexed by cluster ID (:116).
//   - pilot/pkg/serviceregistry/ambient/networks.go:132-168 GlobalNetworkGateways: per cluster,
//     FetchOne of the sibling GatewaysWithCluster by cluster ID (:144), then a collection built on
//     whatever that returned (:152-162). On an update the sibling may not have processed the new
//     generation yet, so the fetch returns the previous generation's collection (non-nil), the
//     result is built on it and cached under the new sha; when the sibling catches up the
//     recompute hits that cache (collections.go:108-110) and keeps it.
//   - pkg/kube/multicluster/clusterstore.go:50-56 the previous generation is stopped (its informers
//     shut down) when the new one has synced, so the registration on its informer fails
//     (pkg/kube/kclient/client.go:231-235, neverReady): the collection never syncs and stays empty.
//   - pilot/pkg/serviceregistry/ambient/networks.go:169-192 the merged network gateways drop the
//     remote's east-west gateway; every split-horizon lookup for its network then fails
//     (pilot/pkg/serviceregistry/ambient/multicluster.go:350-358, "No network gateway found").
//   - the same fetch-a-sibling-by-cluster pattern: services.go:189, workloads.go:284, 299, 306
//     (workloads.go:285-291 says the fetch "will almost always lose" that race).
package rotationrace

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"istio.io/api/label"
	"istio.io/istio/pilot/pkg/features"
	"istio.io/istio/pilot/pkg/serviceregistry/ambient"
	"istio.io/istio/pilot/pkg/serviceregistry/util/xdsfake"
	"istio.io/istio/pkg/activenotifier"
	"istio.io/istio/pkg/cluster"
	"istio.io/istio/pkg/config/constants"
	"istio.io/istio/pkg/config/mesh/meshwatcher"
	"istio.io/istio/pkg/config/schema/gvr"
	"istio.io/istio/pkg/kube"
	"istio.io/istio/pkg/kube/kclient/clienttest"
	"istio.io/istio/pkg/kube/krt"
	"istio.io/istio/pkg/kube/multicluster"
	"istio.io/istio/pkg/ptr"
	"istio.io/istio/pkg/test"
	"istio.io/istio/pkg/test/util/retry"
)

var (
	rotations = flag.Int("rotations", 10, "in-place rotations to try before concluding the race was not lost")
	all       = flag.Bool("all", false, "run every rotation and report how many lost the race, instead of failing at the first")
)

const (
	ns         = "istio-system"
	remote     = cluster.ID("cluster-2")
	remoteNet  = "network-2"
	eastWestIP = "172.18.0.10"
)

// newClient is a fake cluster whose istio-system namespace is on network, with the CRDs the ambient
// index watches and, if gatewayIP is set, an east-west gateway for that network.
func newClient(t *testing.T, network, gatewayIP string) kube.Client {
	c := kube.NewFakeClient()
	for _, g := range []schema.GroupVersionResource{
		gvr.AuthorizationPolicy, gvr.PeerAuthentication, gvr.KubernetesGateway,
		gvr.GatewayClass, gvr.WorkloadEntry, gvr.ServiceEntry,
	} {
		clienttest.MakeCRD(t, c, g)
	}
	clienttest.NewWriter[*corev1.Namespace](t, c).Create(&corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{label.TopologyNetwork.Name: network}},
	})
	if gatewayIP != "" {
		clienttest.NewWriter[*gatewayv1.Gateway](t, c).Create(&gatewayv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{
				Name: "istio-eastwestgateway", Namespace: ns,
				Labels: map[string]string{label.TopologyNetwork.Name: network},
			},
			Spec: gatewayv1.GatewaySpec{
				GatewayClassName: constants.EastWestGatewayClassName,
				Listeners: []gatewayv1.Listener{{
					Name: "mesh", Port: 15008, Protocol: "HBONE",
					TLS: &gatewayv1.ListenerTLSConfig{Mode: ptr.Of(gatewayv1.TLSModeTerminate)},
				}},
			},
			Status: gatewayv1.GatewayStatus{Addresses: []gatewayv1.GatewayStatusAddress{
				{Type: ptr.Of(gatewayv1.IPAddressType), Value: gatewayIP},
			}},
		})
	}
	return c
}

// remoteSecret is generation gen of cluster-2's remote secret: same name and data key, new kubeconfig.
func remoteSecret(gen int) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: "istio-remote-secret-cluster-2", Namespace: ns,
			Labels: map[string]string{multicluster.MultiClusterSecretLabel: "true"},
		},
		Data: map[string][]byte{string(remote): []byte(fmt.Sprintf("kubeconfig with token %d", gen))},
	}
}

// hasEastWestGateway reports whether the index serves cluster-2's east-west gateway (the workload
// built from the merged network gateways, pilot/pkg/serviceregistry/ambient/workloads.go:256-267).
func hasEastWestGateway(idx ambient.Index) bool {
	for _, a := range idx.All() {
		w := a.GetWorkload()
		if w == nil || w.Network != remoteNet {
			continue
		}
		for _, b := range w.Addresses {
			if ip, ok := netip.AddrFromSlice(b); ok && ip.String() == eastWestIP {
				return true
			}
		}
	}
	return false
}

// newestCollection returns the sync state of the newest krt collection of that name in the debugger.
func newestCollection(t *testing.T, d *krt.DebugHandler, name string) (uid int64, synced bool, n int) {
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var cols []struct {
		UID   int64  `json:"uid"`
		Name  string `json:"name"`
		State struct {
			Synced bool `json:"synced"`
		} `json:"state"`
	}
	if err := json.Unmarshal(b, &cols); err != nil {
		t.Fatal(err)
	}
	uid = -1
	for _, c := range cols {
		if c.Name == name {
			n++
			if c.UID > uid {
				uid, synced = c.UID, c.State.Synced
			}
		}
	}
	return uid, synced, n
}

func TestRotationKeepsRemoteNetworkGateway(t *testing.T) {
	test.SetForTest(t, &features.EnableAmbientMultiNetwork, true)
	stop := test.NewStop(t)
	debugger := new(krt.DebugHandler)
	mesh := meshwatcher.NewTestWatcher(nil)
	configCluster := newClient(t, "network-1", "")
	mc := multicluster.NewController(multicluster.ControllerOptions{
		Client: configCluster, ClusterID: "cluster-1", SystemNamespace: ns, MeshConfig: mesh,
		// Every generation of cluster-2 is a new fake client with the same contents.
		ClientBuilder: func([]byte, cluster.ID, ...func(*rest.Config)) (kube.Client, error) {
			return newClient(t, remoteNet, eastWestIP), nil
		},
	})
	if err := mc.Run(stop); err != nil {
		t.Fatal(err)
	}
	idx := ambient.New(ambient.Options{
		SystemNamespace: ns, DomainSuffix: "cluster.local", ClusterID: "cluster-1",
		XDSUpdater: xdsfake.NewFakeXDS(), StatusNotifier: activenotifier.New(true),
		Debugger: debugger, MeshConfig: mesh, MultiClusterController: mc,
	})
	go idx.Run(stop)
	configCluster.RunAndWait(stop)
	secrets := clienttest.NewWriter[*corev1.Secret](t, configCluster)

	secrets.Create(remoteSecret(0))
	retry.UntilOrFail(t, func() bool { return hasEastWestGateway(idx) }, retry.Timeout(10*time.Second),
		retry.Message("cluster-2's east-west gateway should be served after the join"))

	lost := 0
	for i := 1; i <= *rotations; i++ {
		prev := mc.ClusterStore().GetByID(remote)
		secrets.Update(remoteSecret(i))
		// The new generation is synced and the previous one stopped (swap.Complete).
		retry.UntilOrFail(t, func() bool {
			cur := mc.ClusterStore().GetByID(remote)
			return cur != nil && cur != prev && cur.SyncStatus() == multicluster.SyncStatusSynced && prev.Closed()
		}, retry.Timeout(10*time.Second))
		// A correct istiod serves the gateway again within milliseconds; allow 2s.
		if retry.Until(func() bool { return hasEastWestGateway(idx) }, retry.Timeout(2*time.Second)) == nil {
			continue
		}
		lost++
		uid, synced, n := newestCollection(t, debugger, fmt.Sprintf("NetworkGateways[%s]", remote))
		msg := fmt.Sprintf("after in-place rotation %d of %s's remote secret (same name and cluster ID, new kubeconfig), "+
			"its new generation is synced but the ambient index no longer serves its east-west gateway "+
			"(%s on %s) 2s later; a correct istiod keeps serving it across a rotation. "+
			"The newest NetworkGateways[%s] collection (uid %d; %d of that name in the krt debugger) has synced=%v, as one built on the "+
			"previous, stopped generation's GatewaysWithCluster[%s] (fetched at pilot/pkg/serviceregistry/ambient/networks.go:144) "+
			"and cached under the new kubeconfig sha (pkg/kube/multicluster/collections.go:108-116) never syncs; "+
			"TestNestedCollectionUsesCurrentGeneration shows that mechanism alone.",
			i, remote, eastWestIP, remoteNet, remote, uid, n, synced, remote)
		if !*all {
			t.Fatal(msg)
		}
		t.Log(msg)
	}
	if *all {
		t.Logf("%d of %d in-place rotations lost cluster-2's network gateway", lost, *rotations)
		if lost > 0 {
			t.Fail()
		}
	}
}
