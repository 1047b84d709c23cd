package install

import (
	"fmt"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/topology"
)

// DefaultProbeImage is the fortio image of the probe pods: the version go.mod pins, so the client
// pod speaks the same REST API as the in-process fortio of the local provider.
const DefaultProbeImage = "fortio/fortio:1.75.3"

// Probe roles.
const (
	RoleClient = "client"
	RoleServer = "server"
)

const (
	// FortioClient is the Deployment (and app label) of the load generator; its REST API
	// (POST /fortio/rest/run on port workload.EchoPort) drives the latency runs.
	FortioClient = "fortio-client"
	// ServedByHeader is set by every echo server to its cluster's name, so each response says
	// which cluster served it.
	ServedByHeader = "x-served-by"
	// PartOfLabel (value "ambientmc") marks every probe object, to find them with one selector.
	PartOfLabel = "app.kubernetes.io/part-of"
	// Service accounts, as the local provider names them (their SPIFFE identities match).
	clientServiceAccount = "client"
	EchoServiceAccount   = "echo"
)

// ProbeOptions choose the probe workloads of one cluster.
type ProbeOptions struct {
	// Role is RoleClient (this cluster also runs fortio-client) or RoleServer.
	Role string
	// Apps are the echo services whose fortio server runs in this cluster (probe.Apps);
	// every probe Service exists in every cluster.
	Apps []string
	// Image defaults to DefaultProbeImage.
	Image string
}

var echoApps = probe.Apps

func (p ProbeOptions) validate(cluster string) error {
	if p.Role != RoleClient && p.Role != RoleServer {
		return fmt.Errorf("install: cluster %s: Probes.Role is %q: want %q or %q", cluster, p.Role, RoleClient, RoleServer)
	}
	seen := map[string]bool{}
	for _, app := range p.Apps {
		if !slices.Contains(echoApps, app) {
			return fmt.Errorf("install: cluster %s: Probes.Apps has %q: want some of %v", cluster, app, echoApps)
		}
		if seen[app] {
			return fmt.Errorf("install: cluster %s: Probes.Apps lists %q twice", cluster, app)
		}
		seen[app] = true
	}
	return nil
}

// probeObjects renders the probe namespace (enrolled in ambient), the three global Services, a
// fortio echo server per app of p, and fortio-client in the client cluster.
func probeObjects(cluster string, p ProbeOptions) ([]*unstructured.Unstructured, error) {
	if err := p.validate(cluster); err != nil {
		return nil, err
	}
	if p.Image == "" {
		p.Image = DefaultProbeImage
	}
	ns := workload.ProbeNamespace
	objs := []runtime.Object{
		&corev1.Namespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{workload.DataplaneModeLabel: "ambient"}},
		},
		serviceAccount(ns, clientServiceAccount),
		serviceAccount(ns, EchoServiceAccount),
	}
	for _, app := range echoApps {
		svc := &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns, Labels: map[string]string{workload.GlobalLabel: "true"}},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": app},
				Ports:    []corev1.ServicePort{{Name: "http", Port: workload.ProbePort, TargetPort: intstr.FromInt32(workload.EchoPort)}},
			},
		}
		if app == workload.EchoFailover {
			// PreferClose: istiod sends a FAILOVER policy, the client's own network first.
			svc.Spec.TrafficDistribution = new(corev1.ServiceTrafficDistributionPreferClose)
		}
		objs = append(objs, svc)
	}
	for _, app := range echoApps { // in a fixed order, whatever the order of p.Apps
		if slices.Contains(p.Apps, app) {
			objs = append(objs, fortio(ns, app, EchoServiceAccount, p.Image,
				"-echo-server-default-params=header="+ServedByHeader+":"+cluster))
		}
	}
	if p.Role == RoleClient {
		objs = append(objs, fortio(ns, FortioClient, clientServiceAccount, p.Image))
	}
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		u, err := toUnstructured(o)
		if err != nil {
			return nil, err
		}
		labels := u.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[PartOfLabel] = "ambientmc"
		u.SetLabels(labels)
		out = append(out, u)
	}
	return out, nil
}

func serviceAccount(ns, name string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
	}
}

// fortio is a one-replica Deployment running `fortio server` on the echo port; extra flags follow.
func fortio(ns, app, sa, image string, extra ...string) *appsv1.Deployment {
	labels := map[string]string{"app": app}
	args := append([]string{"server", "-http-port", strconv.Itoa(workload.EchoPort)}, extra...)
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: sa,
					Containers: []corev1.Container{{
						Name:  "fortio",
						Image: image,
						Args:  args,
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: workload.EchoPort}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
							HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(workload.EchoPort)},
						}},
					}},
				},
			},
		},
	}
}

// ProbePlan places the probes as the local provider does (workload.DeployProbes,
// probe.Setup.AppsOf): every cluster gets every probe Service; client runs fortio-client,
// echo-local and echo-failover; remote (another network) runs echo-remote, peer (the client's
// network) echo-peer, and the first of them echo-failover; the other clusters run no probe pods.
// remote and peer may be "" (no such cluster).
func ProbePlan(t *topology.Topology, client, remote, peer string) (map[string]*ProbeOptions, error) {
	if _, ok := t.Get(client); !ok {
		return nil, fmt.Errorf("install: probe client cluster %q is not in the topology (%s)", client, t.Source)
	}
	for _, name := range []string{remote, peer} {
		if _, ok := t.Get(name); name != "" && !ok {
			return nil, fmt.Errorf("install: probe cluster %q is not in the topology (%s)", name, t.Source)
		}
		if name == client {
			return nil, fmt.Errorf("install: probe client and server are both %q: pick two clusters", client)
		}
	}
	s := probe.Setup{Local: &cluster.Cluster{Cluster: topology.Cluster{Name: client}}}
	if remote != "" {
		s.Remote = &cluster.Cluster{Cluster: topology.Cluster{Name: remote}}
	}
	if peer != "" {
		s.Peer = &cluster.Cluster{Cluster: topology.Cluster{Name: peer}}
	}
	plan := map[string]*ProbeOptions{}
	for _, c := range t.Clusters {
		plan[c.Name] = &ProbeOptions{Role: RoleServer}
	}
	for _, c := range s.Servers() {
		plan[c.Name].Apps = s.AppsOf(c)
	}
	plan[client].Role = RoleClient
	return plan, nil
}

// ProbeClusters picks, for a client cluster, the probe clusters of t: the first other cluster on
// another network (remote) and the first other cluster on the client's network (peer), each ""
// when there is none.
func ProbeClusters(t *topology.Topology, client string) (remote, peer string) {
	c, _ := t.Get(client)
	for _, o := range t.Clusters {
		switch rel := topology.RelationOf(c, o); {
		case rel == topology.OtherNetwork && remote == "":
			remote = o.Name
		case rel == topology.SameNetwork && peer == "":
			peer = o.Name
		}
	}
	return remote, peer
}
