package churn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/expctx"
	"github.com/ambientmc/ambientmc/framework/workload"
)

// Modes of a run.
const (
	// Replace deletes a pod and creates its replacement under a new name, as a rollout does.
	Replace = "replace"
	// Ready flips a pod's Ready condition (local churn only: remote readiness is a finding).
	Ready = "ready"
)

// errNoIdle says every target has a change in flight; the runner waits for one to finish.
var errNoIdle = errors.New("every target has a change in flight")

// Pods churns the scale pods of one cluster. Seen from the watcher, an observed (local)
// cluster's pods are workloads of their own; a remote cluster's pods are only the capacity of
// their service's split-horizon workload, so a remote change waits for the previous change of its
// service to show before it is written (each capacity value then has one cause).
type Pods struct {
	c      *cluster.Cluster
	scale  workload.Scale
	remote bool
	// shKeys are the watcher keys of the split-horizon workloads, by service (remote only).
	shKeys map[int]string
	limit  time.Duration

	mu       sync.Mutex
	services [][]*Pod // live pods by service, oldest first
	order    []*Pod   // live pods, oldest first (replace order)
	cursor   int      // round-robin position (ready mode, remote services)
	busySvc  map[int]bool
	inflight map[*Pod]bool // picked pods whose job has not finished
	usedIPs  map[netip.Addr]bool
	// nodes and hostIPs are the scale nodes as the API has them; nextOn is each node's next
	// address slot for a new pod, from firstOn (past the scale pods) on, wrapping around.
	nodes    []*corev1.Node
	hostIPs  []netip.Addr
	nextOn   []int
	firstOn  int
	gen      int
	touched  map[string]bool // local keys any change wrote
	nodeNext int
	// found are the scale pods as NewPods read them, which Restore puts back.
	found []Pod
}

// Pod is one scale pod as the churner keeps it.
type Pod struct {
	svc   int
	name  string
	ip    netip.Addr
	node  int
	ready bool
}

// NewPods reads c's scale pods (x's scale) from its API server. For a remote cluster, shKeys maps each service
// index to its split-horizon workload's key at the watcher. limit is how long a remote change
// waits for its previous step to show before it goes on regardless (that step is then lost).
func NewPods(ctx context.Context, x *expctx.Context, c *cluster.Cluster, shKeys map[int]string, limit time.Duration) (*Pods, error) {
	s := x.Scale
	p := &Pods{c: c, scale: s, remote: shKeys != nil, shKeys: shKeys, limit: limit,
		services: make([][]*Pod, s.Services), busySvc: map[int]bool{}, inflight: map[*Pod]bool{}, usedIPs: map[netip.Addr]bool{},
		firstOn: (s.Pods + s.Nodes - 1) / s.Nodes, nextOn: make([]int, s.Nodes), touched: map[string]bool{}}
	// New pods take addresses the way the scale pods did (the cluster's plan, or their node's
	// podCIDR) and their node's address as host IP.
	for k := range s.Nodes {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, workload.NodeName(k), metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("cluster %s: reading scale node %d: %w", c.Name, k, err)
		}
		ip, err := workload.InternalIP(ctx, c, n.Name)
		if err != nil {
			return nil, err
		}
		p.nodes, p.hostIPs = append(p.nodes, n), append(p.hostIPs, ip)
		p.nextOn[k] = p.firstOn
	}
	for k := range s.Namespaces {
		ns := workload.NamespaceName(k)
		list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("cluster %s: listing pods in %s: %w", c.Name, ns, err)
		}
		for _, kp := range list.Items {
			svc, ok := serviceIndex(kp.Labels["app"])
			if !ok || svc >= s.Services || s.ServiceNamespace(svc) != ns {
				continue
			}
			ip, err := netip.ParseAddr(kp.Status.PodIP)
			if err != nil {
				return nil, fmt.Errorf("cluster %s: pod %s/%s has no usable IP %q", c.Name, ns, kp.Name, kp.Status.PodIP)
			}
			node, _ := strconv.Atoi(strings.TrimPrefix(kp.Spec.NodeName, "node-"))
			pd := &Pod{svc: svc, name: kp.Name, ip: ip, node: node, ready: podReady(&kp)}
			p.services[svc] = append(p.services[svc], pd)
			p.order = append(p.order, pd)
			p.usedIPs[ip] = true
			p.found = append(p.found, *pd)
		}
	}
	if len(p.order) == 0 {
		return nil, fmt.Errorf("cluster %s: no scale pods to churn", c.Name)
	}
	for svc, pods := range p.services {
		if len(pods) == 0 {
			return nil, fmt.Errorf("cluster %s: service %s has no pods to churn", c.Name, workload.ServiceName(svc))
		}
		if p.remote && p.shKeys[svc] == "" {
			return nil, fmt.Errorf("cluster %s: no split-horizon workload of %s at the watcher", c.Name, workload.ServiceName(svc))
		}
	}
	return p, nil
}

// Len is how many scale pods the cluster has now.
func (p *Pods) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.order)
}

// Next picks the target of one change of mode and returns the job that makes it: its writes,
// and for a remote change the wait for each step to show (or the limit). It returns errNoIdle
// when every target has a change in flight.
func (p *Pods) Next(tr *Tracker, mode string) (func(context.Context) error, error) {
	switch {
	case mode == Replace && p.remote:
		return p.replaceRemote(tr)
	case mode == Replace:
		return p.replaceLocal(tr)
	case mode == Ready && !p.remote:
		return p.flipLocal(tr)
	}
	return nil, fmt.Errorf("churn mode %q is not available for a remote cluster", mode)
}

func (p *Pods) uid(pd *Pod) string {
	return PodUID(p.c.Name, p.scale.ServiceNamespace(pd.svc), pd.name)
}

// done ends pd's pick once its writes are sent (and registered with the tracker).
func (p *Pods) done(pd *Pod) {
	p.mu.Lock()
	delete(p.inflight, pd)
	p.mu.Unlock()
}

// forget removes victim (at order[i]) from the live pods. Caller holds p.mu.
func (p *Pods) forget(i int, victim *Pod) {
	p.order = append(p.order[:i:i], p.order[i+1:]...)
	s := p.services[victim.svc]
	j := indexOf(s, victim)
	p.services[victim.svc] = append(s[:j:j], s[j+1:]...)
}

// newPod names and places a replacement for service svc and counts it live. Caller holds p.mu.
func (p *Pods) newPod(svc int) (*Pod, error) {
	node := p.nodeNext % p.scale.Nodes
	ip, err := p.allocIP(node)
	if err != nil {
		return nil, err
	}
	p.gen++
	pd := &Pod{svc: svc, name: fmt.Sprintf("%s-c%d", workload.ServiceName(svc), p.gen), ip: ip, node: node, ready: true}
	p.nodeNext++
	p.services[svc] = append(p.services[svc], pd)
	p.order = append(p.order, pd)
	return pd, nil
}

func (p *Pods) delete(ctx context.Context, tr *Tracker, pd *Pod, key, want string) (*Change, error) {
	ch, err := tr.Expect(key, want, time.Now())
	if err != nil {
		return nil, err
	}
	p.touch(key)
	if err := p.deletePod(ctx, pd); err != nil {
		return nil, err
	}
	return ch, nil
}

// deletePod deletes pd's pod and frees its address.
func (p *Pods) deletePod(ctx context.Context, pd *Pod) error {
	ns := p.scale.ServiceNamespace(pd.svc)
	// No kubelet finishes a graceful deletion here: delete at once.
	err := p.c.Client.CoreV1().Pods(ns).Delete(ctx, pd.name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
	if err != nil {
		return fmt.Errorf("cluster %s: deleting pod %s/%s: %w", p.c.Name, ns, pd.name, err)
	}
	p.mu.Lock()
	delete(p.usedIPs, pd.ip)
	p.mu.Unlock()
	return nil
}

// create creates pd and then writes its Running/Ready status: istiod makes a workload only of a
// pod with an IP, so the status write is the change the watcher can see.
func (p *Pods) create(ctx context.Context, tr *Tracker, pd *Pod, key, want string) (*Change, error) {
	if err := p.createPod(ctx, pd); err != nil {
		return nil, err
	}
	ch, err := tr.Expect(key, want, time.Now())
	if err != nil {
		return nil, err
	}
	p.touch(key)
	return ch, p.writeStatus(ctx, pd, true)
}

// createPod creates pd's pod, without a status (writeStatus gives it one).
func (p *Pods) createPod(ctx context.Context, pd *Pod) error {
	ns, svc := p.scale.ServiceNamespace(pd.svc), workload.ServiceName(pd.svc)
	if _, err := p.c.Client.CoreV1().Pods(ns).Create(ctx, workload.NewPod(ns, pd.name, svc, svc, workload.NodeName(pd.node)), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("cluster %s: creating pod %s/%s: %w", p.c.Name, ns, pd.name, err)
	}
	return nil
}

func (p *Pods) touch(key string) {
	if p.remote {
		return
	}
	p.mu.Lock()
	p.touched[key] = true
	p.mu.Unlock()
}

func (p *Pods) writeStatus(ctx context.Context, pd *Pod, ready bool) error {
	ns := p.scale.ServiceNamespace(pd.svc)
	body, err := json.Marshal(map[string]any{"status": workload.RunningStatus(pd.ip, p.hostIPs[pd.node], ready)})
	if err != nil {
		return err
	}
	if _, err := p.c.Client.CoreV1().Pods(ns).Patch(ctx, pd.name, types.MergePatchType, body, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("cluster %s: writing status of pod %s/%s: %w", p.c.Name, ns, pd.name, err)
	}
	return nil
}

func podReady(kp *corev1.Pod) bool {
	for _, c := range kp.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// serviceIndex parses the app label of a scale pod ("svc-N").
func serviceIndex(app string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(app, "svc-"))
	return n, err == nil && strings.HasPrefix(app, "svc-") && n >= 0
}

func indexOf[T comparable](s []T, v T) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
