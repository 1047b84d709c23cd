package kube

import (
	"context"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh"
)

// istioComponents are the istio-system workloads whose images the report records, by pod label app.
var istioComponents = []string{"istiod", "ztunnel", "istio-cni-node", mesh.EastWestGateway}

var _ cluster.ImageLister = (*Provider)(nil)

// Images reads, from each cluster's running Istio pods, the image every container runs and the
// digest its node resolved, so a report says exactly which build was measured.
func (p *Provider) Images(ctx context.Context) ([]cluster.Image, error) {
	p.mu.Lock()
	var cs []*cluster.Cluster
	for _, m := range p.members {
		cs = append(cs, m.c)
	}
	p.mu.Unlock()
	var out []cluster.Image
	for _, c := range cs {
		pods, err := c.Client.CoreV1().Pods(mesh.SystemNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("cluster %s: listing Istio pods: %w", c.Name, err)
		}
		seen := map[string]bool{}
		for _, pod := range pods.Items {
			comp := componentOf(pod.Labels)
			if comp == "" {
				continue
			}
			for _, st := range pod.Status.ContainerStatuses {
				key := comp + "|" + st.Image + "|" + st.ImageID
				if seen[key] {
					continue // one row per image of a component, not per pod
				}
				seen[key] = true
				out = append(out, cluster.Image{Cluster: c.Name, Component: comp, Image: st.Image, ImageID: st.ImageID})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Cluster != out[j].Cluster {
			return out[i].Cluster < out[j].Cluster
		}
		return out[i].Component < out[j].Component
	})
	return out, nil
}

// componentOf names the Istio component a pod belongs to ("" for anything else).
func componentOf(labels map[string]string) string {
	for _, key := range []string{"app", "k8s-app", "gateway.networking.k8s.io/gateway-name"} {
		for _, c := range istioComponents {
			if labels[key] == c {
				return c
			}
		}
	}
	return ""
}
