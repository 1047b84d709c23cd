// Package apply server-side applies objects to one cluster and waits until the
// CustomResourceDefinitions among them are Established: the one way the framework installs the
// mesh's CRDs (mesh/crds), a rendered Istio install (mesh/install) and MetalLB (provider/kind).
// Each caller words its own errors; this package returns the API server's.
package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// FieldManager owns every field the framework applies; conflicts with other managers are
// forced, as Istio's installer does.
const FieldManager = "ambientmc"

// CRDs is the resource of CustomResourceDefinitions.
var CRDs = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

var crdKind = schema.GroupKind{Group: CRDs.Group, Kind: "CustomResourceDefinition"}

// pollInterval is how often WaitEstablished reads the CRDs it waits for.
const pollInterval = 250 * time.Millisecond

// ErrNoDiscovery is returned for an object of any kind but a CRD by an Applier made without a
// discovery client.
var ErrNoDiscovery = errors.New("apply: no discovery client to resolve the kind")

// Applier applies objects to one cluster and remembers the CRDs among them until they are
// Established. It is not safe for concurrent use.
type Applier struct {
	client dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper // nil: only CRDs resolve
	// pending are the CRDs applied or expected and not yet seen Established.
	pending map[string]bool
}

// New returns an Applier over client that resolves kinds through disc; with a nil disc it applies
// CRDs only (whose resource it knows), and asks the API server nothing until then.
func New(client dynamic.Interface, disc discovery.DiscoveryInterface) *Applier {
	a := &Applier{client: client, pending: map[string]bool{}}
	if disc != nil {
		a.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	}
	return a
}

// Mapping is obj's kind as the API server serves it. A kind discovery does not know is looked up
// once more after a refresh: a CRD established since may serve it now.
func (a *Applier) Mapping(obj *unstructured.Unstructured) (*meta.RESTMapping, error) {
	gvk := obj.GroupVersionKind()
	if gvk.GroupKind() == crdKind && gvk.Version == CRDs.Version {
		return &meta.RESTMapping{Resource: CRDs, GroupVersionKind: gvk, Scope: meta.RESTScopeRoot}, nil
	}
	if a.mapper == nil {
		return nil, fmt.Errorf("%w %s", ErrNoDiscovery, gvk)
	}
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		a.mapper.Reset()
		m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	return m, err
}

// Client is the client of m's resource in namespace (cluster-wide for a cluster-scoped kind,
// whatever namespace says).
func (a *Applier) Client(m *meta.RESTMapping, namespace string) dynamic.ResourceInterface {
	r := a.client.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return r.Namespace(namespace)
	}
	return r
}

// Apply server-side applies obj (field manager FieldManager, conflicts forced) and returns what
// the API server stored. A CRD that is not Established in that answer is waited for by the next
// WaitEstablished.
func (a *Applier) Apply(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	m, err := a.Mapping(obj)
	if err != nil {
		return nil, err
	}
	got, err := a.Client(m, obj.GetNamespace()).Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if err != nil {
		return nil, err
	}
	if m.Resource == CRDs {
		a.Expect(got)
	}
	return got, nil
}

// Expect makes the next WaitEstablished wait for crd, a CRD stored some other way (created, or
// found in the cluster), unless crd is Established already.
func (a *Applier) Expect(crd *unstructured.Unstructured) {
	if !Established(crd) {
		a.pending[crd.GetName()] = true
	}
}

// WaitEstablished waits until every CRD applied or expected since the last wait is Established,
// at most timeout (0: as long as ctx allows), reading only those not yet seen Established: a list
// of all CRDs would move megabytes per poll. Once they are, discovery is refreshed so that their
// kinds resolve. On failure it returns the names still pending, sorted, with the wait's error.
func (a *Applier) WaitEstablished(ctx context.Context, timeout time.Duration) (pending []string, err error) {
	if len(a.pending) == 0 {
		return nil, nil
	}
	check := func(ctx context.Context) (bool, error) {
		for name := range a.pending {
			got, err := a.client.Resource(CRDs).Get(ctx, name, metav1.GetOptions{})
			if err == nil && Established(got) {
				delete(a.pending, name)
			}
		}
		return len(a.pending) == 0, nil
	}
	if timeout > 0 {
		err = wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, check)
	} else {
		err = wait.PollUntilContextCancel(ctx, pollInterval, true, check)
	}
	if err != nil {
		for name := range a.pending {
			pending = append(pending, name)
		}
		slices.Sort(pending)
		return pending, err
	}
	if a.mapper != nil {
		a.mapper.Reset() // the new kinds are served now
	}
	return nil, nil
}

// Established reports whether crd's Established condition is True.
func Established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
