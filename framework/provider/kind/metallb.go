package kind

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/cluster"
)

// metallbManifest is MetalLB's install manifest as the pinned Istio module ships it (images
// registry.istio.io/testing/metallb/{controller,speaker}); it is read from the module cache at run
// time, never copied into this repository.
const metallbManifest = "common/scripts/metallb-native.yaml"

// MetalLBManifest returns the path of metallb-native.yaml in the pinned istio.io/istio module.
func MetalLBManifest(ctx context.Context) (string, error) {
	root, err := bins.SourceRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", "istio.io/istio")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating istio.io/istio (go mod download in %s): %w: %s", root, err, strings.TrimSpace(stderr.String()))
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		return "", fmt.Errorf("locating istio.io/istio: %v %s", err, info.Error)
	}
	path := filepath.Join(info.Dir, metallbManifest)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("MetalLB manifest: %w (the pinned istio.io/istio module should ship %s)", err, metallbManifest)
	}
	return path, nil
}

// decodeObjects reads a multi-document YAML file into objects, skipping empty documents.
func decodeObjects(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(f, 64*1024)
	for {
		obj := &unstructured.Unstructured{}
		if err := d.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decoding %s: %w", path, err)
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

// InstallMetalLB installs MetalLB from manifest into c, waits for its controller and speaker, and
// gives it pool (retrying while MetalLB's webhook comes up).
func InstallMetalLB(ctx context.Context, c *cluster.Cluster, manifest string, pool netip.Prefix, timeout time.Duration) error {
	objs, err := decodeObjects(manifest)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Client.Discovery()))
	for _, o := range objs {
		if err := apply(ctx, c, mapper, o); err != nil {
			return fmt.Errorf("cluster %s: MetalLB: %w", c.Name, err)
		}
	}
	mapper.Reset()
	err = wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := c.Client.AppsV1().Deployments(MetalLBNamespace).Get(ctx, "controller", metav1.GetOptions{})
		if err != nil || d.Status.AvailableReplicas < 1 {
			return false, nil
		}
		ds, err := c.Client.AppsV1().DaemonSets(MetalLBNamespace).Get(ctx, "speaker", metav1.GetOptions{})
		return err == nil && ds.Status.DesiredNumberScheduled > 0 && ds.Status.NumberReady == ds.Status.DesiredNumberScheduled, nil
	})
	if err != nil {
		return fmt.Errorf("cluster %s: MetalLB controller and speaker not ready within %s (kubectl -n %s get pods)", c.Name, timeout, MetalLBNamespace)
	}
	var last error
	err = wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		mapper.Reset()
		for _, o := range MetalLBObjects(pool) {
			if last = apply(ctx, c, mapper, o); last != nil {
				return false, nil // the webhook answers only once the controller serves it
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("cluster %s: MetalLB pool %s: %v", c.Name, pool, last)
	}
	return nil
}

// apply server-side applies one object (field manager ambientmc, conflicts forced).
func apply(ctx context.Context, c *cluster.Cluster, mapper meta.RESTMapper, o *unstructured.Unstructured) error {
	gvk := o.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
	}
	data, err := json.Marshal(o.Object)
	if err != nil {
		return err
	}
	force := true
	r := c.Dynamic.Resource(m.Resource)
	opts := metav1.PatchOptions{FieldManager: "ambientmc", Force: &force}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		_, err = r.Namespace(o.GetNamespace()).Patch(ctx, o.GetName(), types.ApplyPatchType, data, opts)
	} else {
		_, err = r.Patch(ctx, o.GetName(), types.ApplyPatchType, data, opts)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
	}
	if o.GetKind() == "CustomResourceDefinition" {
		return waitEstablished(ctx, c, o.GetName())
	}
	return nil
}

func waitEstablished(ctx context.Context, c *cluster.Cluster, name string) error {
	crds := c.Dynamic.Resource(crdGVR)
	return wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		u, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, cond := range conds {
			if m, ok := cond.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}
