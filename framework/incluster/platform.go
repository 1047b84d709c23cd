package incluster

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/topology"
)

// Capabilities are the topologies the in-cluster part serves for provider name: any number of
// primaries, each with a kubeconfig. Remotes and external control planes would need istiod to
// serve another cluster, which it does not install.
func Capabilities(name string) topology.Capabilities {
	return topology.Capabilities{Provider: name, NeedsKubeconfigs: true}
}

// platformOf is the Istio platform (install.Platforms) cluster name is installed with:
// -istio.platform, or what the cluster showed at preflight. "" when none.
func (p *Provider) platformOf(name string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.platforms[name].Name
}

// choosePlatform records the platform cluster t is installed with: -istio.platform when given
// (for every cluster), else what the cluster shows (detectPlatform).
func (p *Provider) choosePlatform(ctx context.Context, t *target, gitVersion string) {
	groups, _ := t.client.Discovery().ServerGroups()
	var names []string
	if groups != nil {
		for _, g := range groups.Groups {
			names = append(names, g.Name)
		}
	}
	var nodes []corev1.Node
	if l, err := t.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		for _, n := range l.Items {
			if n.Labels[cluster.FakeNodeLabel] != "true" { // an earlier run's, not the platform's
				nodes = append(nodes, n)
			}
		}
	}
	detected, evidence := detectPlatform(gitVersion, names, nodes)
	chosen := cluster.Platform{Name: p.opts.Platform, From: "-istio.platform"}
	switch {
	case chosen.Name == "" && detected != "":
		chosen = cluster.Platform{Name: detected, From: evidence}
	case chosen.Name != "" && detected != "" && detected != chosen.Name:
		fmt.Fprintf(p.opts.Log, "ambientmc: kube preflight: %s: shows platform %s (%s), but -istio.platform=%s is used as given\n", t.tc.Name, detected, evidence, chosen.Name)
	}
	if chosen.Name == "" {
		chosen.From = ""
	} else {
		fmt.Fprintf(p.opts.Log, "ambientmc: kube preflight: %s: Istio platform %s (%s)\n", t.tc.Name, chosen.Name, chosen.From)
	}
	p.mu.Lock()
	p.platforms[t.tc.Name] = chosen
	p.mu.Unlock()
}

// detectPlatform says which of Istio's platforms a cluster shows, and how. Istio itself detects
// only GKE, from the server version (operator/pkg/render/manifest.go clusterSpecificSettings, and
// the istio-cni chart's daemonset.yaml); for the others its install docs ask for global.platform,
// and the clusters show them thus: OpenShift serves its config.openshift.io API group, k3s puts
// "+k3s" in its version (k3d runs k3s in containers it names k3d-<cluster>-...), MicroK8s labels
// its nodes microk8s.io/cluster. minikube is not detected: its profile fits the Docker driver only.
func detectPlatform(gitVersion string, groups []string, nodes []corev1.Node) (name, evidence string) {
	switch {
	case strings.Contains(gitVersion, "-gke"):
		return "gke", "server version " + gitVersion
	case slices.Contains(groups, "config.openshift.io"):
		return "openshift", "serves API group config.openshift.io"
	case strings.Contains(gitVersion, "+k3s"):
		if len(nodes) > 0 && !slices.ContainsFunc(nodes, func(n corev1.Node) bool { return !strings.HasPrefix(n.Name, "k3d-") }) {
			return "k3d", "server version " + gitVersion + ", nodes named k3d-*"
		}
		return "k3s", "server version " + gitVersion
	}
	for _, n := range nodes {
		if n.Labels["microk8s.io/cluster"] == "true" {
			return "microk8s", "node " + n.Name + " labelled microk8s.io/cluster=true"
		}
	}
	return "", ""
}

// platformPermissions are what the install creates in kube-system on platforms whose settings move
// istio-cni there (gke, openshift) and ztunnel too (openshift), beyond the istio-system list.
func platformPermissions(name string) []permission {
	if name != "gke" && name != "openshift" {
		return nil
	}
	var out []permission
	for _, r := range []struct{ group, resource string }{{"apps", "daemonsets"}, {"", "serviceaccounts"}, {"", "configmaps"}} {
		out = append(out, permission{verb: "create", group: r.group, resource: r.resource, namespace: "kube-system"})
	}
	return out
}
