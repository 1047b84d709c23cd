package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
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
	// Wait makes Apply wait for each component to be ready before the next one.
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

// Apply server-side applies every component of m to c in order (field manager "ambientmc",
// conflicts forced, as Istio's installer does). After a component with CRDs it waits until they
// are served; with o.Wait it also waits for each component's readiness (see ready.go). On error
// the returned Installed still lists what was created, so the caller can Teardown.
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
	inst := &Installed{Cluster: c.Name, dynamic: c.Dynamic, log: o.Log}
	a := apply.New(c.Dynamic, c.Client.Discovery())
	for _, comp := range m.Components {
		start := time.Now()
		created := len(inst.Created)
		for _, obj := range comp.Objects {
			ref, isNew, err := applyObject(ctx, a, obj)
			if err != nil {
				return inst, fmt.Errorf("install: cluster %s: component %s: %w", c.Name, comp.Name, err)
			}
			if isNew {
				ref.Component = comp.Name
				inst.Created = append(inst.Created, ref)
			}
		}
		applied := time.Since(start)
		if pending, err := a.WaitEstablished(ctx, crdTimeout); err != nil {
			return inst, fmt.Errorf("install: cluster %s: component %s: %d CRDs not established after %s (e.g. %s): %w",
				c.Name, comp.Name, len(pending), crdTimeout, pending[0], err)
		}
		if o.Wait {
			if err := waitReady(ctx, c, comp, o.Timeout); err != nil {
				return inst, err
			}
		}
		fmt.Fprintf(o.Log, "ambientmc: %s: install: %s: %d objects applied (%d created) in %.1fs, done after %.1fs\n",
			c.Name, comp.Name, len(comp.Objects), len(inst.Created)-created, applied.Seconds(), time.Since(start).Seconds())
	}
	return inst, nil
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
