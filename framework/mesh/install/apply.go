package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/kube/apply"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/pki"
)

// FieldManager owns every field Apply sets.
const FieldManager = apply.FieldManager

const (
	defaultTimeout = 5 * time.Minute
	// crdTimeout bounds the wait for CRDs to be served, which Apply does even without Wait:
	// later components hold objects of those kinds.
	crdTimeout = 2 * time.Minute
	// teardownTimeout bounds the wait for deleted objects to be gone when ctx has no deadline.
	teardownTimeout = 5 * time.Minute
)

// ApplyOptions control Apply.
type ApplyOptions struct {
	// Wait makes Apply wait for each component to be ready before those that depend on it start.
	Wait bool
	// Timeout bounds each component's readiness wait; 0 means 5 minutes.
	Timeout time.Duration
	// Log receives one progress line per component; nil discards them.
	Log io.Writer
}

// Object names one object Apply created.
type Object struct {
	Component string
	GVR       schema.GroupVersionResource
	Kind      string
	Namespace string
	Name      string
	UID       types.UID
}

func (o Object) String() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// Installed is what Apply created in one cluster; Teardown deletes exactly that.
type Installed struct {
	Cluster string
	// Created lists the objects Apply created, in apply order. Objects that existed before
	// Apply (matched by UID) are not listed: Apply updated them, and Teardown leaves them.
	Created []Object

	dynamic dynamic.Interface
	log     io.Writer
}

// dependsOn names the components each one waits for, as Istio's installer orders them
// (operator/pkg/install/install.go componentDependencies: base before istiod and istio-cni,
// istio-cni before ztunnel), and ours around them: the Gateway API CRDs before base, the east-west
// gateway after istiod (istiod's gateway controller deploys it), the probes after the data plane.
// A component not named here waits for every component before it.
var dependsOn = map[string][]string{
	ComponentBase:            {ComponentGatewayAPICRDs},
	ComponentIstiod:          {ComponentBase},
	ComponentCNI:             {ComponentBase},
	ComponentZtunnel:         {ComponentCNI},
	ComponentEastWestGateway: {ComponentIstiod},
	ComponentProbes:          {ComponentZtunnel, ComponentEastWestGateway},
}

// dependencies are the indices of the components of m that component i waits for; one applied
// by an earlier Apply is not in m, so nothing waits for it.
func (m *Manifests) dependencies(i int) []int {
	names, known := dependsOn[m.Components[i].Name]
	if !known {
		deps := make([]int, i)
		for k := range deps {
			deps[k] = k
		}
		return deps
	}
	var deps []int
	for k, comp := range m.Components {
		if slices.Contains(names, comp.Name) {
			deps = append(deps, k)
		}
	}
	return deps
}

// Apply server-side applies every component of m to c (field manager "ambientmc", conflicts
// forced) in the order Istio's installer keeps (dependsOn): a component starts once the ones it
// depends on are applied (and, with o.Wait, ready), so istiod and istio-cni install at the same
// time. After a component with CRDs it waits until they are served; with o.Wait it also waits
// for the component's readiness (see ready.go). A component that fails stops only those that
// depend on it; the error names every component that failed. On error the returned Installed
// still lists what was created, so the caller can Teardown.
func Apply(ctx context.Context, c *cluster.Cluster, m *Manifests, o ApplyOptions) (*Installed, error) {
	if m.Cluster != c.Name {
		return nil, fmt.Errorf("install: manifests rendered for cluster %s cannot be applied to cluster %s", m.Cluster, c.Name)
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultTimeout
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	o.Log = &lockedWriter{w: o.Log} // components log as they finish, concurrently
	type outcome struct {
		created []Object
		err     error
		applied bool // the component ran to the end without error
	}
	outcomes := make([]outcome, len(m.Components))
	done := make([]chan struct{}, len(m.Components))
	for i := range done {
		done[i] = make(chan struct{})
	}
	var wg sync.WaitGroup
	for i := range m.Components {
		wg.Go(func() {
			defer close(done[i])
			for _, d := range m.dependencies(i) {
				<-done[d]
				if !outcomes[d].applied {
					return // the failed dependency's error says why
				}
			}
			created, err := applyComponent(ctx, c, m.Components[i], o)
			outcomes[i] = outcome{created: created, err: err, applied: err == nil}
		})
	}
	wg.Wait()
	inst := &Installed{Cluster: c.Name, dynamic: c.Dynamic, log: o.Log}
	var errs []error
	for _, out := range outcomes { // in m's order, so Teardown deletes in reverse of it
		inst.Created = append(inst.Created, out.created...)
		if out.err != nil {
			errs = append(errs, out.err)
		}
	}
	return inst, errors.Join(errs...)
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// applyComponent applies one component's objects, waits for its CRDs to be served and, with
// o.Wait, for it to be ready; it returns the objects it created, also on error.
func applyComponent(ctx context.Context, c *cluster.Cluster, comp Component, o ApplyOptions) ([]Object, error) {
	start := time.Now()
	// An Applier is not safe for concurrent use, and components apply concurrently.
	a := apply.New(c.Dynamic, c.Client.Discovery())
	var created []Object
	for _, obj := range comp.Objects {
		ref, isNew, err := applyObject(ctx, a, obj)
		if err != nil {
			return created, fmt.Errorf("install: cluster %s: component %s: %w", c.Name, comp.Name, err)
		}
		if isNew {
			ref.Component = comp.Name
			created = append(created, ref)
		}
	}
	applied := time.Since(start)
	if pending, err := a.WaitEstablished(ctx, crdTimeout); err != nil {
		return created, fmt.Errorf("install: cluster %s: component %s: %d CRDs not established after %s (e.g. %s): %w",
			c.Name, comp.Name, len(pending), crdTimeout, pending[0], err)
	}
	if o.Wait {
		if err := waitReady(ctx, c, comp, o.Timeout); err != nil {
			return created, err
		}
	}
	fmt.Fprintf(o.Log, "ambientmc: %s: install: %s: %d objects applied (%d created) in %.1fs, done after %.1fs\n",
		c.Name, comp.Name, len(comp.Objects), len(created), applied.Seconds(), time.Since(start).Seconds())
	return created, nil
}

// applyObject server-side applies obj and reports whether it did not exist before.
func applyObject(ctx context.Context, a *apply.Applier, obj *unstructured.Unstructured) (Object, bool, error) {
	gvk := obj.GroupVersionKind()
	ref := Object{Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	mapping, err := a.Mapping(obj)
	if err != nil {
		return ref, false, fmt.Errorf("%s: the API server does not serve %s: %w", ref, gvk, err)
	}
	ref.GVR = mapping.Resource
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace && ref.Namespace == "" {
		return ref, false, fmt.Errorf("%s: namespaced kind rendered without a namespace", ref)
	}
	before, err := a.Client(mapping, ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		before = nil
	case err != nil:
		return ref, false, fmt.Errorf("%s: reading it before applying: %w", ref, err)
	}
	if err := keepsRoot(before, obj); err != nil {
		return ref, false, err
	}
	after, err := a.Apply(ctx, obj)
	if err != nil {
		return ref, false, fmt.Errorf("server-side apply of %s: %w", ref, err)
	}
	ref.UID = after.GetUID()
	return ref, before == nil || before.GetUID() != after.GetUID(), nil
}

// keepsRoot refuses to replace an existing cacerts Secret that holds another root CA: the istiod
// and workloads of that cluster trust that root, and swapping it under them breaks their mTLS.
func keepsRoot(before, obj *unstructured.Unstructured) error {
	if before == nil || obj.GetKind() != "Secret" || obj.GetNamespace() != mesh.SystemNamespace || obj.GetName() != pki.CACertsSecret {
		return nil
	}
	had, _, _ := unstructured.NestedString(before.Object, "data", pki.RootCertFile)
	want, _, _ := unstructured.NestedString(obj.Object, "data", pki.RootCertFile)
	if had == want {
		return nil
	}
	return fmt.Errorf("%s/%s already exists with another root CA (%s differs): refusing to replace the CA that cluster trusts; "+
		"if nothing uses it, delete it (kubectl -n %s delete secret %s), else render with that cluster's own intermediate",
		mesh.SystemNamespace, pki.CACertsSecret, pki.RootCertFile, mesh.SystemNamespace, pki.CACertsSecret)
}

func resource(client dynamic.Interface, o Object) dynamic.ResourceInterface {
	if o.Namespace == "" {
		return client.Resource(o.GVR)
	}
	return client.Resource(o.GVR).Namespace(o.Namespace)
}

// Teardown deletes what Apply created, in reverse order, each only if it still has the UID Apply
// saw, then waits until all of it is gone (bounded by ctx, or 5 minutes without a deadline).
// Objects that existed before Apply are never deleted.
func (i *Installed) Teardown(ctx context.Context) error {
	if i == nil {
		return nil
	}
	var errs []error
	bg := metav1.DeletePropagationBackground // foreground would leave a finalizer only a garbage collector removes
	for k := len(i.Created) - 1; k >= 0; k-- {
		o := i.Created[k]
		err := resource(i.dynamic, o).Delete(ctx, o.Name, metav1.DeleteOptions{
			Preconditions:     &metav1.Preconditions{UID: &o.UID},
			PropagationPolicy: &bg,
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) { // conflict: someone else's object by now
			errs = append(errs, fmt.Errorf("deleting %s: %w", o, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("install: cluster %s: teardown: %w", i.Cluster, errors.Join(errs...))
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, teardownTimeout)
		defer cancel()
	}
	var left []string
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		left = left[:0]
		for _, o := range i.Created {
			got, err := resource(i.dynamic, o).Get(ctx, o.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || err == nil && got.GetUID() != o.UID {
				continue
			}
			left = append(left, o.String())
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("install: cluster %s: teardown: %d objects still present: %s: %w", i.Cluster, len(left), strings.Join(left, ", "), err)
	}
	fmt.Fprintf(i.log, "ambientmc: %s: install: %d created objects deleted\n", i.Cluster, len(i.Created))
	return nil
}
