// Package proxies gives istiod the Envoy clients a real mesh has where no Istio proxy runs: one
// Envoy-like client (envoyxds) per east-west gateway and per waypoint, each as the pod that serves
// it, connected to its cluster's istiod; and deploys the waypoints as Istio's multicluster docs do.
package proxies

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/envoyxds"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/xdscount"
)

// podTimeout bounds the wait for a gateway's or waypoint's pod (istiod deploys it on kind and
// kube), syncTimeout a client's first answer from istiod.
const (
	podTimeout  = 3 * time.Minute
	syncTimeout = time.Minute
)

// Set is a run's proxy clients, by the cluster whose istiod they connect to.
type Set struct {
	mesh     *mesh.Mesh
	gateways cluster.Gateways
	dir      string

	mu      sync.Mutex
	clients map[string][]*envoyxds.Client
}

// New is an empty set for m's clusters, whose gateways' pods gws says; certificates go under dir.
func New(m *mesh.Mesh, gws cluster.Gateways, dir string) *Set {
	return &Set{mesh: m, gateways: gws, dir: dir, clients: map[string][]*envoyxds.Client{}}
}

// ConnectEastWest connects c's east-west gateway's proxy to c's istiod.
func (s *Set) ConnectEastWest(ctx context.Context, c *cluster.Cluster) error {
	pod, err := s.gateways.EastWestGatewayPod(ctx, c, podTimeout)
	if err != nil {
		return err
	}
	return s.connect(ctx, c, envoyxds.EastWest, mesh.SystemNamespace, mesh.EastWestGateway, pod)
}

// DeployWaypoint deploys namespace ns's waypoint in c as Istio's multicluster docs do in each
// cluster (the waypoint Gateway, the namespace labelled to use it, its Service labelled global)
// and, with connect, connects its proxy to c's istiod.
func (s *Set) DeployWaypoint(ctx context.Context, c *cluster.Cluster, ns string, connect bool) error {
	gw := mesh.NewWaypoint(ns)
	pod, err := s.gateways.Waypoint(ctx, c, gw, podTimeout)
	if err != nil {
		return err
	}
	if err := mesh.UseWaypoint(ctx, c, ns, gw.Name); err != nil {
		return err
	}
	if err := mesh.MarkGlobal(ctx, c, ns, gw.Name); err != nil {
		return err
	}
	if !connect {
		return nil
	}
	return s.connect(ctx, c, envoyxds.Waypoint, ns, gw.Name, pod)
}

// connect starts the client of gateway ns/name's pod in c, with a certificate for its service
// account (named after the gateway) from c's CA, as istiod's client-certificate check wants it.
func (s *Set) connect(ctx context.Context, c *cluster.Cluster, kind envoyxds.Kind, ns, name string, pod cluster.GatewayPod) error {
	i := s.mesh.Istiods[c.Name]
	if i == nil {
		return fmt.Errorf("cluster %s: no istiod runs for %s/%s's proxy to connect to", c.Name, ns, name)
	}
	cert, err := s.mesh.Intermediates[c.Name].Issue(ns, name, 0)
	if err != nil {
		return err
	}
	dir := filepath.Join(s.dir, c.Name, ns+"-"+name)
	if err := cert.WriteDir(dir); err != nil {
		return err
	}
	client, err := envoyxds.Start(ctx, envoyxds.Config{Address: i.XDSAddress(), CertDir: dir, Pod: envoyxds.Pod{
		Kind: kind, Cluster: c.Name, Network: c.Network, Namespace: ns, Gateway: name,
		Name: pod.Name, IP: pod.IP, NodeName: pod.Node, Labels: pod.Labels, MeshID: pod.MeshID,
	}}, syncTimeout)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients[c.Name] = append(s.clients[c.Name], client)
	return nil
}

// Of are the clients connected to cluster's istiod, of kind.
func (s *Set) Of(cluster string, kind envoyxds.Kind) []*envoyxds.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*envoyxds.Client
	for _, c := range s.clients[cluster] {
		if c.Pod().Kind == kind {
			out = append(out, c)
		}
	}
	return out
}

// Counts are what istiod pushed clients so far, added up.
func Counts(clients []*envoyxds.Client) xdscount.Counts {
	sum := xdscount.Counts{}
	for _, c := range clients {
		sum = sum.Plus(c.Counts())
	}
	return sum
}

// WaitReconnected waits until every client of cluster's istiod has reconnected more often than
// before says (a restarted istiod's new stream) and holds that stream's first answer.
func (s *Set) WaitReconnected(ctx context.Context, cluster string, before map[*envoyxds.Client]int) error {
	s.mu.Lock()
	clients := slices.Clone(s.clients[cluster])
	s.mu.Unlock()
	for _, c := range clients {
		if err := c.WaitSynced(ctx, before[c]+1); err != nil {
			return fmt.Errorf("proxy %s/%s after istiod %s restarted: %w", c.Pod().Namespace, c.Pod().Name, cluster, err)
		}
	}
	return nil
}

// Reconnects are how often each client of cluster's istiod has reconnected so far.
func (s *Set) Reconnects(cluster string) map[*envoyxds.Client]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[*envoyxds.Client]int{}
	for _, c := range s.clients[cluster] {
		out[c] = c.Reconnects()
	}
	return out
}

// Close ends every client.
func (s *Set) Close() {
	s.mu.Lock()
	all := s.clients
	s.clients = map[string][]*envoyxds.Client{}
	s.mu.Unlock()
	for _, cs := range all {
		for _, c := range cs {
			c.Close()
		}
	}
}
