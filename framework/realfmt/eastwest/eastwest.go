// Package eastwest renders the Envoy bootstrap of a real east-west gateway with Istio's own code,
// for tests that need to know what its Envoy writes (realfmt.EnvoyStats): pilot-agent renders
// Istio's template (tools/packaging/common/envoy_bootstrap.json, which the proxyv2 image holds as
// /var/lib/istio/envoy/envoy_bootstrap_tmpl.json: pilot/docker/Dockerfile.proxyv2:24) with
// pkg/bootstrap, for the node it builds from the pod (framework/envoyxds.Pod builds the same node
// with pkg/bootstrap GetNodeMetaData).
package eastwest

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"istio.io/istio/pkg/bootstrap"

	"github.com/ambientmc/ambientmc/framework/envoyxds"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/realfmt"
)

// BootstrapTemplate is Istio's bootstrap template in the istio.io/istio module go.mod selects.
func BootstrapTemplate() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "istio.io/istio").Output()
	if err != nil {
		return "", fmt.Errorf("eastwest: locating istio.io/istio: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "tools", "packaging", "common", "envoy_bootstrap.json"), nil
}

// Bootstrap is the bootstrap pilot-agent writes for the Envoy of cluster-2's east-west gateway
// (network-2), whose pod carries annotations besides the ones istiod's template gives it.
func Bootstrap(annotations map[string]string) ([]byte, error) {
	tmpl, err := BootstrapTemplate()
	if err != nil {
		return nil, err
	}
	const network = "network-2"
	gw := mesh.NewEastWestGateway(network)
	pod := envoyxds.Pod{Kind: envoyxds.EastWest, Cluster: "cluster-2", Network: network, Namespace: gw.Namespace, Gateway: gw.Name,
		Name: gw.Name + "-7d9f8b6c5-x4k2p", IP: "10.12.0.9", NodeName: "node-a", Labels: mesh.GatewayPodLabels(gw, network)}
	node, err := pod.Node()
	if err != nil {
		return nil, err
	}
	if node.Metadata.Annotations == nil {
		node.Metadata.Annotations = map[string]string{}
	}
	for k, v := range annotations {
		node.Metadata.Annotations[k] = v
	}
	var buf bytes.Buffer
	if err := bootstrap.New(bootstrap.Config{Node: node}).WriteTo(tmpl, &buf); err != nil {
		return nil, fmt.Errorf("eastwest: rendering %s: %w", tmpl, err)
	}
	return buf.Bytes(), nil
}

// Stats is the east-west gateway Envoy's stats configuration (Bootstrap's stats_config).
func Stats(annotations map[string]string) (realfmt.EnvoyStats, error) {
	b, err := Bootstrap(annotations)
	if err != nil {
		return realfmt.EnvoyStats{}, err
	}
	cfg, err := realfmt.StatsConfigOfBootstrap(b)
	if err != nil {
		return realfmt.EnvoyStats{}, err
	}
	return realfmt.EnvoyStats{Config: cfg}, nil
}
