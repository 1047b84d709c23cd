package multicluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/dataplane"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/topology"
)

// probeEnv is the emulated data plane with its probe workloads: a client in the local cluster,
// echo servers in the local and the remote cluster, the ztunnels of their nodes and the clusters'
// east-west gateways.
type probeEnv struct {
	local, remote *cluster.Cluster
	probes        *workload.Probes
	echoes        map[string]*workload.Echo // "cluster/pod"
	clientZ       *dataplane.Ztunnel
	serverZ       map[string]*dataplane.Ztunnel // by cluster
	gateways      map[string]*dataplane.Gateway // by cluster
	vips          map[string]netip.Addr         // service -> ClusterIP in the local cluster
}

var (
	dpOnce sync.Once
	dp     *probeEnv
	dpErr  error
)

// errNoIstiods says the run did not start the istiods the data plane needs.
var errNoIstiods = errors.New("the data plane needs istiod in the client's cluster and in a second primary: run with -mesh.istiods=all")

// dataPlane sets up the probe environment once for all data-plane tests (it is torn down with the
// environment) and makes sure, on every call, that its clusters are joined and traffic flows:
// other tests may have taken clusters out of the mesh in between.
func dataPlane(t *testing.T) *probeEnv {
	t.Helper()
	if len(mc.Clusters) < 2 {
		t.Skip("the data-plane suites need at least two clusters")
	}
	dpOnce.Do(func() { dp, dpErr = startDataPlane(context.Background()) })
	if errors.Is(dpErr, errNoIstiods) {
		t.Skip(dpErr)
	}
	require.NoError(t, dpErr)
	require.NoError(t, dp.ready(context.Background()))
	mc.Report.DataPlane = mc.Provider.DataPlane()
	return dp
}

// ready joins the probe clusters if needed and waits until a request through the mesh reaches
// each echo service and the client ztunnel knows the remote endpoints of echo-remote and
// echo-failover. A client ztunnel that does not get there is restarted (fresh xDS stream, fresh
// connection pool) up to twice, logging why: after a cluster leaves and rejoins, the long-lived
// delta xDS stream has been seen to keep lacking the rejoined cluster's split-horizon workloads
// while a new stream receives them at once.
func (p *probeEnv) ready(ctx context.Context) error {
	if err := joinEach(ctx, p.local, p.remote); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err := p.complete(ctx)
		if err == nil {
			return nil
		}
		if attempt == 3 {
			return err
		}
		mc.Logf("%v; restarting the client ztunnel", err)
		p.clientZ.Close()
		if p.clientZ, err = dataplane.StartZtunnel(ctx, node(p.local, workload.ProbeClientNode), p.probes.Client.IP); err != nil {
			return err
		}
	}
}

// complete checks, within 20 s, that traffic flows and the client's view has the remote endpoints.
func (p *probeEnv) complete(ctx context.Context) error {
	for _, app := range []string{workload.EchoLocal, workload.EchoRemote, workload.EchoFailover} {
		if err := waitServing(ctx, p.url(app), 20*time.Second); err != nil {
			return fmt.Errorf("dataplane: %s never answered through the mesh: %w; the client ztunnel's last outbound error: %q",
				app, err, p.clientZ.LastError())
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, app := range []string{workload.EchoRemote, workload.EchoFailover} {
		for !p.knowsRemote(app) {
			if time.Now().After(deadline) {
				return fmt.Errorf("dataplane: the client ztunnel's view has no healthy endpoint of %s in %s", app, p.remote.Network)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// knowsRemote says whether the client ztunnel holds a healthy endpoint of app in the remote network.
func (p *probeEnv) knowsRemote(app string) bool {
	v := p.clientZ.View()
	svc := v.ServiceByVIP(p.vips[app])
	if svc == nil {
		return false
	}
	for _, ep := range v.Endpoints(svc) {
		if ep.Network == p.remote.Network && ep.Healthy {
			return true
		}
	}
	return false
}

func startDataPlane(ctx context.Context) (*probeEnv, error) {
	local, err := observed(mc)
	if err != nil {
		return nil, err
	}
	var remote *cluster.Cluster
	for _, c := range mc.Clusters {
		if c.Name != local.Name && c.IsPrimary() {
			remote = c
			break
		}
	}
	for _, c := range []*cluster.Cluster{local, remote} {
		if remote == nil || ambient.Istiods[c.Name] == nil {
			return nil, errNoIstiods
		}
	}
	p := &probeEnv{local: local, remote: remote, echoes: map[string]*workload.Echo{},
		serverZ: map[string]*dataplane.Ztunnel{}, gateways: map[string]*dataplane.Gateway{}, vips: map[string]netip.Addr{}}
	mc.Cleanup("stop the data plane", func() error { p.close(); return nil })
	mc.Logf("dataplane: deploying probes in %s and %s", local.Name, remote.Name)
	if p.probes, err = workload.DeployProbes(ctx, mc.Clusters, local, remote); err != nil {
		return nil, err
	}
	for _, s := range p.probes.Servers {
		e, err := workload.ServeEcho(s.IP)
		if err != nil {
			return nil, fmt.Errorf("echo server %s/%s: %w", s.Cluster.Name, s.Name, err)
		}
		p.echoes[s.Cluster.Name+"/"+s.Name] = e
	}
	for _, app := range []string{workload.EchoLocal, workload.EchoRemote, workload.EchoFailover} {
		svc, err := local.Client.CoreV1().Services(workload.ProbeNamespace).Get(ctx, app, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		p.vips[app] = netip.MustParseAddr(svc.Spec.ClusterIP)
	}
	if p.clientZ, err = dataplane.StartZtunnel(ctx, node(local, workload.ProbeClientNode), p.probes.Client.IP); err != nil {
		return nil, err
	}
	for _, c := range []*cluster.Cluster{local, remote} {
		if p.serverZ[c.Name], err = dataplane.StartZtunnel(ctx, node(c, workload.ProbeServerNode), netip.Addr{}); err != nil {
			return nil, err
		}
		gw, _ := topology.GatewayIP(c.Index)
		if p.gateways[c.Name], err = dataplane.StartGateway(ctx, node(c, "eastwest"), gw); err != nil {
			return nil, err
		}
	}
	if err := p.ready(ctx); err != nil {
		return nil, err
	}
	mc.Logf("dataplane: ready (client ztunnel on %s/%s, gateways in %s and %s)", local.Name, workload.ProbeClientNode, local.Name, remote.Name)
	return p, nil
}

// joinEach makes sure the given clusters are in the mesh (joining what is missing).
func joinEach(ctx context.Context, cs ...*cluster.Cluster) error {
	obs, err := observed(mc)
	if err != nil {
		return err
	}
	i := ambient.Istiods[obs.Name]
	for _, c := range cs {
		if slices.Contains(ambient.Joined(), c.Name) {
			continue
		}
		start := time.Now()
		if err := ambient.Join(ctx, c.Name); err != nil {
			return err
		}
		if c.Name == obs.Name {
			continue
		}
		if _, err := waitJoined(ctx, i, nil, c, start, mc.Flags.JoinTimeout); err != nil {
			return err
		}
	}
	return nil
}

// node describes an emulated component on a node of cluster c.
func node(c *cluster.Cluster, name string) dataplane.Node {
	ip, _ := workload.ProbeNodeIP(c, name)
	if name == "eastwest" {
		ip, _ = topology.GatewayIP(c.Index)
	}
	return dataplane.Node{
		Cluster: c.Name, Network: c.Network, Name: name, IP: ip,
		XDSAddress: ambient.Istiods[c.Name].SecureXDSAddress(),
		CA:         ambient.Intermediates[c.Name], Roots: ambient.Root.Pool(),
		Dir: filepath.Join(mc.RunDir, "dataplane", c.Name),
	}
}

// url is the address the client uses for a probe service: its ClusterIP, captured by the client
// node's ztunnel.
func (p *probeEnv) url(app string) string {
	return fmt.Sprintf("http://%s:%d/echo", p.vips[app], workload.ProbePort)
}

func (p *probeEnv) echo(c *cluster.Cluster, pod string) *workload.Echo {
	return p.echoes[c.Name+"/"+pod]
}

func (p *probeEnv) close() {
	for _, z := range p.serverZ {
		z.Close()
	}
	if p.clientZ != nil {
		p.clientZ.Close()
	}
	for _, g := range p.gateways {
		g.Close()
	}
	for _, e := range p.echoes {
		_ = e.Close()
	}
}

// waitServing polls url until it answers 200.
func waitServing(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
