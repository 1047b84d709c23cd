package workload

import (
	"context"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ambientmc/ambientmc/framework/cluster"
)

// Labels and annotations istiod reads from scale objects (notes/istio-embedded.md sections 4 and 9).
const (
	// GlobalLabel makes a service GLOBAL under the mesh config's serviceScopeConfigs.
	GlobalLabel = "istio.io/global"
	// DataplaneModeLabel on a namespace enrols it in ambient.
	DataplaneModeLabel = "istio.io/dataplane-mode"
	// RedirectionAnnotation is what istio-cni would set; istiod needs it for TunnelProtocol=HBONE.
	RedirectionAnnotation = "ambient.istio.io/redirection"
	// RegionLabel and ZoneLabel on a Node give its pods' workloads a locality.
	RegionLabel = "topology.kubernetes.io/region"
	ZoneLabel   = "topology.kubernetes.io/zone"
)

// DefaultInFlight is how many API requests Deploy keeps in flight: the rate the published
// scale was loaded at (280-520 pods/s on 2 cores).
const DefaultInFlight = 32

// Progress is told how many of a cluster's pods are Running so far. Deploy calls it about every
// 2 s and once at the end, never concurrently.
type Progress func(cluster string, done, total int)

// Option changes how Deploy loads a cluster.
type Option func(*options)

type options struct {
	inFlight      int
	progressEvery time.Duration
}

// WithInFlight bounds the API requests in flight (DefaultInFlight when not given or below 1).
func WithInFlight(n int) Option { return func(o *options) { o.inFlight = n } }

// WithProgressEvery sets how often Progress is called while pods load (default 2 s).
func WithProgressEvery(d time.Duration) Option { return func(o *options) { o.progressEvery = d } }

// Deployed is what Deploy made in one cluster and how fast.
type Deployed struct {
	Cluster    string
	Namespaces []string
	Services   []types.NamespacedName
	Pods       int
	// Elapsed covers everything Deploy created; PodsPerSecond is Pods over Elapsed.
	Elapsed       time.Duration
	PodsPerSecond float64
}

// Deploy creates scale s in cluster c: nodes, namespaces, service accounts, services, then pods
// (create plus status update each, standing in for scheduler and kubelet). It stops at the first
// error, which names the cluster and the object. It is not idempotent: a second Deploy into the
// same cluster fails with AlreadyExists.
func Deploy(ctx context.Context, c *cluster.Cluster, s Scale, progress Progress, opts ...Option) (*Deployed, error) {
	o := options{inFlight: DefaultInFlight, progressEvery: 2 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	o.inFlight = max(o.inFlight, 1)
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	// Check the plan's room up front so a bad index fails before anything is created (with node
	// IPAM each node's podCIDR is checked as its pods are placed).
	if p := c.Addresses.Plan; p != nil {
		if _, err := p.PodIP(ReservedPodIPs + s.Pods - 1); err != nil {
			return nil, fmt.Errorf("cluster %s: %w", c.Name, err)
		}
	}
	d := &deployer{c: c, s: s, o: o, nodes: make([]*corev1.Node, s.Nodes), nodeIPs: make([]netip.Addr, s.Nodes)}
	start := time.Now()
	out := &Deployed{Cluster: c.Name, Pods: s.Pods}
	for k := range s.Namespaces {
		out.Namespaces = append(out.Namespaces, NamespaceName(k))
	}
	for n := range s.Services {
		out.Services = append(out.Services, types.NamespacedName{Namespace: s.ServiceNamespace(n), Name: ServiceName(n)})
	}

	// Namespaces must exist before anything in them; pods need their node and service account.
	if err := d.parallel(ctx, s.Nodes, d.node); err != nil {
		return nil, err
	}
	if err := d.parallel(ctx, s.Namespaces, d.namespace); err != nil {
		return nil, err
	}
	if err := d.parallel(ctx, s.Services, d.service); err != nil {
		return nil, err
	}
	if err := d.pods(ctx, progress); err != nil {
		return nil, err
	}

	out.Elapsed = time.Since(start)
	out.PodsPerSecond = float64(s.Pods) / out.Elapsed.Seconds()
	if progress != nil {
		progress(c.Name, s.Pods, s.Pods)
	}
	return out, nil
}

type deployer struct {
	c    *cluster.Cluster
	s    Scale
	o    options
	done atomic.Int64 // pods Running so far
	// nodes and nodeIPs are the fake nodes as stored (with their podCIDRs) and their addresses;
	// each is written once, before any pod.
	nodes   []*corev1.Node
	nodeIPs []netip.Addr
}

// parallel runs fn(0..n-1) with at most o.inFlight calls at once and returns the first error.
func (d *deployer) parallel(ctx context.Context, n int, fn func(context.Context, int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(d.o.inFlight)
	for i := range n {
		if gctx.Err() != nil {
			break // an earlier call failed: start nothing new
		}
		g.Go(func() error {
			// The slot may free up just after a failure cancelled gctx: do not send more.
			if err := gctx.Err(); err != nil {
				return fmt.Errorf("cluster %s: deploying scale workloads: %w", d.c.Name, err)
			}
			return fn(gctx, i)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	// Cancelled before any call failed: say so rather than report success.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cluster %s: deploying scale workloads: %w", d.c.Name, err)
	}
	return nil
}

func (d *deployer) fail(verb, kind, name string, err error) error {
	return fmt.Errorf("cluster %s: %s %s %s: %w", d.c.Name, verb, kind, name, err)
}

// node creates fake node k and writes its status as a kubelet does on registration. Where the
// provider leaves addresses to node IPAM, it first waits for the node's podCIDR.
func (d *deployer) node(ctx context.Context, k int) error {
	name := NodeName(k)
	n, err := d.c.Client.CoreV1().Nodes().Create(ctx, FakeNode(d.c, name, map[string]string{
		RegionLabel: fmt.Sprintf("region-%d", d.c.Index),
		ZoneLabel:   fmt.Sprintf("zone-%d", k%3),
	}), metav1.CreateOptions{})
	if err != nil {
		return d.fail("create", "Node", name, err)
	}
	if d.c.Runs.Controllers {
		if err := RenewLease(ctx, d.c, n); err != nil {
			return d.fail("create lease of", "Node", name, err)
		}
	}
	if n, err = waitPodCIDR(ctx, d.c, n); err != nil {
		return fmt.Errorf("cluster %s: %w", d.c.Name, err)
	}
	ip, err := NodeIP(d.c, n, k)
	if err != nil {
		return d.fail("address", "Node", name, err)
	}
	if n, err = PatchNodeStatus(d.c, n, ReadyNodeStatus(d.c, name, ip)); err != nil {
		return d.fail("write status of", "Node", name, err)
	}
	d.nodes[k], d.nodeIPs[k] = n, ip
	return nil
}

func (d *deployer) namespace(ctx context.Context, k int) error {
	name := NamespaceName(k)
	_, err := d.c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{DataplaneModeLabel: "ambient"},
	}}, metav1.CreateOptions{})
	if err != nil {
		return d.fail("create", "Namespace", name, err)
	}
	return nil
}

// service creates service n's ServiceAccount (each service runs as its own identity) and the Service.
func (d *deployer) service(ctx context.Context, n int) error {
	ns, name := d.s.ServiceNamespace(n), ServiceName(n)
	core := d.c.Client.CoreV1()
	meta := metav1.ObjectMeta{Namespace: ns, Name: name}
	if _, err := core.ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta}, metav1.CreateOptions{}); err != nil {
		return d.fail("create", "ServiceAccount", ns+"/"+name, err)
	}
	meta.Labels = map[string]string{GlobalLabel: "true"}
	_, err := core.Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: meta,
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{
				Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080),
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return d.fail("create", "Service", ns+"/"+name, err)
	}
	return nil
}

// podRef places the m-th pod of the cluster: its service, its index within the service, its node.
type podRef struct{ service, k, m int }

func (d *deployer) pods(ctx context.Context, progress Progress) error {
	refs := make([]podRef, 0, d.s.Pods)
	for n := range d.s.Services {
		for k := range d.s.PodsOf(n) {
			refs = append(refs, podRef{service: n, k: k, m: len(refs)})
		}
	}

	stop := make(chan struct{})
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		if progress == nil {
			return
		}
		t := time.NewTicker(d.o.progressEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				progress(d.c.Name, int(d.done.Load()), d.s.Pods)
			}
		}
	}()
	err := d.parallel(ctx, len(refs), func(ctx context.Context, i int) error { return d.pod(ctx, refs[i]) })
	close(stop)
	<-ticked // the final call in Deploy must not overlap a tick
	return err
}

func (d *deployer) pod(ctx context.Context, r podRef) error {
	svc := ServiceName(r.service)
	ns, name := d.s.ServiceNamespace(r.service), fmt.Sprintf("%s-%d", svc, r.k)
	node := r.m % d.s.Nodes
	podIP, err := PodIP(d.c, d.nodes[node], node, r.m/d.s.Nodes, d.s.Nodes)
	if err != nil {
		return d.fail("address", "Pod", ns+"/"+name, err)
	}
	p, err := d.c.Client.CoreV1().Pods(ns).Create(ctx, NewPod(ns, name, svc, svc, NodeName(node)), metav1.CreateOptions{})
	if err != nil {
		return d.fail("create", "Pod", ns+"/"+name, err)
	}
	if err := PatchPodStatus(ctx, d.c, p, RunningStatus(podIP, d.nodeIPs[node], true)); err != nil {
		return fmt.Errorf("cluster %s: %w", d.c.Name, err)
	}
	d.done.Add(1)
	return nil
}

// The one container of every framework-written pod.
const (
	AppContainer = "app"
	AppImage     = "fortio/fortio"
)

// NewPod is an ambient pod as the framework creates it: labelled app=<app>, redirected by the
// ambient annotation (istio-cni's job), already bound to node (the scheduler's job).
func NewPod(ns, name, app, serviceAccount, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   ns,
			Name:        name,
			Labels:      map[string]string{"app": app},
			Annotations: map[string]string{RedirectionAnnotation: "enabled"},
		},
		Spec: corev1.PodSpec{
			NodeName:                     node,
			ServiceAccountName:           serviceAccount,
			AutomountServiceAccountToken: new(false), // no kubelet mounts one
			Containers: []corev1.Container{{
				Name:  AppContainer,
				Image: AppImage,
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			}},
		},
	}
}
