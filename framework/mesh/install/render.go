// Package install renders Istio ambient multicluster for one real cluster (kind, kube) with Istio's
// own library over the charts embedded in the pinned istio.io/istio module, and server-side applies
// it in Istio's order, waiting for each component and removing exactly what it created.
package install

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"istio.io/istio/operator/pkg/component"
	"istio.io/istio/operator/pkg/render"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/mesh/crds"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/topology"
)

// FakeNodeLabel is the label (value "true") and taint key (effect NoSchedule) of the framework's
// fake nodes: ztunnel and istio-cni tolerate every taint, so they are kept off those nodes by
// node affinity instead.
const FakeNodeLabel = "ambientmc.io/fake-node"

// DefaultMeshID is the mesh ID when Options.MeshID is empty.
const DefaultMeshID = "mesh1"

// Component names, in the order Apply installs them.
const (
	ComponentGatewayAPICRDs  = "gateway-api-crds"
	ComponentBase            = "base"
	ComponentIstiod          = "istiod"
	ComponentCNI             = "cni"
	ComponentZtunnel         = "ztunnel"
	ComponentEastWestGateway = "eastwest-gateway"
	ComponentProbes          = "probes"
)

// istioComponents maps Istio's rendered component sets to ours. Istio installs Base first, then
// Pilot and CNI, then Ztunnel after CNI (operator/pkg/install/install.go componentDependencies).
var istioComponents = map[component.Name]string{
	component.BaseComponentName:    ComponentBase,
	component.PilotComponentName:   ComponentIstiod,
	component.CNIComponentName:     ComponentCNI,
	component.ZtunnelComponentName: ComponentZtunnel,
}

// Images chooses the Istio images. Hub and Tag are required: as a library Istio would silently
// default to registry.istio.io/testing:latest, and the module's pseudo-version cannot name a tag.
// Variant may be "" (the plain tag) or e.g. "distroless".
type Images struct {
	Hub, Tag, Variant string
	// PullPolicy is every Istio container's imagePullPolicy ("" leaves the charts' default).
	PullPolicy string
	// Build is the istio.io/istio version the images were built from, when this machine built
	// them (make images); "" for images from a registry.
	Build string
	// DataPlane is -istio.dataplane: with the images make images builds, "emulated" (the default,
	// "" too) runs their emulated ztunnel and gateway, "none" istiod alone.
	DataPlane string
}

// Options render one cluster's install.
type Options struct {
	// Cluster gives the Istio cluster ID (Name) and network (Network).
	Cluster topology.Cluster
	// MeshID defaults to DefaultMeshID.
	MeshID string
	Images Images
	// CACerts is the cluster's plugged-in CA, rendered as the istio-system/cacerts Secret.
	CACerts *pki.Intermediate
	// FakeNodeLabel defaults to the FakeNodeLabel const.
	FakeNodeLabel string
	// Probes, when set, adds the "probes" component (fortio echo servers and client).
	Probes *ProbeOptions
	// Platform is one of Istio's platform names (Platforms), or "" for none (withPlatform).
	Platform string
	// SharedHost sizes istiod's, ztunnel's and istio-cni's requests for clusters that share one
	// small host (kind): the charts' defaults with kind's control plane and CoreDNS ask 1.85 of the
	// 2 CPUs a node on a 2-core host reports, before any test pod. Requests only place pods; no
	// limit is set.
	SharedHost bool
}

// sharedHostRequests are the requests SharedHost sets, by values key.
var sharedHostRequests = map[string]map[string]any{
	"pilot":   {"cpu": "100m", "memory": "256Mi"},
	"ztunnel": {"cpu": "50m", "memory": "64Mi"},
	"cni":     {"cpu": "50m", "memory": "64Mi"},
}

// Component is one install step in Istio's order.
type Component struct {
	Name    string
	Objects []*unstructured.Unstructured
}

// Manifests is everything applied to one cluster, in order: "gateway-api-crds", "base",
// "istiod", "cni", "ztunnel", "eastwest-gateway" and, with Options.Probes, "probes".
type Manifests struct {
	Cluster    string
	Components []Component
}

// Component returns the named component, or nil.
func (m *Manifests) Component(name string) *Component {
	for i := range m.Components {
		if m.Components[i].Name == name {
			return &m.Components[i]
		}
	}
	return nil
}

// Render renders one cluster's install. It talks to no cluster.
func Render(o Options) (*Manifests, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	istio, err := renderIstio(o)
	if err != nil {
		return nil, err
	}
	gwAPI, err := gatewayAPICRDs()
	if err != nil {
		return nil, err
	}
	cacerts, err := toUnstructured(o.CACerts.CACertsSecret())
	if err != nil {
		return nil, err
	}
	base := append([]*unstructured.Unstructured{systemNamespace(o.Cluster.Network)}, istio[ComponentBase]...)
	base = append(base, cacerts)
	m := &Manifests{Cluster: o.Cluster.Name, Components: []Component{
		{Name: ComponentGatewayAPICRDs, Objects: gwAPI},
		{Name: ComponentBase, Objects: base},
		{Name: ComponentIstiod, Objects: istio[ComponentIstiod]},
		{Name: ComponentCNI, Objects: istio[ComponentCNI]},
		{Name: ComponentZtunnel, Objects: istio[ComponentZtunnel]},
		{Name: ComponentEastWestGateway, Objects: []*unstructured.Unstructured{mesh.EastWestGatewayObject(o.Cluster.Network)}},
	}}
	if o.Probes != nil {
		probes, err := probeObjects(o.Cluster.Name, *o.Probes)
		if err != nil {
			return nil, err
		}
		m.Components = append(m.Components, Component{Name: ComponentProbes, Objects: probes})
	}
	for i := range m.Components {
		sortByKind(m.Components[i].Objects)
	}
	return m, nil
}

func (o Options) withDefaults() (Options, error) {
	if o.Cluster.Name == "" {
		return o, fmt.Errorf("install: Options.Cluster.Name is empty: set the cluster's name (it becomes istiod's CLUSTER_ID)")
	}
	if o.Cluster.Network == "" {
		return o, fmt.Errorf("install: cluster %s: Options.Cluster.Network is empty: set the cluster's network (topology.Generate names them network-N)", o.Cluster.Name)
	}
	if o.Cluster.IsRemote() {
		return o, fmt.Errorf("install: cluster %s is a remote of %s: ambient multicluster is multi-primary only, so every cluster must be its own primary", o.Cluster.Name, o.Cluster.Primary)
	}
	if o.Images.Hub == "" {
		return o, fmt.Errorf("install: cluster %s: Images.Hub is empty: pass -istio.hub (e.g. -istio.hub=registry.istio.io/testing); there is no default", o.Cluster.Name)
	}
	if o.Images.Tag == "" {
		return o, fmt.Errorf("install: cluster %s: Images.Tag is empty: pass -istio.tag (the pinned module's pseudo-version cannot name an image tag)", o.Cluster.Name)
	}
	if o.CACerts == nil {
		return o, fmt.Errorf("install: cluster %s: Options.CACerts is nil: pass the cluster's intermediate CA (pki.Root.NewIntermediate)", o.Cluster.Name)
	}
	if o.CACerts.Cluster != o.Cluster.Name {
		return o, fmt.Errorf("install: cluster %s: Options.CACerts is the intermediate of cluster %q: pass this cluster's own intermediate", o.Cluster.Name, o.CACerts.Cluster)
	}
	if err := CheckPlatform(o.Platform); err != nil {
		return o, err
	}
	if o.Probes != nil {
		if err := o.Probes.validate(o.Cluster.Name); err != nil {
			return o, err
		}
	}
	if o.MeshID == "" {
		o.MeshID = DefaultMeshID
	}
	if o.FakeNodeLabel == "" {
		o.FakeNodeLabel = FakeNodeLabel
	}
	return o, nil
}

// operatorConfig is the IstioOperator that Render hands to Istio. It is a file rather than --set
// flags because the node affinity is a nested list that --set paths cannot express, and because
// --set would parse a tag like "1.28" as a number.
func operatorConfig(o Options) map[string]any {
	// ztunnel and istio-cni tolerate every taint (their chart defaults), so a taint alone does
	// not keep them off the fake nodes; both charts take an affinity value.
	awayFromFakeNodes := map[string]any{"nodeAffinity": map[string]any{
		"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{
			map[string]any{"matchExpressions": []any{map[string]any{"key": o.FakeNodeLabel, "operator": "DoesNotExist"}}},
		}},
	}}
	clusterName := map[string]any{"clusterName": o.Cluster.Name}
	spec := map[string]any{
		"profile": "ambient",
		"hub":     o.Images.Hub,
		"tag":     o.Images.Tag,
		"values": map[string]any{
			"global": map[string]any{
				"variant":      o.Images.Variant, // set even when empty: the ambient profile says distroless
				"meshID":       o.MeshID,
				"network":      o.Cluster.Network,
				"multiCluster": clusterName,
			},
			"pilot": map[string]any{"env": map[string]any{"AMBIENT_ENABLE_MULTI_NETWORK": "true"}},
			// Without its own clusterName, ztunnel's ISTIO_META_CLUSTER_ID silently says "Kubernetes".
			"ztunnel": map[string]any{"multiCluster": clusterName, "network": o.Cluster.Network, "affinity": awayFromFakeNodes},
			"cni":     map[string]any{"affinity": awayFromFakeNodes},
		},
	}
	values := spec["values"].(map[string]any)
	if o.Images.PullPolicy != "" {
		values["global"].(map[string]any)["imagePullPolicy"] = o.Images.PullPolicy
	}
	if o.SharedHost {
		for key, req := range sharedHostRequests {
			values[key].(map[string]any)["resources"] = map[string]any{"requests": req}
		}
	}
	withPlatform(spec, o.Platform)
	return map[string]any{"apiVersion": "install.istio.io/v1alpha1", "kind": "IstioOperator", "spec": spec}
}

// renderIstio runs Istio's own renderer and returns its objects by our component name.
func renderIstio(o Options) (map[string][]*unstructured.Unstructured, error) {
	iop, err := yaml.Marshal(operatorConfig(o))
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp("", "ambientmc-iop-*.yaml")
	if err != nil {
		return nil, fmt.Errorf("install: cluster %s: %w", o.Cluster.Name, err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(iop); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	sets, _, err := render.GenerateManifest([]string{f.Name()}, nil, false, nil, nil)
	if err != nil {
		if strings.Contains(err.Error(), "bad hub") {
			return nil, fmt.Errorf("-istio.hub=%s: Istio refuses it as an image repository (%v): use a lowercase registry path such as registry.istio.io/testing", o.Images.Hub, err)
		}
		return nil, fmt.Errorf("install: cluster %s: rendering Istio (hub %q, tag %q, variant %q): %w", o.Cluster.Name, o.Images.Hub, o.Images.Tag, o.Images.Variant, err)
	}
	out := map[string][]*unstructured.Unstructured{}
	for _, set := range sets {
		name, ok := istioComponents[set.Component]
		if !ok {
			if len(set.Manifests) > 0 {
				return nil, fmt.Errorf("install: cluster %s: Istio rendered component %s, which this install does not know how to apply", o.Cluster.Name, set.Component)
			}
			continue
		}
		for _, m := range set.Manifests {
			if m.GetKind() == "Namespace" && m.GetName() == mesh.SystemNamespace {
				continue // Render adds its own, with the network label
			}
			out[name] = append(out[name], m.Unstructured.DeepCopy())
		}
	}
	for _, name := range istioComponents {
		if len(out[name]) == 0 {
			return nil, fmt.Errorf("install: cluster %s: Istio rendered no objects for component %s", o.Cluster.Name, name)
		}
	}
	return out, nil
}

// Istio's render has no istio-system Namespace (its installer creates one on the side); the
// framework's carries the network label, which is how istiod learns its own network.
func systemNamespace(network string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Namespace",
		"metadata": map[string]any{
			"name":   mesh.SystemNamespace,
			"labels": map[string]any{mesh.NetworkLabel: network},
		},
	}}
}

var gatewayAPI struct {
	once sync.Once
	set  crds.Set
	err  error
}

// gatewayAPICRDs loads (once) the Gateway API CRDs of the version the pinned modules select.
func gatewayAPICRDs() ([]*unstructured.Unstructured, error) {
	gatewayAPI.once.Do(func() {
		root, err := bins.SourceRoot()
		if err != nil {
			gatewayAPI.err = err
			return
		}
		gatewayAPI.set, gatewayAPI.err = crds.LoadGatewayAPI(context.Background(), root)
	})
	if gatewayAPI.err != nil {
		return nil, fmt.Errorf("install: Gateway API CRDs: %w", gatewayAPI.err)
	}
	out := make([]*unstructured.Unstructured, len(gatewayAPI.set))
	for i, crd := range gatewayAPI.set {
		out[i] = crd.DeepCopy()
	}
	return out, nil
}

// toUnstructured converts a typed object, dropping the empty creationTimestamp and status a
// server-side apply must not send.
func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	return u, nil
}

// kindOrder puts what others reference first and webhooks last, so that a webhook cannot stand in
// the way of its own install; kinds not listed (custom resources) come after it. It follows Helm's
// InstallOrder, shortened to the kinds this install renders.
var kindOrder = []string{
	"Namespace", "ResourceQuota", "NetworkPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "ConfigMap",
	"CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service",
	"DaemonSet", "Deployment", "HorizontalPodAutoscaler", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
}

func kindRank(kind string) int {
	for i, k := range kindOrder {
		if k == kind {
			return i
		}
	}
	return len(kindOrder)
}

// sortByKind orders objects by kind, keeping the rendered order within a kind.
func sortByKind(objs []*unstructured.Unstructured) {
	sort.SliceStable(objs, func(i, j int) bool { return kindRank(objs[i].GetKind()) < kindRank(objs[j].GetKind()) })
}
