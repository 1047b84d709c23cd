package incluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"fortio.org/fortio/fhttp"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/mesh/install"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/probeapp"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/workload"
)

// Ports the path counters are read from, through the API server's pod proxy.
const (
	ztunnelStatsPort = "15020" // ztunnel's merged metrics
	envoyStatsPort   = "15090" // the gateway's Envoy /stats/prometheus
)

// WithDataPlane is the in-cluster part with Istio images that carry a data plane (ztunnel, the
// east-west gateway): the one that offers probe.Deployer. Offered chooses.
type WithDataPlane struct{ *Provider }

// Offered is p as the contract sees it: offering probe.Deployer where its images carry a data plane
// (the ones make images builds hold istiod only: ztunnel is Rust and the gateway Envoy, and neither
// builds here; -istio.hub and -istio.tag of real Istio images bring one).
func (p *Provider) Offered() cluster.Provider {
	if p.opts.Images.RunsDataPlane() == report.DataPlaneNone {
		return p
	}
	return WithDataPlane{p}
}

// DeployProbes renders and applies the probe workloads in every cluster (fortio pods enrolled in
// ambient), waits for their Deployments and reaches the client's fortio REST API through a
// port-forward.
func (w WithDataPlane) DeployProbes(ctx context.Context, s probe.Setup) (_ probe.Env, err error) {
	p := w.Provider
	e := &probeEnv{p: p, setup: s}
	defer func() {
		if err != nil {
			_ = e.Close()
		}
	}()
	p.mu.Lock()
	topo := p.checked
	p.mu.Unlock()
	// The same placement scripts/render writes (install.ProbePlan): the Services everywhere.
	plan, err := install.ProbePlan(topo, s.Local.Name, nameOf(s.Remote), nameOf(s.Peer))
	if err != nil {
		return nil, err
	}
	// Every cluster's probes at once: each waits on its own kubelet.
	g, gctx := errgroup.WithContext(ctx)
	for _, c := range s.Clusters {
		g.Go(func() error { return p.applyProbes(gctx, c, plan[c.Name], s.CAs[c.Name]) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	client, err := readyPod(ctx, s.Local, workload.ProbeNamespace, install.FortioClient)
	if err != nil {
		return nil, err
	}
	e.fwd, err = forwardPod(s.Local, workload.ProbeNamespace, client.Name, []int{workload.EchoPort},
		lineWriter{prefix: "ambientmc: " + s.Local.Name + ": fortio-client port-forward: ", w: p.opts.Log})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", s.Local.Name, err)
	}
	e.api = "http://" + e.fwd.addr(workload.EchoPort)
	if p.opts.OnThisHost && s.Remote != nil {
		return withHops(ctx, e, s)
	}
	return e, nil
}

// applyProbes renders c's probe workloads, applies them and waits for them, recording what it
// created for Destroy (also on error).
func (p *Provider) applyProbes(ctx context.Context, c *cluster.Cluster, probes *install.ProbeOptions, certs cluster.CACerts) error {
	m, err := p.member(c.Name)
	if err != nil {
		return err
	}
	ca, err := mesh.IntermediateOf(c.Name, certs)
	if err != nil {
		return err
	}
	mf, err := install.Render(install.Options{Cluster: c.Cluster, MeshID: p.opts.MeshID, Images: p.opts.Images, CACerts: ca, Probes: probes,
		Platform: p.platformOf(c.Name), SharedHost: p.opts.SharedHost})
	if err != nil {
		return err
	}
	comp := mf.Component(install.ComponentProbes)
	inst, err := install.Apply(ctx, c, &install.Manifests{Cluster: c.Name, Components: []install.Component{*comp}},
		install.ApplyOptions{Wait: true, Timeout: p.opts.InstallTimeout, Log: p.opts.Log})
	if inst != nil {
		p.mu.Lock()
		m.installs = append(m.installs, inst)
		p.mu.Unlock()
	}
	return err
}

// readyPod returns a ready pod of app in c's namespace ns.
func readyPod(ctx context.Context, c *cluster.Cluster, ns, app string) (*corev1.Pod, error) {
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: listing %s pods: %w", c.Name, app, err)
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil && podReady(&pods.Items[i]) {
			return &pods.Items[i], nil
		}
	}
	return nil, fmt.Errorf("cluster %s: no ready pod of %s in %s (%d pods)", c.Name, app, ns, len(pods.Items))
}

// probeEnv drives the fortio client pod and reads ztunnel and gateway metrics.
type probeEnv struct {
	p     *Provider
	setup probe.Setup
	fwd   *forward
	api   string // the client's fortio server, through the port-forward
	// adminDump opens the client's ztunnel config dump; nil means a port-forward (forwardAdmin).
	adminDump dumpOpener

	mu      sync.Mutex
	echoFwd *forward // to echo-local's fortio server, opened by the first Direct load
}

// echoAPI is echo-local's fortio server in the client's cluster, through a port-forward.
func (e *probeEnv) echoAPI(ctx context.Context) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.echoFwd == nil {
		pod, err := readyPod(ctx, e.setup.Local, workload.ProbeNamespace, probe.EchoLocal)
		if err != nil {
			return "", err
		}
		if e.echoFwd, err = forwardPod(e.setup.Local, workload.ProbeNamespace, pod.Name, []int{workload.EchoPort},
			lineWriter{prefix: "ambientmc: " + e.setup.Local.Name + ": echo-local port-forward: ", w: e.p.opts.Log}); err != nil {
			return "", fmt.Errorf("cluster %s: %w", e.setup.Local.Name, err)
		}
	}
	return "http://" + e.echoFwd.addr(workload.EchoPort), nil
}

var _ probe.Env = (*probeEnv)(nil)

// serviceURL is what the client calls for app: its Service, captured by the node's ztunnel. No
// query string: the echo servers add their x-served-by header only to requests without one
// (fortio's -echo-server-default-params).
func serviceURL(app string) string {
	return fmt.Sprintf("http://%s:%d/echo", workload.ProbeHost(app), workload.ProbePort)
}

// Ready waits until every deployed app answers through the mesh from the client pod, an app with
// one server cluster is served by it, and the client's ztunnel holds a healthy endpoint of every
// app in every other cluster that serves it (ztunnelHolds), all within timeout.
func (e *probeEnv) Ready(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, c := range e.setup.Servers() {
		for _, app := range e.setup.AppsOf(c) {
			var last error
			err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
				by, err := e.Request(ctx, app)
				switch {
				case err != nil:
					last = err
				case app != probe.EchoFailover && by != c.Name:
					last = fmt.Errorf("served by %q, want %s", by, c.Name)
				default:
					return true, nil
				}
				return false, nil
			})
			if err != nil {
				return fmt.Errorf("probes: %s never answered through the mesh from %s within %s: %v%s", app, e.setup.Local.Name, timeout, last, e.clientZtunnelLog())
			}
		}
	}
	if err := e.sourcesKept(ctx); err != nil {
		return err
	}
	return e.ztunnelHolds(ctx)
}

// sourcesKept checks that the applications on the client's network see the client pod's own
// address as their caller, as ztunnel connects to them from the original source; across networks
// the caller is the east-west gateway, whose tunnel ends at the destination's ztunnel.
func (e *probeEnv) sourcesKept(ctx context.Context) error {
	client, err := readyPod(ctx, e.setup.Local, workload.ProbeNamespace, install.FortioClient)
	if err != nil {
		return err
	}
	want, err := netip.ParseAddr(client.Status.PodIP)
	if err != nil {
		return fmt.Errorf("probes: fortio-client's pod address %q: %w", client.Status.PodIP, err)
	}
	apps := []string{probe.EchoLocal}
	if e.setup.Peer != nil {
		apps = append(apps, probe.EchoPeer)
	}
	for _, app := range apps {
		url := e.api + "/fortio/fetch/" + fmt.Sprintf("%s:%d/debug", workload.ProbeHost(app), workload.ProbePort)
		got, err := probeapp.FetchSource(ctx, oneShot, url)
		if err != nil {
			return fmt.Errorf("probes: %s's debug page through the mesh from %s: %w", app, e.setup.Local.Name, err)
		}
		if got != want {
			return fmt.Errorf("probes: %s saw its caller as %s, want the client pod's %s: the ztunnel does not connect to applications from the original source%s",
				app, got, want, e.clientZtunnelLog())
		}
	}
	return nil
}

// clientZtunnelLog is the end of the log of the ztunnel that captures the client's traffic, to
// attach to a failure ("" when it cannot be read).
func (e *probeEnv) clientZtunnelLog() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := e.setup.Local
	client, err := readyPod(ctx, c, workload.ProbeNamespace, install.FortioClient)
	if err != nil {
		return ""
	}
	ns := e.p.ztunnelNamespace(c.Name)
	z, err := nodeZtunnel(ctx, c, ns, client)
	if err != nil {
		return "; " + err.Error()
	}
	tail := int64(20)
	data, err := c.Client.CoreV1().Pods(ns).GetLogs(z.Name, &corev1.PodLogOptions{TailLines: &tail}).DoRaw(ctx)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("\nthe client's ztunnel %s/%s, last %d lines of its log:\n%s", ns, z.Name, tail, strings.TrimSpace(string(data)))
}

// restRunBody turns fortio runner options into the JSON body of fortio's REST run API
// (rapi.RESTRunHandler reads every option as a string). Synchronous: no "async", so the reply is
// the run's fhttp.HTTPRunnerResults. New connections: fortio's REST API takes keep-alive from the
// server's flags only, so a connection reuse range of 1 gives one connection per request.
func restRunBody(o *fhttp.HTTPRunnerOptions) ([]byte, error) {
	perc := make([]string, len(o.Percentiles))
	for i, p := range o.Percentiles {
		perc[i] = strconv.FormatFloat(p, 'f', -1, 64)
	}
	on := func(b bool) string {
		if b {
			return "on"
		}
		return ""
	}
	body := map[string]string{
		"url":       o.URL,
		"qps":       strconv.FormatFloat(o.QPS, 'f', -1, 64),
		"t":         o.Duration.String(),
		"c":         strconv.Itoa(o.NumThreads),
		"r":         strconv.FormatFloat(o.RunnerOptions.Resolution, 'g', -1, 64),
		"p":         strings.Join(perc, ","),
		"uniform":   on(o.Uniform),
		"jitter":    on(o.Jitter),
		"nocatchup": on(o.NoCatchUp),
	}
	if o.DisableKeepAlive {
		body["connection-reuse"] = "1"
	}
	if o.Labels != "" {
		body["labels"] = o.Labels
	}
	for k, v := range body {
		if v == "" {
			delete(body, k)
		}
	}
	return json.Marshal(body)
}

// runREST posts one run to a fortio server's REST API at base and returns its results.
func runREST(ctx context.Context, base string, o *fhttp.HTTPRunnerOptions) (*fhttp.HTTPRunnerResults, error) {
	body, err := restRunBody(o)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/fortio/rest/run", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Timeout: o.Duration + 2*time.Minute}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fortio REST run: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fortio REST run: %s: %s", resp.Status, bytes.TrimSpace(data))
	}
	res := &fhttp.HTTPRunnerResults{}
	if err := json.Unmarshal(data, res); err != nil {
		return nil, fmt.Errorf("fortio REST run: decoding the results: %w (%.200s)", err, data)
	}
	return res, nil
}

// Load runs fortio in the client pod through the mesh, or (Direct) in the echo-local pod against
// itself.
// Host CPU is measured only where the clusters run on this host (Options.OnThisHost).
func (e *probeEnv) Load(ctx context.Context, l probe.Load) (*probe.LoadResult, error) {
	url, api := serviceURL(l.App), e.api
	if l.Direct {
		// In ambient every outbound connection of a pod is captured, even to a pod IP, so the
		// harness floor is fortio in the echo-local pod calling its own server on loopback, which
		// ztunnel does not capture.
		var err error
		if api, err = e.echoAPI(ctx); err != nil {
			return nil, err
		}
		url = "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(workload.EchoPort)) + "/echo"
	} else if l.App == "" {
		return nil, errors.New("probes: Load needs an App unless Direct")
	}
	o := probeapp.FortioOptions(url+"?size="+strconv.Itoa(l.Payload), l)
	var before measure.HostCPU
	if e.p.opts.OnThisHost {
		var err error
		if before, err = measure.ReadHostCPU(); err != nil {
			return nil, err
		}
	}
	res, err := runREST(ctx, api, o)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", e.setup.Local.Name, err)
	}
	r := probeapp.FortioResult(res, l.Connections)
	r.HostCPUBusy = -1
	if e.p.opts.OnThisHost {
		after, err := measure.ReadHostCPU()
		if err != nil {
			return nil, err
		}
		r.HostCPUBusy = after.BusySince(before)
	}
	return r, nil
}

// Request fetches app once through the client's fortio fetch proxy (/fortio/fetch/, which opens a
// new connection per call and passes the upstream response through as it is) and returns the
// echo server's x-served-by header.
func (e *probeEnv) Request(ctx context.Context, app string) (string, error) {
	by, err := fetchServedBy(ctx, e.api, serviceURL(app))
	if err != nil {
		return "", fmt.Errorf("%s through fortio-client: %w", app, err)
	}
	return by, nil
}

// fetchServedBy has the fortio server at base fetch url once and returns the x-served-by header.
func fetchServedBy(ctx context.Context, base, url string) (string, error) {
	// Without the scheme: the proxy path must not contain "//", which Go's mux would redirect.
	return probeapp.FetchServedBy(ctx, oneShot, base+"/fortio/fetch/"+strings.TrimPrefix(url, "http://"))
}

var oneShot = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}

// SetReady scales app's Deployment in cluster to 0 (a kubelet owns pod status here) or back to 1,
// and waits until that took effect.
func (e *probeEnv) SetReady(ctx context.Context, app, clusterName string, ready bool) error {
	var c *cluster.Cluster
	for _, cl := range e.setup.Clusters {
		if cl.Name == clusterName {
			c = cl
		}
	}
	if c == nil {
		return fmt.Errorf("probes: no cluster %s", clusterName)
	}
	replicas := int32(0)
	if ready {
		replicas = 1
	}
	deps := c.Client.AppsV1().Deployments(workload.ProbeNamespace)
	sc, err := deps.GetScale(ctx, app, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("cluster %s: %s: %w", clusterName, app, err)
	}
	sc.Spec.Replicas = replicas
	if _, err := deps.UpdateScale(ctx, app, sc, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("cluster %s: scaling %s to %d: %w", clusterName, app, replicas, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := deps.Get(ctx, app, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if ready {
			return d.Status.ReadyReplicas == 1 && d.Status.UpdatedReplicas == 1, nil
		}
		return d.Status.ReadyReplicas == 0, nil
	})
	if err != nil {
		return fmt.Errorf("cluster %s: %s did not reach %d ready replicas: %w", clusterName, app, replicas, err)
	}
	return nil
}

// Path sums ztunnel and east-west gateway metrics of every probe cluster (see path.go for what
// each field counts on real ztunnels).
func (e *probeEnv) Path(ctx context.Context) (probe.PathCounters, error) {
	pc := probe.PathCounters{Served: map[string]int64{}, ServedConnections: true, GatewayTunnels: map[string]int64{},
		Inbound: map[string]int64{}, InboundViaGateway: map[string]int64{}}
	for _, c := range e.setup.Servers() {
		zns := e.p.ztunnelNamespace(c.Name)
		zt, err := c.Client.CoreV1().Pods(zns).List(ctx, metav1.ListOptions{LabelSelector: "app=ztunnel"})
		if err != nil {
			return pc, fmt.Errorf("cluster %s: listing ztunnels: %w", c.Name, err)
		}
		for _, z := range zt.Items {
			data, err := c.Client.CoreV1().Pods(zns).ProxyGet("http", z.Name, ztunnelStatsPort, "/metrics", nil).DoRaw(ctx)
			if err != nil {
				return pc, fmt.Errorf("cluster %s: metrics of %s: %w", c.Name, z.Name, err)
			}
			if err := addZtunnel(&pc, c.Name, install.FortioClient, e.networkOf, bytes.NewReader(data)); err != nil {
				return pc, fmt.Errorf("cluster %s: %s: %w", c.Name, z.Name, err)
			}
		}
		gws, err := c.Client.CoreV1().Pods(mesh.SystemNamespace).List(ctx, metav1.ListOptions{
			LabelSelector: "gateway.networking.k8s.io/gateway-name=" + mesh.EastWestGateway})
		if err != nil {
			return pc, fmt.Errorf("cluster %s: listing the east-west gateway: %w", c.Name, err)
		}
		for _, g := range gws.Items {
			data, err := c.Client.CoreV1().Pods(mesh.SystemNamespace).ProxyGet("http", g.Name, envoyStatsPort, "/stats/prometheus", nil).DoRaw(ctx)
			if err != nil {
				return pc, fmt.Errorf("cluster %s: stats of %s: %w", c.Name, g.Name, err)
			}
			if err := addGateway(&pc, c.Name, bytes.NewReader(data)); err != nil {
				return pc, fmt.Errorf("cluster %s: %s: %w", c.Name, g.Name, err)
			}
		}
	}
	return pc, nil
}

// networkOf is cluster name's network ("" for a cluster not in the run).
func (e *probeEnv) networkOf(name string) string {
	for _, c := range e.setup.Clusters {
		if c.Name == name {
			return c.Network
		}
	}
	return ""
}

// Close ends the port-forward; the probe objects go with the provider's Destroy.
func (e *probeEnv) Close() error {
	if e.fwd != nil {
		e.fwd.Close()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.echoFwd != nil {
		e.echoFwd.Close()
	}
	return nil
}

// nameOf is c's name, "" for none.
func nameOf(c *cluster.Cluster) string {
	if c == nil {
		return ""
	}
	return c.Name
}
