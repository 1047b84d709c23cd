package incluster

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/topology"
)

// MinKubernetes is the oldest Kubernetes the pinned Istio supports (istioctl x precheck).
var MinKubernetes = version.MustParseGeneric("1.32.0")

// preflightTimeout bounds each API call of the preflight, so an unreachable server fails fast.
const preflightTimeout = 15 * time.Second

// Preflight checks every cluster of t before anything is created in any of them, modelled on
// `istioctl x precheck` (istioctl/pkg/precheck/precheck.go) plus what a multicluster run needs:
//
//   - the kubeconfig loads and its API server answers /version;
//   - Kubernetes >= MinKubernetes;
//   - the credentials may create what the install and the workloads create
//     (SelfSubjectAccessReview per resource, see permissions);
//   - at least one node that is Ready, schedulable and untainted, and is neither one of the
//     framework's fake nodes (label cluster.FakeNodeLabel) nor a kwok node (label type=kwok or
//     annotation kwok.x-k8s.io/node): istiod, ztunnel and the gateway need a real kubelet;
//   - no istiod Deployment in istio-system unless Options.ReuseIstio, and no cacerts Secret (a
//     root this run did not make, which the install refuses to replace);
//   - istio-system's topology.istio.io/network label, if set, is the topology's network;
//   - existing Gateway API CRDs serve v1 for Gateway and GatewayClass;
//   - the internal API-server address (the same kubeconfig: the topology formats carry one per
//     cluster) is not a loopback address or localhost, which another cluster's istiod cannot
//     reach. Whether a remote cluster's pods can route to it cannot be seen from here.
//
// It also chooses each cluster's Istio platform (platform.go).
//
// It reads only. It returns one error that lists every cluster with all of its problems.
func (p *Provider) Preflight(ctx context.Context, t *topology.Topology) error {
	if t.Source == topology.SourceGenerated {
		return fmt.Errorf("-provider=%s uses existing clusters: pass -topology=FILE whose clusters name their kubeconfigs (ambientmc YAML/JSON \"clusters: [{name, network, kubeconfig}]\" or Istio's prow JSON with meta.kubeconfig) instead of -clusters", p.opts.Name)
	}
	if err := t.Check(Capabilities(p.opts.Name)); err != nil {
		return err
	}
	problems := make([][]string, len(t.Clusters))
	var wg sync.WaitGroup
	for i, tc := range t.Clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			problems[i] = p.checkCluster(ctx, tc)
		}()
	}
	wg.Wait()
	var b strings.Builder
	bad := 0
	for i, tc := range t.Clusters {
		if len(problems[i]) == 0 {
			continue
		}
		bad++
		fmt.Fprintf(&b, "\n  cluster %s (kubeconfig %s):", tc.Name, tc.Kubeconfig)
		for _, pr := range problems[i] {
			fmt.Fprintf(&b, "\n    - %s", pr)
		}
	}
	if bad > 0 {
		return fmt.Errorf("%s provider: preflight refused %d of %d clusters of %s (nothing was created):%s", p.opts.Name, bad, len(t.Clusters), t.Source, b.String())
	}
	p.mu.Lock()
	p.checked = t
	p.mu.Unlock()
	fmt.Fprintf(p.opts.Log, "ambientmc: kube preflight: %d clusters passed\n", len(t.Clusters))
	return nil
}

// target is one cluster under preflight.
type target struct {
	tc     topology.Cluster
	cfg    *rest.Config
	client kubernetes.Interface
	dyn    dynamic.Interface
}

func (p *Provider) checkCluster(ctx context.Context, tc topology.Cluster) []string {
	cfg, err := clientcmd.BuildConfigFromFlags("", tc.Kubeconfig)
	if err != nil {
		return []string{fmt.Sprintf("the kubeconfig does not load: %v", err)}
	}
	cfg.Timeout = preflightTimeout
	cfg.QPS, cfg.Burst = 50, 100 // a few dozen reads and reviews; client-side throttling would only add seconds
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return []string{fmt.Sprintf("no client for the kubeconfig: %v", err)}
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return []string{fmt.Sprintf("no client for the kubeconfig: %v", err)}
	}
	t := &target{tc: tc, cfg: cfg, client: client, dyn: dyn}
	v, err := client.Discovery().ServerVersion()
	if err != nil {
		return []string{fmt.Sprintf("the API server %s is unreachable: %v", cfg.Host, err)}
	}
	var out []string
	add := func(s string) {
		if s != "" {
			out = append(out, s)
		}
	}
	add(checkVersion(v.GitVersion))
	p.choosePlatform(ctx, t, v.GitVersion)
	add(t.checkPermissions(ctx, slices.Concat(permissions, platformPermissions(p.platformOf(tc.Name)))))
	add(t.checkNodes(ctx))
	for _, s := range t.checkExistingIstio(ctx, p.opts.ReuseIstio) {
		add(s)
	}
	add(t.checkNetworkLabel(ctx))
	add(t.checkGatewayAPI(ctx))
	add(checkInternalAddress(cfg.Host))
	return out
}

// checkVersion refuses Kubernetes older than MinKubernetes.
func checkVersion(gitVersion string) string {
	v, err := version.ParseGeneric(gitVersion)
	if err != nil {
		return fmt.Sprintf("cannot parse the Kubernetes version %q: %v", gitVersion, err)
	}
	if v.LessThan(MinKubernetes) {
		return fmt.Sprintf("Kubernetes %s is older than %s, the oldest the pinned Istio supports", gitVersion, MinKubernetes)
	}
	return ""
}

// permission is one SelfSubjectAccessReview the run needs to pass.
type permission struct {
	verb, group, resource, subresource, namespace string
}

func (p permission) String() string {
	r := p.resource
	if p.subresource != "" {
		r += "/" + p.subresource
	}
	if p.group != "" {
		r += "." + p.group
	}
	s := p.verb + " " + r
	if p.namespace != "" {
		s += " in " + p.namespace
	}
	return s
}

// permissions: istioctl x precheck's list (namespaces, cluster RBAC, CRDs, webhooks, and in
// istio-system roles, service accounts, services, deployments, config maps), plus what this
// install renders (secrets, daemonsets, role bindings, PodDisruptionBudgets, the Gateway), what
// the workloads write (fake nodes and their leases, pods and their status) and how the provider
// reaches pods (port-forward, the pod proxy for ztunnel metrics).
var permissions = func() []permission {
	ns := mesh.SystemNamespace
	return []permission{
		{verb: "create", resource: "namespaces"},
		{verb: "create", group: "rbac.authorization.k8s.io", resource: "clusterroles"},
		{verb: "create", group: "rbac.authorization.k8s.io", resource: "clusterrolebindings"},
		{verb: "create", group: "apiextensions.k8s.io", resource: "customresourcedefinitions"},
		{verb: "create", group: "admissionregistration.k8s.io", resource: "mutatingwebhookconfigurations"},
		{verb: "create", group: "admissionregistration.k8s.io", resource: "validatingwebhookconfigurations"},
		{verb: "create", group: "rbac.authorization.k8s.io", resource: "roles", namespace: ns},
		{verb: "create", group: "rbac.authorization.k8s.io", resource: "rolebindings", namespace: ns},
		{verb: "create", resource: "serviceaccounts", namespace: ns},
		{verb: "create", resource: "services", namespace: ns},
		{verb: "create", resource: "configmaps", namespace: ns},
		{verb: "create", resource: "secrets", namespace: ns},
		{verb: "create", group: "apps", resource: "deployments", namespace: ns},
		{verb: "create", group: "apps", resource: "daemonsets", namespace: ns},
		{verb: "create", group: "policy", resource: "poddisruptionbudgets", namespace: ns},
		{verb: "create", group: "gateway.networking.k8s.io", resource: "gateways", namespace: ns},
		{verb: "create", resource: "nodes"},
		{verb: "update", resource: "nodes", subresource: "status"},
		{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: workload.NodeLeaseNamespace},
		{verb: "create", resource: "pods"},
		{verb: "update", resource: "pods", subresource: "status"},
		{verb: "create", resource: "pods", subresource: "portforward", namespace: ns},
		{verb: "get", resource: "pods", subresource: "proxy", namespace: ns},
	}
}()

func (t *target) checkPermissions(ctx context.Context, permissions []permission) string {
	var missing []string
	for _, p := range permissions {
		r, err := t.client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
			Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
				Verb: p.verb, Group: p.group, Resource: p.resource, Subresource: p.subresource, Namespace: p.namespace,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Sprintf("cannot check permissions (SelfSubjectAccessReview): %v", err)
		}
		if !r.Status.Allowed {
			missing = append(missing, p.String())
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("missing permissions (SelfSubjectAccessReview): %s; use credentials bound to cluster-admin or grant these", strings.Join(missing, ", "))
}

// kwokNode mirrors kwok's own markers of the nodes it manages.
func kwokNode(n *corev1.Node) bool {
	_, annotated := n.Annotations["kwok.x-k8s.io/node"]
	return n.Labels["type"] == "kwok" || annotated
}

func (t *target) checkNodes(ctx context.Context) string {
	nodes, err := t.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Sprintf("cannot list nodes: %v", err)
	}
	var fake, kwok, unusable int
	var why []string
	for i := range nodes.Items {
		n := &nodes.Items[i]
		switch {
		case n.Labels[cluster.FakeNodeLabel] == "true":
			fake++
		case kwokNode(n):
			kwok++
		default:
			if reason := unusableNode(n); reason != "" {
				unusable++
				why = append(why, n.Name+": "+reason)
			} else {
				return ""
			}
		}
	}
	sort.Strings(why)
	if len(why) > 3 {
		why = append(why[:3], "...")
	}
	detail := fmt.Sprintf("%d nodes: %d framework fake nodes (label %s=true), %d kwok nodes, %d not usable", len(nodes.Items), fake, cluster.FakeNodeLabel, kwok, unusable)
	if len(why) > 0 {
		detail += " (" + strings.Join(why, "; ") + ")"
	}
	return "no schedulable node that is not a fake node: istiod, ztunnel and the east-west gateway need a node with a real kubelet; " + detail
}

// unusableNode says why a real node cannot take Istio's pods, or "".
func unusableNode(n *corev1.Node) string {
	if n.Spec.Unschedulable {
		return "cordoned"
	}
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		return "not Ready"
	}
	for _, taint := range n.Spec.Taints {
		if taint.Effect == corev1.TaintEffectNoSchedule || taint.Effect == corev1.TaintEffectNoExecute {
			return "tainted " + taint.Key + ":" + string(taint.Effect)
		}
	}
	return ""
}

func (t *target) checkExistingIstio(ctx context.Context, reuse bool) []string {
	var out []string
	d, err := t.client.AppsV1().Deployments(mesh.SystemNamespace).Get(ctx, "istiod", metav1.GetOptions{})
	switch {
	case err == nil && !reuse:
		img := ""
		if len(d.Spec.Template.Spec.Containers) > 0 {
			img = " (" + d.Spec.Template.Spec.Containers[0].Image + ")"
		}
		out = append(out, fmt.Sprintf("Istio is already installed: Deployment %s/istiod exists%s; uninstall it or pass -kube.reuse-istio to install over it", mesh.SystemNamespace, img))
	case err != nil && !apierrors.IsNotFound(err):
		out = append(out, fmt.Sprintf("cannot read Deployment %s/istiod: %v", mesh.SystemNamespace, err))
	}
	// Every run makes its own root CA, so any cacerts is another root's, and the install refuses
	// to replace a CA the cluster trusts: no flag can allow this one.
	_, err = t.client.CoreV1().Secrets(mesh.SystemNamespace).Get(ctx, "cacerts", metav1.GetOptions{})
	switch {
	case err == nil:
		out = append(out, fmt.Sprintf("a cacerts Secret exists in %s: a CA this run did not make (every run makes its own root), which the install refuses to replace; delete it if nothing trusts it any more", mesh.SystemNamespace))
	case !apierrors.IsNotFound(err):
		out = append(out, fmt.Sprintf("cannot read Secret %s/cacerts: %v", mesh.SystemNamespace, err))
	}
	return out
}

func (t *target) checkNetworkLabel(ctx context.Context) string {
	ns, err := t.client.CoreV1().Namespaces().Get(ctx, mesh.SystemNamespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		return fmt.Sprintf("cannot read namespace %s: %v", mesh.SystemNamespace, err)
	}
	if got, ok := ns.Labels[mesh.NetworkLabel]; ok && got != t.tc.Network {
		return fmt.Sprintf("namespace %s is labelled %s=%s but the topology puts the cluster on network %q; fix the label or the topology's network", mesh.SystemNamespace, mesh.NetworkLabel, got, t.tc.Network)
	}
	return ""
}

// checkGatewayAPI mirrors istioctl's check: Gateway API CRDs may be absent (the install adds
// them), but if present Gateway and GatewayClass must serve v1.
func (t *target) checkGatewayAPI(ctx context.Context) string {
	var old []string
	for _, name := range []string{"gateways.gateway.networking.k8s.io", "gatewayclasses.gateway.networking.k8s.io"} {
		crd, err := t.dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Sprintf("cannot read CRD %s: %v", name, err)
		}
		vs, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		served := false
		for _, v := range vs {
			m, _ := v.(map[string]any)
			if m["name"] == "v1" && m["served"] == true {
				served = true
			}
		}
		if !served {
			old = append(old, name)
		}
	}
	if len(old) > 0 {
		return fmt.Sprintf("Gateway API CRDs %s do not serve v1: upgrade the Gateway API CRDs (the install applies the pinned version only where they are absent or its own)", strings.Join(old, ", "))
	}
	return ""
}

// checkInternalAddress refuses a server that only the test host can reach.
func checkInternalAddress(host string) string {
	u, err := url.Parse(host)
	if err != nil || u.Hostname() == "" {
		return fmt.Sprintf("the kubeconfig's server %q does not parse as a URL", host)
	}
	h := u.Hostname()
	ip := net.ParseIP(h)
	if h == "localhost" || ip != nil && ip.IsLoopback() {
		return fmt.Sprintf("the API server address %s is a loopback address: other clusters' istiods (the remote secrets carry this kubeconfig's server) cannot reach it; use a kubeconfig whose server the other clusters can reach", u.Host)
	}
	return ""
}
