package incluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	ztdump "istio.io/istio/istioctl/pkg/writer/ztunnel/configdump"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/mesh/install"
	"github.com/ambientmc/ambientmc/framework/workload"
)

// ztunnelAdminPort serves ztunnel's /config_dump. It binds localhost inside the pod, so only a
// port-forward reaches it; `istioctl ztunnel-config workloads` reads the same dump that way.
const ztunnelAdminPort = 15000

// healthy is the status ztunnel gives a workload it may send traffic to.
const healthy = "Healthy"

// remoteHolding is what one ztunnel holds for one probe Service: its endpoints in the remote
// cluster's network, and a summary of all its endpoints for failure messages.
type remoteHolding struct {
	found          bool // the Service is in the dump at all
	remoteHealthy  int
	remoteCapacity uint32
	endpoints      []string // "network/cluster status" per endpoint workload
}

// readZtunnelDump reads a ztunnel config dump with Istio's own reader (the istioctl ztunnel-config
// package, which takes the workloads and services as a list or a map) and returns, per app, what
// the dump holds for Service app.ns in the remote cluster: endpoint workloads of that cluster on
// its network (one per remote pod on the same network, or the split-horizon workload istiod sends
// for a remote network, with the pod count as its capacity).
func readZtunnelDump(data []byte, ns string, apps []string, remote topologyRef) (map[string]remoteHolding, error) {
	cw := &ztdump.ConfigWriter{}
	if err := cw.Prime(data); err != nil {
		return nil, err
	}
	var wls []*ztdump.ZtunnelWorkload
	var svcs []*ztdump.ZtunnelService
	var buf bytes.Buffer
	cw.Stdout = &buf
	if err := cw.PrintWorkloadDump(ztdump.WorkloadFilter{}, "json"); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(buf.Bytes(), &wls); err != nil {
		return nil, fmt.Errorf("ztunnel config dump: workloads: %w", err)
	}
	buf.Reset()
	if err := cw.PrintServiceDump(ztdump.ServiceFilter{Namespace: ns}, "json"); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(buf.Bytes(), &svcs); err != nil {
		return nil, fmt.Errorf("ztunnel config dump: services: %w", err)
	}
	byUID := map[string]*ztdump.ZtunnelWorkload{}
	for _, w := range wls {
		byUID[w.UID] = w
	}
	out := map[string]remoteHolding{}
	for _, app := range apps {
		host := app + "." + ns + ".svc.cluster.local"
		var h remoteHolding
		for _, s := range svcs {
			if s.Hostname != host {
				continue
			}
			h.found = true
			for _, ep := range s.Endpoints {
				w := byUID[ep.WorkloadUID]
				if w == nil {
					h.endpoints = append(h.endpoints, ep.WorkloadUID+" (no such workload)")
					continue
				}
				h.endpoints = append(h.endpoints, fmt.Sprintf("%s/%s %s", w.Network, w.ClusterID, w.Status))
				if w.Network == remote.network && w.ClusterID == remote.name && w.Status == healthy {
					h.remoteHealthy++
					h.remoteCapacity += w.Capacity
				}
			}
		}
		sort.Strings(h.endpoints)
		out[app] = h
	}
	return out, nil
}

// topologyRef names a cluster and its network as ztunnel's workloads carry them (clusterId, network).
type topologyRef struct{ name, network string }

// missingRemote says, for the apps whose Service has no healthy endpoint in the remote cluster,
// what the ztunnel holds instead; "" when every app has one.
func missingRemote(held map[string]remoteHolding, apps []string, remote topologyRef) string {
	var miss []string
	for _, app := range apps {
		h := held[app]
		switch {
		case !h.found:
			miss = append(miss, app+": no such Service in the config dump")
		case h.remoteHealthy == 0:
			eps := "no endpoints"
			if len(h.endpoints) > 0 {
				eps = "endpoints " + strings.Join(h.endpoints, ", ")
			}
			miss = append(miss, fmt.Sprintf("%s: no Healthy endpoint of cluster %s on network %s (%s)", app, remote.name, remote.network, eps))
		}
	}
	return strings.Join(miss, "; ")
}

// waitZtunnelHolds polls fetch (a ztunnel's /config_dump) until its Services of apps in ns each
// hold a healthy endpoint of the remote cluster, or ctx ends; the error says what was missing.
func waitZtunnelHolds(ctx context.Context, fetch func(context.Context) ([]byte, error), ns string, apps []string, remote topologyRef, every time.Duration) error {
	last := "no config dump read yet"
	err := wait.PollUntilContextCancel(ctx, every, true, func(ctx context.Context) (bool, error) {
		data, err := fetch(ctx)
		if err != nil {
			if ctx.Err() == nil { // else keep what the last dump said: this is the deadline
				last = "reading the config dump: " + err.Error()
			}
			return false, nil
		}
		held, err := readZtunnelDump(data, ns, apps, remote)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = missingRemote(held, apps, remote)
		return last == "", nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", last, err)
	}
	return nil
}

// fetchConfigDump gets /config_dump from a ztunnel admin address (host:port).
func fetchConfigDump(ctx context.Context, addr string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/config_dump", nil)
	if err != nil {
		return nil, err
	}
	resp, err := oneShot.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %s: %.200s", resp.Status, data)
	}
	return data, nil
}

// nodeZtunnel returns the ready ztunnel pod (label app=ztunnel, namespace ns) on pod's node: the
// one that captures pod's traffic.
func nodeZtunnel(ctx context.Context, c *cluster.Cluster, ns string, pod *corev1.Pod) (*corev1.Pod, error) {
	if pod.Spec.NodeName == "" {
		return nil, fmt.Errorf("cluster %s: pod %s/%s is not scheduled to a node", c.Name, pod.Namespace, pod.Name)
	}
	zts, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=ztunnel"})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: listing ztunnels in %s: %w", c.Name, ns, err)
	}
	var nodes []string
	for i := range zts.Items {
		z := &zts.Items[i]
		if z.Spec.NodeName != pod.Spec.NodeName {
			nodes = append(nodes, z.Name+" on "+z.Spec.NodeName)
			continue
		}
		if z.DeletionTimestamp == nil && podReady(z) {
			return z, nil
		}
		nodes = append(nodes, z.Name+" on "+z.Spec.NodeName+" (not ready)")
	}
	seen := "none"
	if len(nodes) > 0 {
		seen = strings.Join(nodes, ", ")
	}
	return nil, fmt.Errorf("cluster %s: no ready ztunnel in %s on node %s, where %s runs (ztunnels: %s)",
		c.Name, ns, pod.Spec.NodeName, pod.Name, seen)
}

// dumpOpener opens a ztunnel pod's /config_dump: fetch reads it, stop releases what open took.
type dumpOpener func(ctx context.Context, c *cluster.Cluster, ns, pod string) (fetch func(context.Context) ([]byte, error), stop func(), err error)

// forwardAdmin reaches a ztunnel's admin port through a port-forward (it binds localhost in the pod).
func (e *probeEnv) forwardAdmin(_ context.Context, c *cluster.Cluster, ns, pod string) (func(context.Context) ([]byte, error), func(), error) {
	fwd, err := forwardPod(c, ns, pod, []int{ztunnelAdminPort},
		lineWriter{prefix: "ambientmc: " + c.Name + ": ztunnel admin port-forward: ", w: e.p.opts.Log})
	if err != nil {
		return nil, nil, fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	fetch := func(ctx context.Context) ([]byte, error) { return fetchConfigDump(ctx, fwd.addr(ztunnelAdminPort)) }
	return fetch, fwd.Close, nil
}

// ztunnelNamespace is where the install put cluster name's ztunnel (istio-system, or kube-system
// on platforms whose profile moves it there).
func (p *Provider) ztunnelNamespace(name string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m := p.members[name]; m != nil && m.manifests != nil {
		if comp := m.manifests.Component(install.ComponentZtunnel); comp != nil {
			for _, o := range comp.Objects {
				if o.GetKind() == "DaemonSet" {
					return o.GetNamespace()
				}
			}
		}
	}
	return mesh.SystemNamespace
}

// ztunnelHolds waits until the client's ztunnel (the one on the fortio-client pod's node) holds a
// healthy endpoint of every app in every other cluster that serves it, read from its config dump
// through a port-forward. An answer from echo-failover does not show it: the local endpoint
// serves it.
func (e *probeEnv) ztunnelHolds(ctx context.Context) error {
	local := e.setup.Local
	client, err := readyPod(ctx, local, workload.ProbeNamespace, install.FortioClient)
	if err != nil {
		return err
	}
	ns := e.p.ztunnelNamespace(local.Name)
	zt, err := nodeZtunnel(ctx, local, ns, client)
	if err != nil {
		return err
	}
	open := e.adminDump
	if open == nil {
		open = e.forwardAdmin
	}
	fetch, stop, err := open(ctx, local, ns, zt.Name)
	if err != nil {
		return err
	}
	defer stop()
	for _, c := range e.setup.Servers()[1:] {
		if err := waitZtunnelHolds(ctx, fetch, workload.ProbeNamespace, e.setup.AppsOf(c), topologyRef{c.Name, c.Network}, time.Second); err != nil {
			return fmt.Errorf("probes: ztunnel %s/%s (the client's, in %s) never held what Ready promises: %w", ns, zt.Name, local.Name, err)
		}
	}
	return nil
}
