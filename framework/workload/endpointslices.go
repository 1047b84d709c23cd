package workload

import (
	"context"
	"fmt"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/ambientmc/ambientmc/framework/cluster"
)

// Published counts what the EndpointSlice controller published for the scale services.
type Published struct {
	Slices, Endpoints, Ready int
}

// CountEndpointSlices counts the EndpointSlices of s's services in c and their pod endpoints.
func CountEndpointSlices(ctx context.Context, c *cluster.Cluster, s Scale) (Published, error) {
	var out Published
	for k := range s.Namespaces {
		list, err := c.Client.DiscoveryV1().EndpointSlices(NamespaceName(k)).List(ctx, metav1.ListOptions{})
		if err != nil {
			return Published{}, fmt.Errorf("cluster %s: listing EndpointSlices: %w", c.Name, err)
		}
		for _, sl := range list.Items {
			if !isScaleService(s, sl) {
				continue
			}
			out.Slices++
			for _, ep := range sl.Endpoints {
				if ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" {
					continue
				}
				out.Endpoints++
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					out.Ready++
				}
			}
		}
	}
	return out, nil
}

func isScaleService(s Scale, sl discoveryv1.EndpointSlice) bool {
	var n int
	svc := sl.Labels[discoveryv1.LabelServiceName]
	if _, err := fmt.Sscanf(svc, "svc-%d", &n); err != nil || ServiceName(n) != svc || n >= s.Services {
		return false
	}
	return s.ServiceNamespace(n) == sl.Namespace
}

// WaitEndpointSlices waits until the EndpointSlice controller has published every scale pod of c
// as a ready endpoint, and returns the count.
func WaitEndpointSlices(ctx context.Context, c *cluster.Cluster, s Scale, timeout time.Duration) (Published, error) {
	var last Published
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := CountEndpointSlices(ctx, c, s)
		if err != nil {
			return false, nil // transient; the timeout says what was missing
		}
		last = p
		return p.Ready == s.Pods, nil
	})
	if err != nil {
		return last, fmt.Errorf("cluster %s: the EndpointSlice controller published %d of %d scale pods as ready (%d slices) within %s: %w",
			c.Name, last.Ready, s.Pods, last.Slices, timeout, err)
	}
	return last, nil
}
