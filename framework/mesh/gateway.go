package mesh

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/dataplane/hbone"
)

const (
	// EastWestGateway is the name (and so the service account and SPIFFE identity) of the
	// east-west gateway, as istio's samples/multicluster/gen-eastwest-gateway.sh names it.
	EastWestGateway = "istio-eastwestgateway"
	// EastWestGatewayClass is the GatewayClass istiod creates when AMBIENT_ENABLE_MULTI_NETWORK is on.
	EastWestGatewayClass = "istio-east-west"
	// HBONEPort is where the east-west gateway terminates the outer HBONE tunnel.
	HBONEPort = hbone.Port
)

var gatewayGVR = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"}

// EnsureEastWestGateway creates the cluster's ambient east-west Gateway and writes its address
// into status.addresses, standing in for the LoadBalancer the local provider does not have.
// istiod never writes addresses itself, so the value stays; the Gateway stays Programmed=False,
// which istiod ignores (notes/istio-embedded.md section 9).
func EnsureEastWestGateway(ctx context.Context, c *cluster.Cluster, address string) error {
	gw := EastWestGatewayObject(c.Network)
	api := c.Dynamic.Resource(gatewayGVR).Namespace(SystemNamespace)
	if _, err := api.Create(ctx, gw, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("cluster %s: creating the east-west gateway: %w", c.Name, err)
	}
	// A merge patch of the addresses alone: a running istiod writes the Gateway's conditions at
	// the same time, and an update of the whole status would conflict with it.
	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		"addresses": []any{map[string]any{"type": "IPAddress", "value": address}},
	}})
	if err != nil {
		return err
	}
	if _, err := api.Patch(ctx, EastWestGateway, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("cluster %s: writing the east-west gateway address %s: %w", c.Name, address, err)
	}
	return nil
}

// EastWestGatewayObject is the ambient east-west Gateway of a cluster on network, as istio's
// samples/multicluster/gen-eastwest-gateway.sh --ambient emits it: class istio-east-west, one
// HBONE listener on 15008 that terminates ISTIO_MUTUAL. Every provider installs this same object.
func EastWestGatewayObject(network string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1",
		"kind":       "Gateway",
		"metadata": map[string]any{
			"name":      EastWestGateway,
			"namespace": SystemNamespace,
			"labels":    map[string]any{NetworkLabel: network},
		},
		"spec": map[string]any{
			"gatewayClassName": EastWestGatewayClass,
			"listeners": []any{map[string]any{
				"name":     "mesh",
				"port":     int64(HBONEPort),
				"protocol": "HBONE",
				"tls": map[string]any{
					"mode":    "Terminate",
					"options": map[string]any{"gateway.istio.io/tls-terminate-mode": "ISTIO_MUTUAL"},
				},
			}},
		},
	}}
}
