package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/cluster"
)

// platform is the Istio platform a cluster is installed with, and what chose it.
type platform struct{ name, from string }

// Platform returns the Istio platform (install.Platforms) cluster name is installed with and what
// chose it: -istio.platform, or what the cluster showed at preflight. "" when none.
func (p *Provider) Platform(name string) (platform, from string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pl := p.platforms[name]
	return pl.name, pl.from
}

func (p *Provider) platformOf(name string) string {
	pl, _ := p.Platform(name)
	return pl
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
	chosen := platform{name: p.opts.Platform, from: "-istio.platform"}
	switch {
	case chosen.name == "" && detected != "":
		chosen = platform{name: detected, from: evidence}
	case chosen.name != "" && detected != "" && detected != chosen.name:
		fmt.Fprintf(p.opts.Log, "ambientmc: kube preflight: %s: shows platform %s (%s), but -istio.platform=%s is used as given\n", t.tc.Name, detected, evidence, chosen.name)
	}
	if chosen.name == "" {
		chosen.from = ""
	} else {
		fmt.Fprintf(p.opts.Log, "ambientmc: kube preflight: %s: Istio platform %s (%s)\n", t.tc.Name, chosen.name, chosen.from)
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
