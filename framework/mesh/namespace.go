// Package mesh installs and wires Istio ambient in the clusters of an environment.
package mesh

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/pki"
)

const (
	// SystemNamespace is where istiod, its secrets and the east-west gateway live.
	SystemNamespace = pki.IstioNamespace
	// NetworkLabel on the system namespace is how istiod learns its cluster's network.
	NetworkLabel = "topology.istio.io/network"
)

// EnsureSystemNamespace creates istio-system labelled with the cluster's network, or fixes the label.
func EnsureSystemNamespace(ctx context.Context, c *cluster.Cluster) error {
	return EnsureNetworkNamespace(ctx, c, SystemNamespace)
}

// EnsureNetworkNamespace creates namespace name labelled with the cluster's network, or fixes the
// label. An istiod reads a cluster's network from its own namespace's label in that cluster, so an
// istiod running in another namespace needs it in every cluster it reads.
func EnsureNetworkNamespace(ctx context.Context, c *cluster.Cluster, name string) error {
	nss := c.Client.CoreV1().Namespaces()
	ns, err := nss.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{NetworkLabel: c.Network},
		}}, metav1.CreateOptions{})
		return wrap(c, err)
	}
	if err != nil {
		return wrap(c, err)
	}
	if ns.Labels[NetworkLabel] == c.Network {
		return nil
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[NetworkLabel] = c.Network
	_, err = nss.Update(ctx, ns, metav1.UpdateOptions{})
	return wrap(c, err)
}

func wrap(c *cluster.Cluster, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("cluster %s: namespace %s: %w", c.Name, SystemNamespace, err)
}
