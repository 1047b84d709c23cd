package envoyxds

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/ambientmc/ambientmc/framework/mesh"
)

// istioGolden is the Deployment and the Service istiod's deployment controller rendered for one
// of its test Gateways, as the pinned module keeps them
// (pilot/pkg/config/kube/gatewaycommon/testdata/deployment).
func istioGolden(t *testing.T, name string) (*appsv1.Deployment, *corev1.Service) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "istio.io/istio").Output()
	require.NoError(t, err, "locating the pinned istio.io/istio module")
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "pilot/pkg/config/kube/gatewaycommon/testdata/deployment", name))
	require.NoError(t, err)
	var d *appsv1.Deployment
	var svc *corev1.Service
	for _, doc := range strings.Split(string(b), "\n---\n") {
		switch {
		case strings.Contains(doc, "\nkind: Deployment\n"):
			d = &appsv1.Deployment{}
			require.NoError(t, yaml.Unmarshal([]byte(doc), d))
		case strings.Contains(doc, "\nkind: Service\n"):
			svc = &corev1.Service{}
			require.NoError(t, yaml.Unmarshal([]byte(doc), svc))
		}
	}
	require.NotNil(t, d, "%s holds a Deployment", name)
	require.NotNil(t, svc, "%s holds a Service", name)
	return d, svc
}

func proxyContainer(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "istio-proxy" {
			return c
		}
	}
	t.Fatal("no istio-proxy container")
	return corev1.Container{}
}

// metaEnv are the container's ISTIO_META_ variables, which become node metadata.
func metaEnv(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "ISTIO_META_") {
			out[e.Name] = e.Value
		}
	}
	return out
}

// The pod a client stands in for is the one istiod's template renders, by Istio's own golden
// output for the same Gateways (the deploymentcontroller test cases "istio-east-west" and
// "waypoint"): the same pod labels, the same ISTIO_META_ variables with the same values, and
// `proxy waypoint` for both classes, the node type the client presents; and the Service the local
// provider writes for a waypoint is the template's.
func TestPodIsWhatIstiodsTemplateRenders(t *testing.T) {
	for _, tc := range []struct {
		golden  string
		kind    Kind
		gw      *gatewayv1.Gateway
		network string // the install's global.network
		meta    int    // ISTIO_META_ variables besides the two from the downward API
	}{
		{"istio-east-west.yaml", EastWest, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "eastwestgateway", Namespace: "istio-system"},
			Spec: gatewayv1.GatewaySpec{GatewayClassName: mesh.EastWestGatewayClass}}, "network-1", 7},
		{"waypoint.yaml", Waypoint, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "namespace", Namespace: "default",
			Labels: map[string]string{"topology.istio.io/network": "network-1"}}, Spec: gatewayv1.GatewaySpec{GatewayClassName: mesh.WaypointClass}}, "network-2", 6},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			d, svc := istioGolden(t, tc.golden)
			labels := mesh.GatewayPodLabels(tc.gw, tc.network)
			assert.Equal(t, d.Spec.Template.Labels, labels, "the pod's labels")
			tc.gw.Spec.Listeners = []gatewayv1.Listener{{Name: "mesh", Port: 15008, Protocol: "ALL"}}
			own := mesh.GatewayService(tc.gw, tc.network)
			assert.Equal(t, svc.Labels, own.Labels, "the Service's labels")
			assert.Equal(t, svc.Annotations, own.Annotations)
			assert.Equal(t, svc.Spec.Ports, own.Spec.Ports)
			assert.Equal(t, svc.Spec.Selector, own.Spec.Selector)
			assert.Equal(t, svc.Spec.Type, own.Spec.Type)
			assert.Equal(t, svc.Spec.IPFamilyPolicy, own.Spec.IPFamilyPolicy)
			c := proxyContainer(t, d)
			require.GreaterOrEqual(t, len(c.Args), 2)
			assert.Equal(t, []string{"proxy", "waypoint"}, c.Args[:2], "pilot-agent's role: the node type")

			want := metaEnv(c)
			p := Pod{Kind: tc.kind, Cluster: want["ISTIO_META_CLUSTER_ID"], Network: labels["topology.istio.io/network"], Namespace: tc.gw.Namespace,
				Gateway: tc.gw.Name, Name: tc.gw.Name + "-0", IP: "10.0.0.1", Labels: labels}
			pc := p.proxyConfig()
			pc.ProxyMetadata = nil // the golden install has no ambient profile
			got := map[string]string{}
			for _, kv := range p.env(pc) {
				if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "ISTIO_META_") {
					got[k] = v
				}
			}
			// Downward-API values the golden leaves empty: the pod's own.
			delete(want, "ISTIO_META_SERVICE_ACCOUNT")
			delete(want, "ISTIO_META_NODE_NAME")
			delete(got, "ISTIO_META_SERVICE_ACCOUNT")
			delete(got, "ISTIO_META_NODE_NAME")
			assert.Len(t, want, tc.meta, "the golden's ISTIO_META_ variables (REQUESTED_NETWORK_VIEW only for the east-west class)")
			assert.Equal(t, want, got, "the proxy's ISTIO_META_ environment")
		})
	}
}
