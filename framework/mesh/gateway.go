package mesh

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/ambientmc/ambientmc/emulator/dataplane/hbone"
	"github.com/ambientmc/ambientmc/framework/cluster"
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
// istiod keeps the addresses it finds in the status (it computes none without a Service), but a
// status write of its can race the patch and drop it: KeepEastWestGatewayAddress puts it back.
// The Gateway stays Programmed=False, which istiod ignores (notes/istio-embedded.md section 9).
func EnsureEastWestGateway(ctx context.Context, c *cluster.Cluster, address string) error {
	api := c.GatewayAPI.GatewayV1().Gateways(SystemNamespace)
	if _, err := api.Create(ctx, NewEastWestGateway(c.Network), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("cluster %s: creating the east-west gateway: %w", c.Name, err)
	}
	return EnsureEastWestGatewayAddress(ctx, c, address)
}

// EnsureEastWestGatewayAddress writes address into c's east-west Gateway's status.addresses.
func EnsureEastWestGatewayAddress(ctx context.Context, c *cluster.Cluster, address string) error {
	api := c.GatewayAPI.GatewayV1().Gateways(SystemNamespace)
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

// hasStatusAddress says whether the Gateway's status.addresses holds address.
func hasStatusAddress(gw *gatewayv1.Gateway, address string) bool {
	for _, a := range gw.Status.Addresses {
		if a.Value == address {
			return true
		}
	}
	return false
}

// AddressKeeper keeps the east-west Gateway's status address in place, as a LoadBalancer
// controller keeps a Service's: istiod's status writer replaces the Gateway's whole status with
// one computed from the object it last saw, so a write racing the framework's patch drops the
// address (seen once in a 10-cluster run: a Gateway without address, and no split-horizon
// workloads for its network at any istiod).
type AddressKeeper struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	restored int
	mu       sync.Mutex
}

// KeepEastWestGatewayAddress starts watching c's east-west Gateway and writes address into it
// again whenever it lacks it, until ctx ends or Stop is called; each restore is logged to log.
// A watch, not a poll: the keeper costs the API server nothing while the address stays.
func KeepEastWestGatewayAddress(ctx context.Context, c *cluster.Cluster, address string, log io.Writer) *AddressKeeper {
	if log == nil {
		log = io.Discard
	}
	ctx, cancel := context.WithCancel(ctx)
	k := &AddressKeeper{cancel: cancel}
	api := c.GatewayAPI.GatewayV1().Gateways(SystemNamespace)
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		for ctx.Err() == nil {
			w, err := api.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + EastWestGateway})
			if err != nil {
				sleepCtx(ctx, time.Second)
				continue
			}
			for ev := range w.ResultChan() {
				gw, ok := ev.Object.(*gatewayv1.Gateway)
				if !ok || ev.Type == watch.Deleted || hasStatusAddress(gw, address) {
					continue
				}
				if err := EnsureEastWestGatewayAddress(ctx, c, address); err != nil {
					if ctx.Err() == nil {
						fmt.Fprintf(log, "ambientmc: %s: restoring the east-west gateway address: %v\n", c.Name, err)
					}
					continue
				}
				k.mu.Lock()
				k.restored++
				k.mu.Unlock()
				fmt.Fprintf(log, "ambientmc: %s: the east-west gateway lost its status address (a status write of istiod's raced the framework's); wrote %s again\n", c.Name, address)
			}
			w.Stop()
		}
	}()
	return k
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Restored counts the times the keeper had to write the address again.
func (k *AddressKeeper) Restored() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.restored
}

// Stop ends the keeper and waits for it.
func (k *AddressKeeper) Stop() { k.cancel(); k.wg.Wait() }

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
			// Istio copies these onto the gateway's pod. Envoy as Istio bootstraps it keeps only
			// some stats (pkg/bootstrap/config.go): the tunnels the gateway terminated
			// (http.connect_terminate.downstream_rq_total), which the path checks read, only when asked.
			Infrastructure: &gatewayv1.GatewayInfrastructure{Annotations: map[gatewayv1.AnnotationKey]gatewayv1.AnnotationValue{
				"sidecar.istio.io/statsInclusionPrefixes": "http.connect_terminate",
			}},
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
