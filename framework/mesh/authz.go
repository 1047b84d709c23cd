package mesh

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ambientmc/ambientmc/framework/cluster"
)

// AuthorizationPolicies is the resource Istio's security.istio.io/v1 AuthorizationPolicy lives in.
var AuthorizationPolicies = schema.GroupVersionResource{Group: "security.istio.io", Version: "v1", Resource: "authorizationpolicies"}

// Policy is an L4 AuthorizationPolicy: action (ALLOW or DENY) for the source principals given
// (trust-domain/ns/<ns>/sa/<sa>), on the pods of Namespace with label app=App (every pod of the
// namespace when App is empty).
type Policy struct {
	Namespace, Name, App, Action string
	Principals                   []string
}

// ApplyPolicy creates p in c and returns what deletes it.
func ApplyPolicy(ctx context.Context, c *cluster.Cluster, p Policy) (remove func(context.Context) error, err error) {
	principals := make([]any, len(p.Principals))
	for i, s := range p.Principals {
		principals[i] = s
	}
	spec := map[string]any{"action": p.Action, "rules": []any{map[string]any{"from": []any{
		map[string]any{"source": map[string]any{"principals": principals}}}}}}
	if p.App != "" {
		spec["selector"] = map[string]any{"matchLabels": map[string]any{"app": p.App}}
	}
	res := c.Dynamic.Resource(AuthorizationPolicies).Namespace(p.Namespace)
	_, err = res.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
		"metadata": map[string]any{"name": p.Name, "namespace": p.Namespace}, "spec": spec,
	}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: AuthorizationPolicy %s/%s: %w", c.Name, p.Namespace, p.Name, err)
	}
	return func(ctx context.Context) error {
		if err := res.Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("cluster %s: deleting AuthorizationPolicy %s/%s: %w", c.Name, p.Namespace, p.Name, err)
		}
		return nil
	}, nil
}
