package mesh

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/workload"
)

const (
	// WaypointName is the waypoint's name in Istio's multicluster docs (istioctl waypoint apply
	// --name waypoint); Deployment, Service and service account carry it.
	WaypointName = "waypoint"
	// WaypointClass is the GatewayClass of waypoints istiod creates.
	WaypointClass = "istio-waypoint"
	// UseWaypointLabel on a namespace or service sends its traffic through the named waypoint.
	UseWaypointLabel = "istio.io/use-waypoint"
	// GatewayNameLabel selects a gateway's pods (istiod's template: GatewayNameLabel).
	GatewayNameLabel = "gateway.networking.k8s.io/gateway-name"
)

// controllerLabels are the gateway.istio.io/managed values istiod's classes give their pods, and
// serviceTypes their Services' types (pilot/pkg/config/kube/gatewaycommon/classinfo.go
// ControllerLabel, DefaultServiceType).
var (
	controllerLabels = map[string]string{
		EastWestGatewayClass: "istio.io-eastwest-controller",
		WaypointClass:        "istio.io-mesh-controller",
	}
	serviceTypes = map[string]corev1.ServiceType{
		EastWestGatewayClass: corev1.ServiceTypeLoadBalancer,
		WaypointClass:        corev1.ServiceTypeClusterIP,
	}
)

// NewWaypoint is ns's waypoint as `istioctl waypoint apply --name waypoint --for service -n ns`
// makes it (istioctl/pkg/waypoint/waypoint.go), as Istio's multicluster docs deploy it in each
// cluster: class istio-waypoint, one HBONE listener on 15008, for service traffic.
func NewWaypoint(ns string) *gatewayv1.Gateway {
	return &gatewayv1.Gateway{
		TypeMeta:   metav1.TypeMeta{APIVersion: gatewayv1.GroupVersion.String(), Kind: "Gateway"},
		ObjectMeta: metav1.ObjectMeta{Name: WaypointName, Namespace: ns, Labels: map[string]string{"istio.io/waypoint-for": "service"}},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: WaypointClass,
			Listeners:        []gatewayv1.Listener{{Name: "mesh", Port: 15008, Protocol: "HBONE"}},
		},
	}
}

// infrastructureLabels are what istiod's deployment controller puts on everything it deploys for
// gw: the Gateway's labels, the network defaulted for both ambient classes (setLabelOverrides),
// and the class's controller.
func infrastructureLabels(gw *gatewayv1.Gateway, network string) map[string]string {
	l := maps.Clone(gw.Labels)
	if l == nil {
		l = map[string]string{}
	}
	if _, ok := l[NetworkLabel]; !ok && network != "" {
		l[NetworkLabel] = network
	}
	l["gateway.istio.io/managed"] = controllerLabels[string(gw.Spec.GatewayClassName)]
	l[GatewayNameLabel] = gw.Name
	l["gateway.networking.k8s.io/gateway-class-name"] = string(gw.Spec.GatewayClassName)
	return l
}

// GatewayPodLabels are the labels istiod's waypoint template, which renders both the
// istio-waypoint and istio-east-west classes, gives gw's pod
// (manifests/charts/istio-control/istio-discovery/files/waypoint.yaml): its fixed pod labels and
// the infrastructure labels.
func GatewayPodLabels(gw *gatewayv1.Gateway, network string) map[string]string {
	l := map[string]string{
		"sidecar.istio.io/inject":             "false",
		"istio.io/dataplane-mode":             "none",
		"service.istio.io/canonical-name":     gw.Name,
		"service.istio.io/canonical-revision": "latest",
	}
	maps.Copy(l, infrastructureLabels(gw, network))
	return l
}

// GatewayService is the Service istiod's waypoint template makes for gw: its status port and a
// port per listener (the deployment controller's extractServicePorts), selecting the gateway's
// pods.
func GatewayService(gw *gatewayv1.Gateway, network string) *corev1.Service {
	tcp := "tcp"
	ports := []corev1.ServicePort{{Name: "status-port", Port: 15021, Protocol: corev1.ProtocolTCP, AppProtocol: &tcp}}
	for _, l := range gw.Spec.Listeners {
		app := strings.ToLower(string(l.Protocol))
		ports = append(ports, corev1.ServicePort{Name: string(l.Name), Port: int32(l.Port), Protocol: corev1.ProtocolTCP, AppProtocol: &app})
	}
	dual := corev1.IPFamilyPolicyPreferDualStack
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: gw.Name, Namespace: gw.Namespace, Labels: infrastructureLabels(gw, network),
			Annotations: map[string]string{"networking.istio.io/traffic-distribution": "PreferClose"}},
		Spec: corev1.ServiceSpec{Type: serviceTypes[string(gw.Spec.GatewayClassName)], IPFamilyPolicy: &dual, Ports: ports,
			Selector: map[string]string{GatewayNameLabel: gw.Name}},
	}
}

// UseWaypoint labels namespace ns of c to send its services' traffic through waypoint (Istio's
// docs: kubectl label ns ... istio.io/use-waypoint=waypoint).
func UseWaypoint(ctx context.Context, c *cluster.Cluster, ns, waypoint string) error {
	return labelObject(ctx, c, "namespace "+ns, func(patch []byte) error {
		_, err := c.Client.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}, UseWaypointLabel, waypoint)
}

// MarkGlobal labels Service ns/name of c istio.io/global=true, as Istio's multicluster docs do to
// every cluster's waypoint Service (kubectl label svc waypoint -n ns istio.io/global=true).
func MarkGlobal(ctx context.Context, c *cluster.Cluster, ns, name string) error {
	return labelObject(ctx, c, "service "+ns+"/"+name, func(patch []byte) error {
		_, err := c.Client.CoreV1().Services(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}, workload.GlobalLabel, "true")
}

func labelObject(ctx context.Context, c *cluster.Cluster, what string, patch func([]byte) error, key, value string) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{key: value}}})
	if err != nil {
		return err
	}
	if err := patch(body); err != nil {
		return fmt.Errorf("cluster %s: labelling %s %s=%s: %w", c.Name, what, key, value, err)
	}
	return nil
}

// ApplyGateway creates gw in c (kept as it is when it exists).
func ApplyGateway(ctx context.Context, c *cluster.Cluster, gw *gatewayv1.Gateway) error {
	_, err := c.GatewayAPI.GatewayV1().Gateways(gw.Namespace).Create(ctx, gw, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cluster %s: creating Gateway %s/%s: %w", c.Name, gw.Namespace, gw.Name, err)
	}
	return nil
}

// WaitGatewayPod waits up to timeout for a Running, addressed pod of gateway ns/name in c (the
// one istiod's deployment controller made) and returns it.
func WaitGatewayPod(ctx context.Context, c *cluster.Cluster, ns, name string, timeout time.Duration) (cluster.GatewayPod, error) {
	var got cluster.GatewayPod
	last := "none exists"
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: GatewayNameLabel + "=" + name})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
				last = fmt.Sprintf("pod %s is %s", p.Name, p.Status.Phase)
				continue
			}
			got = cluster.GatewayPod{Name: p.Name, IP: p.Status.PodIP, Node: p.Spec.NodeName, Labels: p.Labels, MeshID: proxyEnv(&p, "ISTIO_META_MESH_ID")}
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return got, fmt.Errorf("cluster %s: no running pod of gateway %s/%s within %s (%s): istiod's deployment controller makes it from the Gateway; see its log and the Deployment's events", c.Name, ns, name, timeout, last)
	}
	return got, nil
}

// proxyEnv is the literal value of env var name in p's istio-proxy container ("" when unset).
func proxyEnv(p *corev1.Pod, name string) string {
	for _, ctr := range p.Spec.Containers {
		if ctr.Name != "istio-proxy" {
			continue
		}
		for _, e := range ctr.Env {
			if e.Name == name {
				return e.Value
			}
		}
	}
	return ""
}

// WriteWaypoint applies gw and writes what istiod's deployment controller would have made of it,
// for providers where istiod deploys no gateway: its service account, its Service and one pod on
// node, Running and Ready at ip (the status written as for scale pods, hostIP its node's).
func WriteWaypoint(ctx context.Context, c *cluster.Cluster, gw *gatewayv1.Gateway, ip, hostIP netip.Addr, node string) (cluster.GatewayPod, error) {
	if err := ApplyGateway(ctx, c, gw); err != nil {
		return cluster.GatewayPod{}, err
	}
	core := c.Client.CoreV1()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: gw.Name, Namespace: gw.Namespace}}
	if _, err := core.ServiceAccounts(gw.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return cluster.GatewayPod{}, fmt.Errorf("cluster %s: waypoint %s/%s's service account: %w", c.Name, gw.Namespace, gw.Name, err)
	}
	if _, err := core.Services(gw.Namespace).Create(ctx, GatewayService(gw, c.Network), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return cluster.GatewayPod{}, fmt.Errorf("cluster %s: waypoint %s/%s's Service: %w", c.Name, gw.Namespace, gw.Name, err)
	}
	labels := GatewayPodLabels(gw, c.Network)
	pod, err := core.Pods(gw.Namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: gw.Name + "-0", Namespace: gw.Namespace, Labels: labels,
			Annotations: map[string]string{"istio.io/rev": "default"}},
		Spec: corev1.PodSpec{
			NodeName: node, ServiceAccountName: gw.Name, AutomountServiceAccountToken: new(false),
			Containers: []corev1.Container{{Name: "istio-proxy", Image: "proxyv2",
				Ports: []corev1.ContainerPort{{Name: "status-port", ContainerPort: 15021, Protocol: corev1.ProtocolTCP}}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return cluster.GatewayPod{}, fmt.Errorf("cluster %s: waypoint %s/%s's pod: %w", c.Name, gw.Namespace, gw.Name, err)
	}
	if err := workload.PatchPodStatus(ctx, c, pod, workload.RunningStatus(ip, hostIP, true)); err != nil {
		return cluster.GatewayPod{}, fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	return cluster.GatewayPod{Name: pod.Name, IP: ip.String(), Node: node, Labels: labels}, nil
}
