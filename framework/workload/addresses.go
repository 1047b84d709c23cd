package workload

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/ambientmc/ambientmc/framework/cluster"
)

// Framework pods are numbered per fake node: the j-th pod of scale node k. Deploy puts scale pod m
// on node m % nodes as its (m / nodes)-th pod; churn and the suites add pods past those.

// podCIDRWait bounds how long a fake node may wait for node IPAM to give it a podCIDR (it takes
// milliseconds where the controller runs).
const podCIDRWait = 30 * time.Second

// NodeIP is the InternalIP of fake scale node k: the provider's planned address, or the first
// address of the podCIDR node IPAM gave n.
func NodeIP(c *cluster.Cluster, n *corev1.Node, k int) (netip.Addr, error) {
	if p := c.Addresses.Plan; p != nil {
		return p.NodeIP(k)
	}
	cidr, err := podCIDR(n)
	if err != nil {
		return netip.Addr{}, err
	}
	return cluster.HostInCIDR(cidr, 0)
}

// PodIP is the address of the j-th framework pod on scale node k of nodes: in the provider's
// plan, pod ReservedPodIPs + j*nodes + k (so Deploy's pods take the plan in order); with node
// IPAM, the address after the node's own in n's podCIDR, as a CNI's host-local IPAM hands them out.
func PodIP(c *cluster.Cluster, n *corev1.Node, k, j, nodes int) (netip.Addr, error) {
	if p := c.Addresses.Plan; p != nil {
		return p.PodIP(ReservedPodIPs + j*nodes + k)
	}
	cidr, err := podCIDR(n)
	if err != nil {
		return netip.Addr{}, err
	}
	ip, err := cluster.HostInCIDR(cidr, 1+j)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("node %s: pod %d on it: %w; spread the pods over more nodes or give nodes larger podCIDRs (kube-controller-manager --node-cidr-mask-size)", n.Name, j, err)
	}
	return ip, nil
}

func podCIDR(n *corev1.Node) (netip.Prefix, error) {
	if n == nil || n.Spec.PodCIDR == "" {
		name := "?"
		if n != nil {
			name = n.Name
		}
		return netip.Prefix{}, fmt.Errorf("node %s has no spec.podCIDR: this provider leaves pod addresses to node IPAM (kube-controller-manager --allocate-node-cidrs)", name)
	}
	p, err := netip.ParsePrefix(n.Spec.PodCIDR)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("node %s: spec.podCIDR %q: %w", n.Name, n.Spec.PodCIDR, err)
	}
	return p, nil
}

// waitPodCIDR returns node name once node IPAM has set its spec.podCIDR (at once where the
// provider plans addresses itself).
func waitPodCIDR(ctx context.Context, c *cluster.Cluster, n *corev1.Node) (*corev1.Node, error) {
	if c.Addresses.Plan != nil || n.Spec.PodCIDR != "" {
		return n, nil
	}
	var last *corev1.Node
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, podCIDRWait, true, func(ctx context.Context) (bool, error) {
		got, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil // transient; the timeout says what failed
		}
		last = got
		return got.Spec.PodCIDR != "", nil
	})
	if err != nil {
		return nil, fmt.Errorf("node %s got no spec.podCIDR within %s: fake pods on this cluster take addresses from their node's podCIDR, which node IPAM (kube-controller-manager --allocate-node-cidrs) sets: %w", n.Name, podCIDRWait, err)
	}
	return last, nil
}

// InternalIP reads node name's InternalIP from the API (what its kubelet, here the framework,
// reported).
func InternalIP(ctx context.Context, c *cluster.Cluster, name string) (netip.Addr, error) {
	n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return netip.Addr{}, err
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return netip.ParseAddr(a.Address)
		}
	}
	return netip.Addr{}, fmt.Errorf("cluster %s: node %s has no InternalIP", c.Name, name)
}
