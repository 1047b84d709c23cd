package workload

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/topology"
)

// Probe workloads carry the latency suites' real traffic. Every cluster defines the same global
// services; only some clusters run their pods (probe.Setup names them):
//
//	echo-local     endpoints in the client's cluster only
//	echo-remote    endpoints in the other network's cluster only
//	echo-peer      endpoints in the same network's other cluster only
//	echo-failover  endpoints in the client's cluster and one other, PreferClose (the client's first)
const (
	ProbeNamespace  = "probe"
	ProbeClientNode = "probe-client"
	ProbeServerNode = "probe-server"
	EchoLocal       = probe.EchoLocal
	EchoRemote      = probe.EchoRemote
	EchoPeer        = probe.EchoPeer
	EchoFailover    = probe.EchoFailover
	ProbePort       = 80
	EchoPort        = 8080
)

// ProbeHost is app's service hostname (the clusters' domain is cluster.local).
func ProbeHost(app string) string { return app + "." + ProbeNamespace + ".svc.cluster.local" }

// ProbePod is one probe pod and where it runs.
type ProbePod struct {
	Cluster *cluster.Cluster
	Name    string
	App     string
	Node    string
	IP      netip.Addr
}

// Probes are the probe pods deployed across the clusters.
type Probes struct {
	Client  ProbePod
	Servers []ProbePod
}

// Server returns the echo pod of app in cluster, if any.
func (p *Probes) Server(app, cluster string) (ProbePod, bool) {
	for _, s := range p.Servers {
		if s.App == app && s.Cluster.Name == cluster {
			return s, true
		}
	}
	return ProbePod{}, false
}

// probe pod slots inside the reserved block of each cluster's pod range.
const (
	slotClient = iota
	slotEchoLocal
	slotEchoRemote
	slotEchoFailover
	slotEchoPeer
)

// slots places each app's pod in its cluster's reserved block.
var slots = map[string]int{EchoLocal: slotEchoLocal, EchoRemote: slotEchoRemote, EchoPeer: slotEchoPeer, EchoFailover: slotEchoFailover}

// probe nodes use the top of the node range, away from the scale nodes.
const (
	clientNodeIndex = topology.MaxNodes - 2
	serverNodeIndex = topology.MaxNodes - 1
)

// ProbeNodeIP returns the address of a probe node (what its ztunnel uses as its own IP). Probe
// pods run only where the provider plans addresses (the local provider's emulated data plane).
func ProbeNodeIP(c *cluster.Cluster, node string) (netip.Addr, error) {
	p := c.Addresses.Plan
	if p == nil {
		return netip.Addr{}, fmt.Errorf("cluster %s: probe pods need a provider that plans addresses", c.Name)
	}
	if node == ProbeClientNode {
		return p.NodeIP(clientNodeIndex)
	}
	return p.NodeIP(serverNodeIndex)
}

// DeployProbes creates the probe services in every cluster, the client in s.Local, and each echo
// app's pod where s places it (probe.Setup.AppsOf).
func DeployProbes(ctx context.Context, s probe.Setup) (*Probes, error) {
	p := &Probes{}
	for _, c := range s.Clusters {
		if err := probeBase(ctx, c); err != nil {
			return nil, fmt.Errorf("cluster %s: probes: %w", c.Name, err)
		}
	}
	var err error
	if p.Client, err = createProbePod(ctx, s.Local, "client", "client", "client", ProbeClientNode, slotClient); err != nil {
		return nil, err
	}
	for _, c := range s.Servers() {
		for _, app := range s.AppsOf(c) {
			pod, err := createProbePod(ctx, c, app+"-0", app, "echo", ProbeServerNode, slots[app])
			if err != nil {
				return nil, err
			}
			p.Servers = append(p.Servers, pod)
		}
	}
	return p, nil
}

// probeBase creates the namespace, service accounts, nodes and the three global services.
func probeBase(ctx context.Context, c *cluster.Cluster) error {
	cs := c.Client.CoreV1()
	if _, err := cs.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ProbeNamespace, Labels: map[string]string{DataplaneModeLabel: "ambient"},
	}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	for _, sa := range []string{"client", "echo"} {
		if _, err := cs.ServiceAccounts(ProbeNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	for _, node := range []string{ProbeClientNode, ProbeServerNode} {
		n, err := cs.Nodes().Create(ctx, FakeNode(c, node, map[string]string{
			RegionLabel: fmt.Sprintf("region-%d", c.Index), ZoneLabel: "zone-probe",
		}), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if c.Runs.Controllers {
			if err := RenewLease(ctx, c, n); err != nil {
				return err
			}
		}
		ip, err := ProbeNodeIP(c, node)
		if err != nil {
			return err
		}
		if _, err := PatchNodeStatus(c, n, ReadyNodeStatus(c, node, ip)); err != nil {
			return err
		}
	}
	for _, app := range probe.Apps {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ProbeNamespace, Labels: map[string]string{GlobalLabel: "true"}},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": app},
				Ports:    []corev1.ServicePort{{Name: "http", Port: ProbePort, TargetPort: intstr.FromInt32(EchoPort)}},
			},
		}
		if app == EchoFailover {
			// PreferClose makes istiod send a FAILOVER load-balancing policy: the client's own
			// network first, the other network only when nothing local is healthy.
			svc.Spec.TrafficDistribution = new(corev1.ServiceTrafficDistributionPreferClose)
		}
		if _, err := cs.Services(ProbeNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

func createProbePod(ctx context.Context, c *cluster.Cluster, name, app, sa, node string, slot int) (ProbePod, error) {
	if c.Addresses.Plan == nil {
		return ProbePod{}, fmt.Errorf("cluster %s: probe pods need a provider that plans addresses", c.Name)
	}
	ip, err := c.Addresses.Plan.PodIP(slot)
	if err != nil {
		return ProbePod{}, err
	}
	hostIP, err := ProbeNodeIP(c, node)
	if err != nil {
		return ProbePod{}, err
	}
	pods := c.Client.CoreV1().Pods(ProbeNamespace)
	pod, err := pods.Create(ctx, NewPod(ProbeNamespace, name, app, sa, node), metav1.CreateOptions{})
	if err != nil {
		return ProbePod{}, fmt.Errorf("cluster %s: probe pod %s: %w", c.Name, name, err)
	}
	if err := PatchPodStatus(ctx, c, pod, RunningStatus(ip, hostIP, true)); err != nil {
		return ProbePod{}, fmt.Errorf("cluster %s: probe pod: %w", c.Name, err)
	}
	return ProbePod{Cluster: c, Name: name, App: app, Node: node, IP: ip}, nil
}

// SetReady writes a probe pod's readiness, as a kubelet would after its readiness probe.
func SetReady(ctx context.Context, p ProbePod, ready bool) error {
	pods := p.Cluster.Client.CoreV1().Pods(ProbeNamespace)
	pod, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	hostIP, err := ProbeNodeIP(p.Cluster, p.Node)
	if err != nil {
		return err
	}
	return PatchPodStatus(ctx, p.Cluster, pod, RunningStatus(p.IP, hostIP, ready))
}
