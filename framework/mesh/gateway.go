package mesh

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

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

// EnsureEastWestGateway creates the cluster's ambient east-west Gateway and writes its address
// into status.addresses, standing in for the LoadBalancer the local provider does not have.
// istiod never writes addresses itself, so the value stays; the Gateway stays Programmed=False,
// which istiod ignores (notes/istio-embedded.md section 9).
func EnsureEastWestGateway(ctx context.Context, c *cluster.Cluster, address string) error {
	api := c.GatewayAPI.GatewayV1().Gateways(SystemNamespace)
	if _, err := api.Create(ctx, NewEastWestGateway(c.Network), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("cluster %s: creating the east-west gateway: %w", c.Name, err)
	}
	// A merge patch of the addresses alone: a running istiod writes the Gateway's conditions at
	// the same time, and an update of the whole status would conflict with it.
	ip := gatewayv1.IPAddressType
	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		"addresses": []gatewayv1.GatewayStatusAddress{{Type: &ip, Value: address}},
	}})
	if err != nil {
		return err
	}
	if _, err := api.Patch(ctx, EastWestGateway, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("cluster %s: writing the east-west gateway address %s: %w", c.Name, address, err)
	}
	return nil
}

// NewEastWestGateway is the ambient east-west Gateway of a cluster on network, as istio's
// samples/multicluster/gen-eastwest-gateway.sh --ambient emits it: class istio-east-west, one
// HBONE listener on 15008 that terminates ISTIO_MUTUAL. Every provider installs this same object.
func NewEastWestGateway(network string) *gatewayv1.Gateway {
	terminate := gatewayv1.TLSModeTerminate
	return &gatewayv1.Gateway{
		TypeMeta: metav1.TypeMeta{APIVersion: gatewayv1.GroupVersion.String(), Kind: "Gateway"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      EastWestGateway,
			Namespace: SystemNamespace,
			Labels:    map[string]string{NetworkLabel: network},
		},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: EastWestGatewayClass,
			Listeners: []gatewayv1.Listener{{
				Name:     "mesh",
				Port:     HBONEPort,
				Protocol: "HBONE",
				TLS: &gatewayv1.ListenerTLSConfig{
					Mode:    &terminate,
					Options: map[gatewayv1.AnnotationKey]gatewayv1.AnnotationValue{"gateway.istio.io/tls-terminate-mode": "ISTIO_MUTUAL"},
				},
			}},
		},
	}
}

// EastWestGatewayObject is NewEastWestGateway as an unstructured object, for the rendered
// manifests: spec and metadata only (no empty status, no creationTimestamp: null).
func EastWestGatewayObject(network string) *unstructured.Unstructured {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(NewEastWestGateway(network))
	if err != nil {
		panic(fmt.Sprintf("mesh: the east-west Gateway does not convert: %v", err)) // a typed object always does
	}
	delete(obj, "status")
	unstructured.RemoveNestedField(obj, "metadata", "creationTimestamp")
	return &unstructured.Unstructured{Object: obj}
}
