package incluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/workload"
)

// Besides the install (which tracks its own objects), the framework creates objects in several
// places outside this provider: the CRDs and istio-system (env), cacerts and the istio-reader
// RBAC (mesh.Install), remote secrets (mesh.Join), scale namespaces, fake nodes and their leases
// (workload.Deploy). tracked lists them by kind and name; Create records the UIDs of those that
// exist, and Destroy deletes those that did not, so nothing that existed before is ever deleted.
type tracked struct {
	gvr       schema.GroupVersionResource
	namespace string
	selector  string // label selector, "" for all
	match     func(name string) bool
}

var (
	namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	nodesGVR      = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	leasesGVR     = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	secretsGVR    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	saGVR         = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	crdGVR        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crGVR         = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
	crbGVR        = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}
)

func all(string) bool { return true }

func prefixed(prefixes ...string) func(string) bool {
	return func(name string) bool {
		return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name, p) })
	}
}

func suffixed(suffixes ...string) func(string) bool {
	return func(name string) bool {
		return slices.ContainsFunc(suffixes, func(s string) bool { return strings.HasSuffix(name, s) })
	}
}

var fakeNodeSelector = cluster.FakeNodeLabel + "=true"

// trackedKinds in deletion order: namespaced objects and nodes first, namespaces last (deleting a
// namespace takes everything in it, so what was in a pre-existing istio-system is listed too).
var trackedKinds = []tracked{
	{gvr: leasesGVR, namespace: workload.NodeLeaseNamespace, selector: fakeNodeSelector, match: all},
	{gvr: nodesGVR, selector: fakeNodeSelector, match: all},
	{gvr: secretsGVR, namespace: mesh.SystemNamespace, match: func(n string) bool {
		return n == "cacerts" || strings.HasPrefix(n, mesh.RemoteSecretName(""))
	}},
	{gvr: saGVR, namespace: mesh.SystemNamespace, match: prefixed("istio-reader")},
	{gvr: crbGVR, match: prefixed("istio-reader")},
	{gvr: crGVR, match: prefixed("istio-reader")},
	{gvr: crdGVR, match: suffixed(".istio.io", ".gateway.networking.k8s.io", ".gateway.networking.x-k8s.io")},
	{gvr: namespacesGVR, match: func(n string) bool {
		return n == mesh.SystemNamespace || n == workload.ProbeNamespace || strings.HasPrefix(n, "scale-")
	}},
}

type objectKey struct {
	gvr             schema.GroupVersionResource
	namespace, name string
}

func (k objectKey) String() string {
	if k.namespace == "" {
		return k.gvr.Resource + " " + k.name
	}
	return k.gvr.Resource + " " + k.namespace + "/" + k.name
}

// inventory is the UIDs of the tracked objects that existed when the run connected.
type inventory struct{ uids map[objectKey]types.UID }

func list(ctx context.Context, c *cluster.Cluster) (map[objectKey]types.UID, error) {
	out := map[objectKey]types.UID{}
	for _, t := range trackedKinds {
		l, err := c.Dynamic.Resource(t.gvr).Namespace(t.namespace).List(ctx, metav1.ListOptions{LabelSelector: t.selector})
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", t.gvr.Resource, err)
		}
		for _, o := range l.Items {
			if t.match(o.GetName()) {
				out[objectKey{t.gvr, t.namespace, o.GetName()}] = o.GetUID()
			}
		}
	}
	return out, nil
}

func takeInventory(ctx context.Context, c *cluster.Cluster) (*inventory, error) {
	uids, err := list(ctx, c)
	if err != nil {
		return nil, err
	}
	return &inventory{uids: uids}, nil
}

// created lists the tracked objects now present that were not there (with that UID) before, in
// deletion order.
func created(ctx context.Context, c *cluster.Cluster, before *inventory) ([]objectKey, map[objectKey]types.UID, error) {
	now, err := list(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	var keys []objectKey
	for _, t := range trackedKinds {
		for k, uid := range now {
			if k.gvr == t.gvr && before.uids[k] != uid {
				keys = append(keys, k)
			}
		}
	}
	return keys, now, nil
}

// removeCreated deletes what the run created among the tracked objects (each only with the UID
// it has now, so a concurrent replacement is not touched) and waits until it is gone.
func removeCreated(ctx context.Context, c *cluster.Cluster, before *inventory, log io.Writer) error {
	if before == nil {
		return nil
	}
	keys, uids, err := created(ctx, c, before)
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	fmt.Fprintf(log, "ambientmc: %s: deleting %d objects the run created (namespaces, fake nodes, leases, secrets, CRDs)\n", c.Name, len(keys))
	var errs []error
	if err := removeFakeNodePods(ctx, c, keys); err != nil {
		errs = append(errs, err)
	}
	bg := metav1.DeletePropagationBackground
	for _, k := range keys {
		uid := uids[k]
		err := c.Dynamic.Resource(k.gvr).Namespace(k.namespace).Delete(ctx, k.name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &bg,
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("deleting %s: %w", k, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// Namespaces on a real cluster take a while (their controller empties them first).
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var left []string
	lastLog := time.Now()
	err = wait.PollUntilContextCancel(wctx, time.Second, true, func(ctx context.Context) (bool, error) {
		left = left[:0]
		for _, k := range keys {
			o, err := c.Dynamic.Resource(k.gvr).Namespace(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
			if err == nil && o.GetUID() == uids[k] {
				left = append(left, k.String())
			}
		}
		if len(left) > 0 && time.Since(lastLog) > 15*time.Second {
			lastLog = time.Now()
			fmt.Fprintf(log, "ambientmc: %s: waiting for %d objects to go (e.g. %s)\n", c.Name, len(left), left[0])
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%d objects still present after deletion: %s: %w", len(left), strings.Join(left, ", "), err)
	}
	return nil
}

// removeFakeNodePods deletes at once (grace 0) the pods on fake nodes in the namespaces among keys.
// No kubelet confirms their graceful stop, so the namespace controller's deletion would leave them
// terminating until the pod garbage collector takes them as orphans, 40 s after their node is
// gone: measured, that made Destroy take a minute instead of seconds. kwok deletes its pods the
// same way. Pods on real nodes are left to their kubelets.
func removeFakeNodePods(ctx context.Context, c *cluster.Cluster, keys []objectKey) error {
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: fakeNodeSelector})
	if err != nil {
		return fmt.Errorf("listing fake nodes: %w", err)
	}
	if len(nodes.Items) == 0 {
		return nil
	}
	fake := map[string]bool{}
	for _, n := range nodes.Items {
		fake[n.Name] = true
	}
	var errs []error
	for _, k := range keys {
		if k.gvr != namespacesGVR {
			continue
		}
		pods, err := c.Client.CoreV1().Pods(k.name).List(ctx, metav1.ListOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("listing pods in %s: %w", k.name, err))
			continue
		}
		for _, pod := range pods.Items {
			if !fake[pod.Spec.NodeName] {
				continue
			}
			err := c.Client.CoreV1().Pods(k.name).Delete(ctx, pod.Name, metav1.DeleteOptions{
				GracePeriodSeconds: new(int64(0)), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				errs = append(errs, fmt.Errorf("deleting pod %s/%s: %w", k.name, pod.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}
