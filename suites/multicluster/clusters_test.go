package multicluster

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ambientmc/ambientmc/framework/experiment"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/plan"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Reading each cluster's version and nodes.
var _ = planned.Add("TestClusters", nil, func(in experiment.PlanIn) plan.Item {
	return plan.Item{Expected: experiment.S(0.15 * float64(in.N)), Detail: fmt.Sprintf("%d clusters", in.N)}
})

// TestClusters checks what every later suite relies on: each cluster serves the API through its
// own kubeconfig, has the Istio and Gateway API CRDs and its network label, and is independent.
func TestClusters(t *testing.T) {
	ctx := mc.Begin(t)
	require.Len(t, mc.Clusters, len(mc.Topology.Clusters), "one cluster per topology entry")
	for _, c := range mc.Clusters {
		t.Run(c.Name, func(t *testing.T) {
			// The kubeconfig written for users must work on its own.
			cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
			require.NoError(t, err)
			client, err := kubernetes.NewForConfig(cfg)
			require.NoError(t, err)
			_, err = client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
			require.NoError(t, err, "API served through %s", c.Kubeconfig)

			for _, name := range []string{
				"gateways.gateway.networking.k8s.io",
				"gatewayclasses.gateway.networking.k8s.io",
				"serviceentries.networking.istio.io",
				"authorizationpolicies.security.istio.io",
				"workloadentries.networking.istio.io",
			} {
				_, err := c.Dynamic.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
				assert.NoError(t, err, "CRD %s", name)
			}
			ns, err := c.Client.CoreV1().Namespaces().Get(ctx, mesh.SystemNamespace, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, c.Network, ns.Labels[mesh.NetworkLabel], "network label on %s", mesh.SystemNamespace)

			svc, err := c.Client.CoreV1().Services("default").Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "plan-check"},
				Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
			t.Cleanup(func() {
				_ = c.Client.CoreV1().Services("default").Delete(context.Background(), svc.Name, metav1.DeleteOptions{})
			})
			// ClusterIPs come from the range the provider configured (the local provider's
			// loopback plan), where it knows one.
			ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
			require.NoError(t, err)
			if c.Addresses.Services.IsValid() {
				assert.True(t, c.Addresses.Services.Contains(ip), "ClusterIP %s inside %s", ip, c.Addresses.Services)
			}

			// Service-account signing keys are configured: the TokenRequest API issues tokens.
			sa, err := c.Client.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "token-check"}}, metav1.CreateOptions{})
			require.NoError(t, err)
			t.Cleanup(func() {
				_ = c.Client.CoreV1().ServiceAccounts("default").Delete(context.Background(), sa.Name, metav1.DeleteOptions{})
			})
			tok, err := c.Client.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa.Name, &authv1.TokenRequest{
				Spec: authv1.TokenRequestSpec{Audiences: []string{"istio-ca"}},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
			assert.NotEmpty(t, tok.Status.Token)
		})
	}
}

// Every cluster reads every other's objects.
var _ = planned.Add("TestClustersAreIndependent", nil, func(in experiment.PlanIn) plan.Item {
	return plan.Item{Expected: experiment.S(0.005 * float64(in.N*in.N)), Detail: fmt.Sprintf("%d x %d reads", in.N, in.N)}
})

// TestClustersAreIndependent creates an object in each cluster and checks no other cluster sees it.
func TestClustersAreIndependent(t *testing.T) {
	ctx := mc.Begin(t)
	for _, c := range mc.Clusters {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "only-in-" + c.Name, Namespace: "default"}}
		_, err := c.Client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
		require.NoError(t, err, "cluster %s", c.Name)
		t.Cleanup(func() {
			_ = c.Client.CoreV1().ConfigMaps("default").Delete(context.Background(), cm.Name, metav1.DeleteOptions{})
		})
	}
	for _, owner := range mc.Clusters {
		for _, other := range mc.Clusters {
			_, err := other.Client.CoreV1().ConfigMaps("default").Get(ctx, "only-in-"+owner.Name, metav1.GetOptions{})
			if other == owner {
				assert.NoError(t, err, "%s must see its own object", owner.Name)
			} else {
				assert.True(t, apierrors.IsNotFound(err), "%s must not see %s's object (err=%v)", other.Name, owner.Name, err)
			}
		}
	}
}
