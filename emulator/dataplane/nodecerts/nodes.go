package nodecerts

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/ambientmc/ambientmc/emulator/dataplane/identity"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/workload"
)

// Nodes is a ztunnel's certificate client on each of some nodes, following the pods on its node
// as istio-cni's node agent does (a watch of the node's pods): a ztunnel holds one certificate per
// identity among the ambient pods of its node, asked for when the first such pod appears and
// forgotten when the last goes (ztunnel's CertFetcher: prefetch_cert, and clear_cert when
// was_last_identity_on_node). These nodes carry no traffic; their certificates are istiod's work.
type Nodes struct {
	proxies map[string]*Proxy // by node
	stop    chan struct{}

	mu   sync.Mutex
	pods map[types.UID]served         // ambient pods served now
	held map[string]*identity.Holders // pods per identity, by node
}

// served is a pod's node and identity.
type served struct{ node, id string }

// ServeNodes starts a ztunnel's certificate client (cfg, with its Node set to each) on every one
// of nodes and waits until each has listed its node's pods; the certificates come in the
// background (Wait).
func ServeNodes(ctx context.Context, cfg Config, nodes []string) (_ *Nodes, err error) {
	n := &Nodes{proxies: map[string]*Proxy{}, stop: make(chan struct{}), pods: map[types.UID]served{}, held: map[string]*identity.Holders{}}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	cfg.ServiceAccount = ZtunnelAccount
	var synced []cache.InformerSynced
	for _, node := range nodes {
		c := cfg
		c.Node = node
		p, err := Start(ctx, c)
		if err != nil {
			return nil, err
		}
		n.proxies[node] = p
		n.held[node] = p.certs.Holders()
		f := informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = "spec.nodeName=" + node
		}))
		inf := f.Core().V1().Pods().Informer()
		if err := inf.SetTransform(podFacts); err != nil {
			return nil, err
		}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { n.update(node, obj) },
			UpdateFunc: func(_, obj any) { n.update(node, obj) },
			DeleteFunc: func(obj any) { n.remove(obj) },
		}); err != nil {
			return nil, err
		}
		f.Start(n.stop)
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil, fmt.Errorf("nodecerts: the pods of %d nodes in %s were not listed: %w", len(nodes), cfg.Cluster, ctx.Err())
	}
	return n, nil
}

// update takes in a pod of node: an ambient pod with an address that has not ended is served (as
// istiod sends it to ztunnel as an HBONE workload), any other not.
func (n *Nodes) update(node string, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if pod.Annotations[workload.RedirectionAnnotation] != "enabled" || pod.Status.PodIP == "" || pod.DeletionTimestamp != nil ||
		pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		n.remove(pod)
		return
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	s := served{node: node, id: pki.SPIFFEID(pod.Namespace, sa)}
	n.mu.Lock()
	defer n.mu.Unlock()
	if prev, ok := n.pods[pod.UID]; ok {
		if prev == s {
			return
		}
		n.held[prev.node].Drop(prev.id)
	}
	n.pods[pod.UID] = s
	n.held[node].Add(s.id)
}

// remove stops serving a pod.
func (n *Nodes) remove(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if prev, ok := n.pods[pod.UID]; ok {
		delete(n.pods, pod.UID)
		n.held[prev.node].Drop(prev.id)
	}
}

// Wait returns once every pod served has its identity's certificate, or names one that has none,
// with the last failure, when ctx ends.
func (n *Nodes) Wait(ctx context.Context) error {
	for {
		missing, why := n.missing()
		if missing == nil {
			return nil
		}
		select {
		case <-n.stop:
			return errClosed
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("node %s: no certificate for %s", missing.node, missing.id), why, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// missing is a pod's node and identity whose certificate the node does not hold yet (nil: none).
func (n *Nodes) missing() (*served, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, s := range n.pods {
		if ok, err := n.proxies[s.node].certs.Has(s.id); !ok {
			return &s, err
		}
	}
	return nil, nil
}

// Counts is what the nodes hold and asked for.
type Counts struct {
	Nodes, Pods, Identities int
	identity.Stats
}

// Counts says how many pods the nodes serve, with how many certificates, and what they asked of
// istiod so far.
func (n *Nodes) Counts() Counts {
	n.mu.Lock()
	c := Counts{Nodes: len(n.proxies), Pods: len(n.pods)}
	for _, h := range n.held {
		c.Identities += h.Len()
	}
	n.mu.Unlock()
	for _, p := range n.proxies {
		s := p.Stats()
		c.Issued += s.Issued
		c.Renewed += s.Renewed
		c.Failed += s.Failed
	}
	return c
}

// Close stops following the nodes and every proxy.
func (n *Nodes) Close() error {
	select {
	case <-n.stop:
		return nil
	default:
		close(n.stop)
	}
	var errs []error
	for _, p := range n.proxies {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// podFacts keeps of a pod only what update reads: at 4000 pods a node's informer otherwise holds
// every pod whole, managed fields included, for the whole run.
func podFacts(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	facts := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
			DeletionTimestamp: pod.DeletionTimestamp},
		Spec:   corev1.PodSpec{NodeName: pod.Spec.NodeName, ServiceAccountName: pod.Spec.ServiceAccountName},
		Status: corev1.PodStatus{PodIP: pod.Status.PodIP, Phase: pod.Status.Phase},
	}
	if v, ok := pod.Annotations[workload.RedirectionAnnotation]; ok {
		facts.Annotations = map[string]string{workload.RedirectionAnnotation: v}
	}
	return facts, nil
}
