// Package cluster defines a cluster of the mesh as suites see it, and the seam every provider
// implements: Provider here, the rest of the contract and every optional capability in seam.go.
package cluster

import (
	"context"
	"fmt"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	gatewayapi "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/ambientmc/ambientmc/topology"
)

// Cluster is one member of the mesh, ready to use.
type Cluster struct {
	topology.Cluster

	// Kubeconfig is the admin kubeconfig for the test process and for users (mode 0600).
	Kubeconfig string
	// InternalKubeconfig is what another cluster's istiod uses to reach this API server.
	InternalKubeconfig string
	// RESTConfig, Client, GatewayAPI and Dynamic talk to the API server as admin: Client for
	// the built-in kinds, GatewayAPI for the Gateway API's (the east-west Gateway, its class),
	// Dynamic for rendered manifests and CRDs.
	RESTConfig *rest.Config
	Client     kubernetes.Interface
	GatewayAPI gatewayapi.Interface
	Dynamic    dynamic.Interface
	// KubernetesVersion is the API server's gitVersion.
	KubernetesVersion string
	// StartSeconds is how long the provider took to bring this cluster's API server up.
	StartSeconds float64
	// Addresses are the cluster's pod, node and service ranges, and how fake nodes and pods get
	// their addresses.
	Addresses Addresses
	// Runs says which of Kubernetes' control loops run in this cluster; the framework's fake nodes
	// are set up from it.
	Runs Components
	// ClientWaits counts the client-side rate limiter's waits of Client, GatewayAPI and Dynamic.
	ClientWaits *ClientWaits
}

// Provider creates and destroys the clusters of a topology. Each implementation registers itself
// with framework/provider, with the topologies it can build; the optional capabilities are in
// seam.go.
type Provider interface {
	// Name is the provider's -provider value.
	Name() string
	// Facts describe the run (facts.go).
	Facts() Facts
	// Preflight checks the host before anything starts (binaries, memory, limits).
	Preflight(ctx context.Context, t *topology.Topology) error
	// Create brings up every cluster of t in parallel; on error it has already stopped what it started.
	Create(ctx context.Context, t *topology.Topology) ([]*Cluster, error)
	// LogDir is where component logs are collected, for failure messages.
	LogDir() string
	// Destroy stops and removes everything Create made.
	Destroy(ctx context.Context) error

	// ControlPlane runs istiod in the clusters Create made.
	ControlPlane() ControlPlane
	// Gateways give the clusters' east-west gateways their addresses.
	Gateways() Gateways
}

// Components are the control loops a cluster runs besides its API server.
type Components struct {
	// Controllers: a kube-controller-manager runs (every real cluster; the local provider's unless
	// -local.controllers=false). Without it nothing publishes EndpointSlices, and nothing would
	// evict a fake node's pods, so fake nodes need no renewed lease.
	Controllers bool
	// Scheduler: real pods are scheduled onto nodes (kind, kube), so the framework's fake nodes are
	// tainted to keep them off.
	Scheduler bool
}

// New builds the clients of a ready cluster from its admin REST config and reads its version.
func New(tc topology.Cluster, kubeconfig, internal string, cfg *rest.Config) (*Cluster, error) {
	// Loading thousands of objects is the framework's job, so client-side throttling only hurts;
	// the waits are counted so a report can show it never throttled.
	cfg.QPS, cfg.Burst = 5000, 10000
	cfg.UserAgent = "ambientmc"
	waits := &ClientWaits{}
	cfg.RateLimiter = countingLimiter{flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst), waits}
	proto := rest.CopyConfig(cfg)
	proto.ContentType = "application/vnd.kubernetes.protobuf"
	client, err := kubernetes.NewForConfig(proto)
	if err != nil {
		return nil, err
	}
	// The Gateway API's types have no protobuf form: JSON, as Dynamic.
	gw, err := gatewayapi.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	v, err := client.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("cluster %s: reading the server version: %w", tc.Name, err)
	}
	return &Cluster{
		Cluster:            tc,
		Kubeconfig:         kubeconfig,
		InternalKubeconfig: internal,
		RESTConfig:         cfg,
		Client:             client,
		GatewayAPI:         gw,
		Dynamic:            dyn,
		KubernetesVersion:  v.GitVersion,
		ClientWaits:        waits,
	}, nil
}
