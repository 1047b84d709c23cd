package apply_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ambientmc/ambientmc/framework/kube/apply"
	"github.com/ambientmc/ambientmc/framework/provider/local/localtest"
)

// crd is a namespaced CRD of group apply.test with the given plural and kind.
func crd(plural, kind string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + ".apply.test"},
		"spec": map[string]any{
			"group": "apply.test", "scope": "Namespaced",
			"names": map[string]any{"plural": plural, "singular": plural[:len(plural)-1], "kind": kind},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object",
					"properties": map[string]any{"spec": map[string]any{"type": "object",
						"properties": map[string]any{"size": map[string]any{"type": "integer"}}}}}}}},
		},
	}}
}

func object(apiVersion, kind, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name}}}
	if namespace != "" {
		o.SetNamespace(namespace)
	}
	if spec != nil {
		o.Object["spec"] = spec
	}
	return o
}

func TestDecodeSkipsEmptyDocumentsAndNamesTheSource(t *testing.T) {
	manifest := "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n# only a comment\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: b}\n"
	objs, err := apply.Decode(strings.NewReader(manifest), "two.yaml")
	require.NoError(t, err)
	require.Len(t, objs, 2)
	assert.Equal(t, "ConfigMap", objs[0].GetKind())
	assert.Equal(t, "b", objs[1].GetName())

	_, err = apply.Decode(strings.NewReader("kind: [unclosed\n"), "broken.yaml")
	assert.ErrorContains(t, err, "decoding broken.yaml")
}

// On a real API server: a CRD and an object of its kind in one go (the kind resolves once the
// CRD is Established), objects of built-in kinds namespaced and not, owned by the framework's
// field manager; a CRD whose kind another CRD holds never becomes Established, and the wait
// names it.
func TestApplyAndWaitOnRealAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver")
	}
	_, cs := localtest.APIServers(t, 1)
	c := cs[0]
	ctx := context.Background()
	a := apply.New(c.Dynamic, c.Client.Discovery())

	widget := object("apply.test/v1", "Widget", "default", "w1", map[string]any{"size": int64(3)})
	_, err := a.Mapping(widget)
	require.True(t, meta.IsNoMatchError(err), "no CRD serves Widget yet: %v", err)

	got, err := a.Apply(ctx, crd("widgets", "Widget"))
	require.NoError(t, err)
	assert.False(t, apply.Established(got), "a CRD is never Established in its apply answer")
	pending, err := a.WaitEstablished(ctx, time.Minute)
	require.NoError(t, err)
	assert.Empty(t, pending)

	got, err = a.Apply(ctx, widget)
	require.NoError(t, err, "the kind resolves once its CRD is Established")
	size, _, _ := unstructured.NestedInt64(got.Object, "spec", "size")
	assert.Equal(t, int64(3), size)
	// A second apply with other content updates the same object, as the field manager's.
	widget.Object["spec"] = map[string]any{"size": int64(5)}
	again, err := a.Apply(ctx, widget)
	require.NoError(t, err)
	assert.Equal(t, got.GetUID(), again.GetUID())
	managers := []string{}
	for _, f := range again.GetManagedFields() {
		managers = append(managers, f.Manager+"/"+string(f.Operation))
	}
	assert.Equal(t, []string{apply.FieldManager + "/Apply"}, managers)

	// Built-in kinds: a cluster-scoped one and a namespaced one in it.
	_, err = a.Apply(ctx, object("v1", "Namespace", "", "apply-test", nil))
	require.NoError(t, err)
	cm := object("v1", "ConfigMap", "apply-test", "cm", nil)
	cm.Object["data"] = map[string]any{"k": "v"}
	_, err = a.Apply(ctx, cm)
	require.NoError(t, err)
	stored, err := c.Client.CoreV1().ConfigMaps("apply-test").Get(ctx, "cm", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "v", stored.Data["k"])

	// Nothing applied since the last wait: nothing to wait for.
	pending, err = a.WaitEstablished(ctx, time.Nanosecond)
	require.NoError(t, err)
	assert.Empty(t, pending)

	// gadgets claims kind Widget, which widgets holds: NamesAccepted=False, never Established.
	_, err = a.Apply(ctx, crd("gadgets", "Widget"))
	require.NoError(t, err)
	pending, err = a.WaitEstablished(ctx, 2*time.Second)
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	assert.Equal(t, []string{"gadgets.apply.test"}, pending)

	// An Established CRD found in the cluster is not waited for; one that is not, is.
	for _, tc := range []struct {
		name string
		want []string
	}{{"widgets.apply.test", nil}, {"gadgets.apply.test", []string{"gadgets.apply.test"}}} {
		a := apply.New(c.Dynamic, nil)
		found, err := c.Dynamic.Resource(apply.CRDs).Get(ctx, tc.name, metav1.GetOptions{})
		require.NoError(t, err)
		a.Expect(found)
		pending, _ := a.WaitEstablished(ctx, time.Second)
		assert.Equal(t, tc.want, pending, tc.name)
	}
}

// Without discovery an Applier resolves CRDs alone, and asks the API server nothing to do so.
func TestMappingWithoutDiscovery(t *testing.T) {
	a := apply.New(nil, nil)
	m, err := a.Mapping(crd("widgets", "Widget"))
	require.NoError(t, err)
	assert.Equal(t, apply.CRDs, m.Resource)
	assert.Equal(t, meta.RESTScopeNameRoot, m.Scope.Name())
	_, err = a.Mapping(object("v1", "ConfigMap", "default", "cm", nil))
	assert.ErrorIs(t, err, apply.ErrNoDiscovery)
}

func TestEstablished(t *testing.T) {
	cond := func(typ, status string) *unstructured.Unstructured {
		o := crd("widgets", "Widget")
		o.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": typ, "status": status}}}
		return o
	}
	assert.True(t, apply.Established(cond("Established", "True")))
	assert.False(t, apply.Established(cond("Established", "False")))
	assert.False(t, apply.Established(cond("NamesAccepted", "True")))
	assert.False(t, apply.Established(crd("widgets", "Widget")), "no status yet")
}
