package install

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh"
)

// errClusterIP marks an east-west address that only the gateway's own cluster reaches.
var errClusterIP = errors.New("a ClusterIP")

// gatewayAddress returns the first value of the Gateway's status.addresses, or "".
func gatewayAddress(gw *gatewayv1.Gateway) string {
	for _, a := range gw.Status.Addresses {
		if a.Value != "" {
			return a.Value
		}
	}
	return ""
}

// eastWestState says whether the east-west Gateway gw has an address other clusters reach: it
// returns the address, or "" and what is missing. It waits as Istio's own framework does
// (pkg/test/framework/components/istio/eastwest.go) for Programmed=True: while the LoadBalancer
// is pending, istiod reports the Service's ClusterIP in status.addresses ("no external addresses,
// so report the internal ones", pilot/pkg/config/kube/gateway/conversion.go) with Programmed=False,
// and replaces it once the LoadBalancer has an address. A Programmed Gateway whose address is
// still a ClusterIP (a Service of another type) never gets a reachable one: that is an error.
func eastWestState(ctx context.Context, c *cluster.Cluster, gw *gatewayv1.Gateway) (addr, missing string, err error) {
	addr = gatewayAddress(gw)
	if miss := conditionMissing(gw.Status.Conditions, string(gatewayv1.GatewayConditionProgrammed)); miss != "" {
		if addr == "" {
			return "", miss + "; status.addresses is empty", nil
		}
		return "", fmt.Sprintf("%s; status.addresses holds %s, which is not used before Programmed=True", miss, addr), nil
	}
	if addr == "" {
		return "", "status.addresses is empty", nil
	}
	if where := clusterIPOf(ctx, c, gw.GetNamespace(), gw.GetName(), addr); where != "" {
		return "", "", fmt.Errorf("%w: Programmed=True, but its address %s is %s, which other clusters cannot reach; give the Service %s/%s type LoadBalancer (the istio-east-west class default) and a LoadBalancer implementation",
			errClusterIP, addr, where, gw.GetNamespace(), gw.GetName())
	}
	return addr, "", nil
}

// clusterIPOf says how addr is a cluster-internal address of c (inside the service range, or the
// ClusterIP of Service ns/name, which the east-west class names as its Gateway), or "".
func clusterIPOf(ctx context.Context, c *cluster.Cluster, ns, name, addr string) string {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return "" // a hostname: a cloud LoadBalancer's, never a ClusterIP
	}
	if c.Addresses.Services.IsValid() && c.Addresses.Services.Contains(ip) {
		return "inside the cluster's service range " + c.Addresses.Services.String()
	}
	svc, err := c.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err == nil && slices.Contains(append([]string{svc.Spec.ClusterIP}, svc.Spec.ClusterIPs...), addr) {
		return "the ClusterIP of Service " + ns + "/" + name
	}
	return ""
}

// EastWestAddress waits until the cluster's east-west Gateway has an address other clusters reach
// (eastWestState) and returns it. When none comes, the error says why, with the LoadBalancer
// Service's state and events.
func EastWestAddress(ctx context.Context, c *cluster.Cluster, timeout time.Duration) (string, error) {
	var addr, last string
	var refused error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		gw, err := c.GatewayAPI.GatewayV1().Gateways(mesh.SystemNamespace).Get(ctx, mesh.EastWestGateway, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			last = "it does not exist"
			return false, nil
		case err != nil:
			if last == "" { // else keep what the API server last said: this may be the deadline
				last = err.Error()
			}
			return false, nil
		}
		addr, last, refused = eastWestState(ctx, c, gw)
		return addr != "" || refused != nil, nil
	})
	prefix := fmt.Sprintf("install: cluster %s: east-west gateway %s/%s", c.Name, mesh.SystemNamespace, mesh.EastWestGateway)
	switch {
	case refused != nil:
		return "", fmt.Errorf("%s: %w", prefix, refused)
	case err == nil:
		return addr, nil
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		err = fmt.Errorf("timed out after %s", timeout)
	}
	// The wait's context may be spent; the diagnosis gets one of its own.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	return "", fmt.Errorf("%s has no address other clusters reach: %s: %w%s", prefix, last, err, loadBalancerDiagnosis(dctx, c, timeout))
}

// loadBalancerDiagnosis describes the east-west gateway's Service (istiod creates it, named as
// the Gateway) and its events: a LoadBalancer without an ingress address is the usual cause.
func loadBalancerDiagnosis(ctx context.Context, c *cluster.Cluster, waited time.Duration) string {
	ns, name := mesh.SystemNamespace, mesh.EastWestGateway
	svc, err := c.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("\nService %s/%s does not exist: istiod creates it for the Gateway (class %s, which needs AMBIENT_ENABLE_MULTI_NETWORK=true)", ns, name, mesh.EastWestGatewayClass)
	case err != nil:
		return fmt.Sprintf("\nService %s/%s: %v", ns, name, err)
	}
	var b strings.Builder
	ingress := svc.Status.LoadBalancer.Ingress
	fmt.Fprintf(&b, "\nService %s/%s: type %s, ClusterIP %s, %d LoadBalancer ingress addresses", ns, name, svc.Spec.Type, svc.Spec.ClusterIP, len(ingress))
	evs, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": "Service", "involvedObject.name": name,
	}.String()})
	if err != nil {
		fmt.Fprintf(&b, "\nits events: %v", err)
		return b.String()
	}
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer && len(ingress) == 0 {
		if len(evs.Items) == 0 {
			fmt.Fprintf(&b, "\nno LoadBalancer implementation: nothing assigned an address or wrote an event about it in %s; install MetalLB or use a cloud cluster", waited)
		} else {
			fmt.Fprintf(&b, "\nthe LoadBalancer implementation assigned no address; its events:")
		}
	}
	items := evs.Items
	slices.SortFunc(items, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	if len(items) > eventTailSize {
		items = items[len(items)-eventTailSize:]
	}
	for _, e := range items {
		fmt.Fprintf(&b, "\nevent %s Service/%s: %s: %s", e.Type, name, e.Reason, e.Message)
	}
	return b.String()
}
