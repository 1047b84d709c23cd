// Package crds installs the Istio and Gateway API CRDs from the pinned modules' own files, so
// they are never copied into this repository and always match the istiod that is built.
package crds

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"istio.io/istio/manifests"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/ambientmc/ambientmc/framework/gomod"
	"github.com/ambientmc/ambientmc/framework/kube/apply"
)

// istioCRDs is the file of the istio/base chart that holds every Istio CRD.
const istioCRDs = "charts/base/files/crd-all.gen.yaml"

// gatewayAPIModule has no Go package embedding its CRDs, so they are read from the module cache.
const gatewayAPIModule = "sigs.k8s.io/gateway-api"

// Set is a decoded list of CRDs.
type Set []*unstructured.Unstructured

// Names returns the CRD names in order.
func (s Set) Names() []string {
	out := make([]string, len(s))
	for i, o := range s {
		out[i] = o.GetName()
	}
	return out
}

// servedWhereNoIstiod are the CRDs an istiod reads from a cluster it does not run in: its ambient
// view of another cluster holds Gateways among built-in kinds (istio.io/istio
// pkg/kube/multicluster/cluster.go), and its kube registry for that cluster keeps a WorkloadEntry
// store there (pilot/pkg/serviceregistry/kube/controller/multicluster.go, cross-cluster
// WorkloadEntries, on by default).
var servedWhereNoIstiod = []string{"gateways.gateway.networking.k8s.io", "workloadentries.networking.istio.io"}

// ServedWhereNoIstiod names the CRDs a cluster serves where no istiod runs.
func ServedWhereNoIstiod() []string { return slices.Clone(servedWhereNoIstiod) }

// WhereNoIstiod returns the CRDs of s for a cluster where no istiod runs: every one is there, as
// istiod's CRD watcher sees them in any cluster, but only those it reads are served; the others
// keep their names, labels and annotations and lose their schemas, so the API server builds no
// storage, watch cache or OpenAPI for them.
func (s Set) WhereNoIstiod() Set {
	out := make(Set, len(s))
	for i, o := range s {
		if slices.Contains(servedWhereNoIstiod, o.GetName()) {
			out[i] = o
			continue
		}
		out[i] = unserved(o)
	}
	return out
}

// unserved is a copy of crd with every version unserved and its schema the smallest one allowed.
func unserved(crd *unstructured.Unstructured) *unstructured.Unstructured {
	c := crd.DeepCopy()
	spec, _ := c.Object["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	for _, v := range versions {
		if m, ok := v.(map[string]any); ok {
			m["served"] = false
			m["schema"] = map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
			delete(m, "subresources")
			delete(m, "additionalPrinterColumns")
			delete(m, "selectableFields")
		}
	}
	delete(spec, "conversion")
	return c
}

// isServed says whether any version of crd is served.
func isServed(crd *unstructured.Unstructured) bool {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		if m, ok := v.(map[string]any); ok && m["served"] == true {
			return true
		}
	}
	return false
}

// Load reads the Istio CRDs (embedded in istio.io/istio/manifests) and the Gateway API
// experimental-channel CRDs (from the module that istio.io/istio pins). srcRoot is the module
// root whose go.mod decides the Gateway API version.
func Load(ctx context.Context, srcRoot string) (Set, error) {
	return LoadFrom(ctx, srcRoot, "")
}

// LoadFrom is Load for the istiod under test: with istioDir (an istio.io/istio module directory,
// bins.IstiodBuild.SourceDir) the Istio CRDs come from that version's own crd-all.gen.yaml and the
// Gateway API CRDs from the version its go.mod pins. An empty istioDir is Load.
func LoadFrom(ctx context.Context, srcRoot, istioDir string) (Set, error) {
	var istio []byte
	var err error
	source := "istio.io/istio/manifests/" + istioCRDs
	if istioDir == "" {
		istio, err = fs.ReadFile(manifests.FS, istioCRDs)
	} else {
		source = filepath.Join(istioDir, "manifests", istioCRDs)
		istio, err = os.ReadFile(source)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", source, err)
	}
	set, err := decode(bytes.NewReader(istio), source)
	if err != nil {
		return nil, err
	}
	gw, err := LoadGatewayAPIFrom(ctx, srcRoot, istioDir)
	if err != nil {
		return nil, err
	}
	return append(set, gw...), nil
}

// LoadGatewayAPI reads only the Gateway API experimental-channel CRDs of the version srcRoot's
// go.mod selects (an Istio install renders the Istio CRDs itself, in its base chart).
func LoadGatewayAPI(ctx context.Context, srcRoot string) (Set, error) {
	return LoadGatewayAPIFrom(ctx, srcRoot, "")
}

// LoadGatewayAPIFrom reads the Gateway API CRDs of the version the Istio source in istioDir
// requires ("": the version srcRoot's go.mod selects).
func LoadGatewayAPIFrom(ctx context.Context, srcRoot, istioDir string) (Set, error) {
	var set Set
	gatewayAPI := gatewayAPIModule
	if istioDir != "" {
		v, err := gomod.Required(filepath.Join(istioDir, "go.mod"), gatewayAPIModule)
		if err != nil {
			return nil, err
		}
		gatewayAPI += "@" + v
	}
	dir, err := moduleDir(ctx, srcRoot, gatewayAPI)
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "config", "crd", "experimental", "gateway.networking.*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no Gateway API CRDs under %s/config/crd/experimental", dir)
	}
	sort.Strings(files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		more, err := decode(bytes.NewReader(data), f)
		if err != nil {
			return nil, err
		}
		set = append(set, more...)
	}
	return set, nil
}

// decode keeps the CustomResourceDefinitions of a multi-document YAML stream (the Gateway API
// directory also holds a ValidatingAdmissionPolicy, which the mesh does not need).
func decode(r io.Reader, source string) (Set, error) {
	objs, err := apply.Decode(r, source)
	if err != nil {
		return nil, err
	}
	var out Set
	for _, obj := range objs {
		if obj.GetKind() == "CustomResourceDefinition" {
			out = append(out, obj)
		}
	}
	return out, nil
}

// moduleDir downloads (if needed) the version of module that srcRoot's go.mod selects and returns
// its directory in the module cache.
func moduleDir(ctx context.Context, srcRoot, module string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module)
	cmd.Dir = srcRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating %s (go mod download in %s): %w: %s", module, srcRoot, err, strings.TrimSpace(stderr.String()))
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", fmt.Errorf("locating %s: %w", module, err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("locating %s: %s", module, info.Error)
	}
	return info.Dir, nil
}

// Apply installs every CRD, waits until all are Established and checks that the API server serves
// each one. CRDs that are already there with the same content (a provider may store them before
// the API server starts) are left alone. Missing ones get a plain create: server-side apply of
// megabyte-sized CRD schemas costs the API server far more CPU, which adds up when ten API servers
// share two cores. CRDs with other content are server-side applied.
func Apply(ctx context.Context, client dynamic.Interface, set Set) error {
	api := client.Resource(apply.CRDs)
	have, err := api.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing CRDs: %w", err)
	}
	existing := map[string]*unstructured.Unstructured{}
	for i := range have.Items {
		existing[have.Items[i].GetName()] = &have.Items[i]
	}
	a := apply.New(client, nil)
	for _, src := range set {
		crd, err := labelled(src)
		if err != nil {
			return err
		}
		got := existing[crd.GetName()]
		switch {
		case got == nil:
			got, err = api.Create(ctx, crd, metav1.CreateOptions{FieldManager: apply.FieldManager})
		case got.GetLabels()[contentLabel] != crd.GetLabels()[contentLabel]:
			got, err = a.Apply(ctx, crd)
		}
		if err != nil {
			return fmt.Errorf("applying CRD %s: %w", crd.GetName(), err)
		}
		a.Expect(got)
	}
	if pending, err := a.WaitEstablished(ctx, 2*time.Minute); err != nil {
		return fmt.Errorf("CRDs not established: %s: %w", strings.Join(pending, ", "), err)
	}
	return served(ctx, client, set)
}

// served lists each served CRD's storage version (at most one object): an Established condition
// is only what is stored; this proves the API server serves the resource.
func served(ctx context.Context, client dynamic.Interface, set Set) error {
	for _, crd := range set {
		if !isServed(crd) {
			continue
		}
		gvr, err := storageGVR(crd)
		if err != nil {
			return err
		}
		if _, err := client.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			return fmt.Errorf("CRD %s is Established but %s is not served: %w", crd.GetName(), gvr, err)
		}
	}
	return nil
}

// storageGVR is the resource of crd's storage version.
func storageGVR(crd *unstructured.Unstructured) (schema.GroupVersionResource, error) {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if m["storage"] == true {
			name, _ := m["name"].(string)
			return schema.GroupVersionResource{Group: group, Version: name, Resource: plural}, nil
		}
	}
	return schema.GroupVersionResource{}, fmt.Errorf("CRD %s has no storage version", crd.GetName())
}

// contentLabel holds a hash of the CRD as loaded, so an existing CRD with the same content is
// recognised without comparing megabytes of defaulted schema.
const contentLabel = "ambientmc.io/crd-sha256"

// labelled returns a copy of crd carrying contentLabel.
func labelled(crd *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	raw, err := json.Marshal(crd.Object)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(raw)
	out := crd.DeepCopy()
	labels := out.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[contentLabel] = hex.EncodeToString(sum[:])[:32]
	out.SetLabels(labels)
	return out, nil
}
