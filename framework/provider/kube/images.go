package kube

import (
	"context"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/mesh/install"
)

// istioComponents are the Istio workloads whose images the report records, by pod label app.
var istioComponents = []string{"istiod", "ztunnel", "istio-cni-node", mesh.EastWestGateway}

var _ cluster.ImageLister = (*Provider)(nil)

// Images reads, from each cluster's running Istio pods, the image every container runs and the
// digest its node resolved, so a report says exactly which build was measured.
func (p *Provider) Images(ctx context.Context) ([]cluster.Image, error) {
	p.mu.Lock()
	var cs []*cluster.Cluster
	nss := map[string][]string{}
	for _, m := range p.members {
		cs = append(cs, m.c)
		nss[m.c.Name] = istioNamespaces(m.manifests)
	}
	p.mu.Unlock()
	var out []cluster.Image
	for _, c := range cs {
		var pods []corev1.Pod
		for _, ns := range nss[c.Name] {
			l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, fmt.Errorf("cluster %s: listing Istio pods in %s: %w", c.Name, ns, err)
			}
			pods = append(pods, l.Items...)
		}
		seen := map[string]bool{}
		for _, pod := range pods {
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

// istioNamespaces are where the install runs pods: istio-system, and kube-system where a platform
// profile moves istio-cni or ztunnel there.
func istioNamespaces(mf *install.Manifests) []string {
	out := []string{mesh.SystemNamespace}
	if mf == nil {
		return out
	}
	for _, comp := range mf.Components {
		for _, o := range comp.Objects {
			if k := o.GetKind(); (k == "DaemonSet" || k == "Deployment") && !slices.Contains(out, o.GetNamespace()) {
				out = append(out, o.GetNamespace())
			}
		}
	}
	return out
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
