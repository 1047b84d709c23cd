package multicluster

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/clustercheck"
	"github.com/ambientmc/ambientmc/framework/experiment"
	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/framework/subtest"
)

var _ = planned.Add("TestClustersRunControllers", nil, func(in experiment.PlanIn) plan.Item {
	return plan.Item{Expected: experiment.S(7 + 0.25*float64(in.N)),
		Detail: fmt.Sprintf("EndpointSlices, a Deployment's pods, a namespace's deletion in %d clusters at once", in.N)}
})

// TestClustersRunControllers checks that every cluster behaves like a real one where its
// controllers are concerned: the scale services' EndpointSlices hold their pods' addresses, a
// Deployment gets its ReplicaSet and pods, a deleted namespace goes away, and every namespace has
// the root CA ConfigMap. The clusters are checked at once: the wait is the controllers', so it
// does not grow with the cluster count.
func TestClustersRunControllers(t *testing.T) {
	ctx := mc.Begin(t)
	var perCluster []subtest.Case
	for _, c := range mc.Clusters {
		perCluster = append(perCluster, subtest.Case{Name: c.Name, Run: func(t *testing.T) {
			if !c.Runs.Controllers {
				t.Skip("-local.controllers=false: no kube-controller-manager runs")
			}
			t.Run("EndpointSlices hold the scale pods' addresses", func(t *testing.T) { clustercheck.SlicesHoldPods(ctx, t, c, mc.Scale) })
			t.Run("a Deployment gets its ReplicaSet and pods", func(t *testing.T) {
				if mc.WatchedOnly(c.Name) && !clustercheck.ServesDeployments(c) {
					t.Skip("the istiod only watches this cluster, and the provider built it without Deployments (the report's setup section lists the cuts)")
				}
				clustercheck.DeploymentGetsPods(ctx, t, c)
			})
			t.Run("every namespace has kube-root-ca.crt", func(t *testing.T) {
				nss, err := c.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
				require.NoError(t, err)
				for _, ns := range nss.Items {
					if ns.Status.Phase == corev1.NamespaceTerminating {
						continue
					}
					cm, err := c.Client.CoreV1().ConfigMaps(ns.Name).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
					if assert.NoError(t, err, ns.Name) {
						assert.Contains(t, cm.Data["ca.crt"], "BEGIN CERTIFICATE", ns.Name)
					}
				}
			})
		}})
	}
	subtest.Concurrently(t, perCluster...)
}
