package mesh

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/cluster"
)

// istioComponents are the Istio workloads whose images the report records, by pod label app.
var istioComponents = []string{"istiod", "ztunnel", "istio-cni-node", EastWestGateway}

// Image is one container image of an Istio component in one cluster.
type Image struct {
	Cluster   string
	Component string // e.g. istiod, ztunnel, istio-cni-node, istio-eastwestgateway
	Image     string // as the pod spec names it
	ImageID   string // the digest the node resolved (container status imageID)
}

// istioNamespaces are where an install runs pods: istio-system, and kube-system where a platform
// profile moves istio-cni or ztunnel there.
var istioNamespaces = []string{SystemNamespace, "kube-system"}

// Images reads, from each cluster's running Istio pods, the image every container runs and the
// digest its node resolved, so a report says exactly which build was measured (for providers
// whose Facts say Istio runs from images).
func Images(ctx context.Context, cs []*cluster.Cluster) ([]Image, error) {
	var out []Image
	for _, c := range cs {
		var pods []corev1.Pod
		for _, ns := range istioNamespaces {
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
				out = append(out, Image{Cluster: c.Name, Component: comp, Image: st.Image, ImageID: st.ImageID})
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
