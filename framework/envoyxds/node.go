package envoyxds

import (
	"encoding/json"
	"fmt"
	"maps"

	"google.golang.org/protobuf/types/known/structpb"
	meshconfig "istio.io/api/mesh/v1alpha1"
	"istio.io/istio/pilot/pkg/model"
	"istio.io/istio/pkg/bootstrap"
	"istio.io/istio/pkg/config/constants"
	"istio.io/istio/pkg/config/mesh"
	istiomodel "istio.io/istio/pkg/model"
)

// Kind is the gateway class a proxy's pod was deployed for. istiod renders both classes with its
// waypoint template (pilot/pkg/config/kube/gatewaycommon/classinfo.go: Templates "waypoint" for
// the mesh and the east-west controllers), whose proxy runs `pilot-agent proxy waypoint`
// (manifests/charts/istio-control/istio-discovery/files/waypoint.yaml): node type waypoint for
// both. What tells them apart is the pod's gateway.istio.io/managed label
// (pilot/pkg/model/context.go: IsAmbientEastWestGateway, IsWaypointProxy).
type Kind string

const (
	// EastWest is the proxy of a Gateway of class istio-east-west.
	EastWest Kind = "eastwest"
	// Waypoint is the proxy of a Gateway of class istio-waypoint.
	Waypoint Kind = "waypoint"
)

// Pod is the gateway pod a client stands in for, as istiod's waypoint template deploys it for a
// Gateway: what the template and the pod give pilot-agent (its environment and downward-API
// labels and annotations).
type Pod struct {
	Kind Kind
	// Cluster and Network are the cluster's ID and network (ISTIO_META_CLUSTER_ID,
	// ISTIO_META_NETWORK).
	Cluster, Network string
	// Namespace and Gateway are the Gateway's; its Deployment and service account carry its name
	// (both classes disable the name suffix).
	Namespace, Gateway string
	// Name, IP, NodeName and Labels are the pod's (its labels as istiod's template writes them:
	// mesh.GatewayPodLabels).
	Name, IP, NodeName string
	Labels             map[string]string
	// MeshID is the install's global.meshID; empty, the template falls back to the trust domain.
	MeshID string
}

func (p Pod) check() error {
	switch {
	case p.Kind != EastWest && p.Kind != Waypoint:
		return fmt.Errorf("envoyxds: pod kind %q: want %q or %q", p.Kind, EastWest, Waypoint)
	case p.Cluster == "" || p.Namespace == "" || p.Gateway == "" || p.Name == "" || p.IP == "":
		return fmt.Errorf("envoyxds: pod %+v: cluster, namespace, gateway, name and IP are all needed (the node ID and metadata carry them)", p)
	case p.Labels["gateway.istio.io/managed"] == "":
		return fmt.Errorf("envoyxds: pod %s/%s has no gateway.istio.io/managed label: istiod tells gateways and waypoints by it; give the pod's labels (mesh.GatewayPodLabels)", p.Namespace, p.Name)
	}
	return nil
}

// trustDomain is the mesh's (the framework's istiods run with trustDomain cluster.local).
const trustDomain = constants.DefaultClusterLocalDomain

// serviceAccount is the pod's: both classes name it after the Gateway.
func (p Pod) serviceAccount() string { return p.Gateway }

// ID is the node ID pilot-agent sends: type~ip~pod.namespace~namespace.svc.cluster.local
// (pkg/istio-agent/agent.go ServiceNode, with pilot/cmd/pilot-agent/app/cmd.go initProxy's ID
// and the template's --domain).
func (p Pod) ID() string {
	return fmt.Sprintf("%s~%s~%s.%s~%s.svc.%s", model.Waypoint, p.IP, p.Name, p.Namespace, p.Namespace, constants.DefaultClusterLocalDomain)
}

// podLabels are the labels pilot-agent reads from the downward API (/etc/istio/pod/labels), which
// it takes but for the Deployment's pod-template-hash (pkg/bootstrap/config.go GetNodeMetaData).
func (p Pod) podLabels() map[string]string {
	l := maps.Clone(p.Labels)
	delete(l, bootstrap.DefaultDeploymentUniqueLabelKey)
	return l
}

// annotations are the pod's annotations as the template writes them for a Gateway with none.
func (p Pod) annotations() map[string]string {
	return map[string]string{
		"istio.io/rev":         "default",
		"prometheus.io/path":   "/stats/prometheus",
		"prometheus.io/port":   "15020",
		"prometheus.io/scrape": "true",
	}
}

// proxyConfig is the ProxyConfig the template hands pilot-agent (PROXY_CONFIG): mesh defaults with
// the ambient profile's defaultConfig (manifests/charts/istio-control/istio-discovery/files/
// profile-ambient.yaml: ISTIO_META_ENABLE_HBONE) and the template's --serviceCluster.
func (p Pod) proxyConfig() *meshconfig.ProxyConfig {
	pc := mesh.DefaultProxyConfig()
	pc.ProxyMetadata = map[string]string{"ISTIO_META_ENABLE_HBONE": "true"}
	pc.ClusterName = &meshconfig.ProxyConfig_ServiceCluster{ServiceCluster: p.serviceAccount() + "." + p.Namespace}
	return pc
}

// env is the container environment waypoint.yaml gives the proxy, as far as pilot-agent's node
// metadata reads it (ISTIO_META_*, POD_NAME, POD_NAMESPACE, SERVICE_ACCOUNT); the proxy config's
// proxyMetadata is set as environment too.
func (p Pod) env(pc *meshconfig.ProxyConfig) []string {
	meshID := p.MeshID
	if meshID == "" {
		meshID = trustDomain
	}
	e := []string{
		"ISTIO_META_SERVICE_ACCOUNT=" + p.serviceAccount(),
		"ISTIO_META_NODE_NAME=" + p.NodeName,
		"POD_NAME=" + p.Name,
		"POD_NAMESPACE=" + p.Namespace,
		"INSTANCE_IP=" + p.IP,
		"SERVICE_ACCOUNT=" + p.serviceAccount(),
		"ISTIO_META_CLUSTER_ID=" + p.Cluster,
	}
	for k, v := range pc.ProxyMetadata {
		e = append(e, k+"="+v)
	}
	if p.Network != "" {
		e = append(e, "ISTIO_META_NETWORK="+p.Network)
		if p.Kind == EastWest { // only the east-west controller's pods ask for their network's view
			e = append(e, "ISTIO_META_REQUESTED_NETWORK_VIEW="+p.Network)
		}
	}
	return append(e,
		"ISTIO_META_INTERCEPTION_MODE=REDIRECT",
		"ISTIO_META_WORKLOAD_NAME="+p.Gateway,
		"ISTIO_META_OWNER=kubernetes://apis/apps/v1/namespaces/"+p.Namespace+"/deployments/"+p.Gateway,
		"ISTIO_META_MESH_ID="+meshID,
		"TRUST_DOMAIN="+trustDomain,
	)
}

// Metadata is the node metadata the pod's Envoy sends istiod: built by pilot-agent's own code
// (pkg/bootstrap GetNodeMetaData, with the options pkg/istio-agent/agent.go generateNodeMetadata
// passes and pilot-agent's defaults), with the pod's labels and annotations as it reads them from
// the downward API, serialized as the bootstrap's node metadata is (typed fields, then the raw
// ISTIO_META_ ones they do not cover: pkg/bootstrap/option/convert.go marshalMetadata).
func (p Pod) Metadata() (*structpb.Struct, error) {
	node, err := p.Node()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(node.Metadata)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	for k, v := range node.RawMetadata {
		if _, typed := out[k]; !typed {
			out[k] = v
		}
	}
	return structpb.NewStruct(out)
}

// Node is the bootstrap node pilot-agent builds for the pod (pkg/bootstrap GetNodeMetaData, with
// the options pkg/istio-agent/agent.go generateNodeMetadata passes and pilot-agent's defaults),
// with the pod's labels and annotations as it reads them from the downward API: what Metadata
// sends istiod, and what pkg/bootstrap renders the pod's Envoy bootstrap from.
func (p Pod) Node() (*istiomodel.Node, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	pc := p.proxyConfig()
	node, err := bootstrap.GetNodeMetaData(bootstrap.MetadataOptions{
		ID:                         p.ID(),
		Envs:                       p.env(pc),
		InstanceIPs:                []string{p.IP},
		ProxyConfig:                pc,
		PilotSubjectAltName:        []string{"istiod.istio-system.svc"}, // config.GetPilotSan of the default discovery address, under MUTUAL_TLS
		EnvoyStatusPort:            15021,                               // ENVOY_STATUS_PORT's default
		EnvoyPrometheusPort:        15090,                               // ENVOY_PROMETHEUS_PORT's default
		EnvoySkipDeprecatedLogs:    true,                                // ENVOY_SKIP_DEPRECATED_LOGS' default
		WorkloadIdentitySocketFile: "socket",                            // WORKLOAD_IDENTITY_SOCKET_FILE's default
	})
	if err != nil {
		return nil, fmt.Errorf("envoyxds: node metadata of %s/%s: %w", p.Namespace, p.Name, err)
	}
	// What GetNodeMetaData would have read from /etc/istio/pod, which this process has not.
	node.Metadata.Labels = p.podLabels()
	node.Metadata.Annotations = p.annotations()
	return node, nil
}
