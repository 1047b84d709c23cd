package install

import (
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/kube/apply"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/topology"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

const (
	testHub = "example.com/hub"
	testTag = "t1"
)

var rendered struct {
	once   sync.Once
	topo   *topology.Topology
	cas    map[string]*pki.Intermediate
	byName map[string]*Manifests
	err    error
}

// renderThree renders cluster-1..3 once for all tests (a render takes seconds on a busy host).
func renderThree(t *testing.T) (*topology.Topology, map[string]*pki.Intermediate, map[string]*Manifests) {
	t.Helper()
	rendered.once.Do(func() {
		rendered.topo, rendered.err = topology.Generate(3)
		if rendered.err != nil {
			return
		}
		root, err := pki.NewRoot()
		if err != nil {
			rendered.err = err
			return
		}
		// cluster-1 runs the client, echo-local and echo-failover; cluster-2 echo-remote and
		// echo-failover; cluster-3 only has the Services.
		plan, err := ProbePlan(rendered.topo, "cluster-1", "cluster-2", "")
		if err != nil {
			rendered.err = err
			return
		}
		rendered.cas, rendered.byName = map[string]*pki.Intermediate{}, map[string]*Manifests{}
		for _, c := range rendered.topo.Clusters {
			ca, err := root.NewIntermediate(c.Name)
			if err != nil {
				rendered.err = err
				return
			}
			m, err := Render(Options{Cluster: c, Images: Images{Hub: testHub, Tag: testTag}, CACerts: ca, Probes: plan[c.Name]})
			if err != nil {
				rendered.err = err
				return
			}
			rendered.cas[c.Name], rendered.byName[c.Name] = ca, m
		}
	})
	require.NoError(t, rendered.err)
	return rendered.topo, rendered.cas, rendered.byName
}

// The golden files hold a summary, not the render: the full render is about 1.5 MB per cluster
// (mostly CRD schemas and the injection template), which no reviewer reads. The summary lists
// every object (kind, namespace, name) with the fields this framework depends on (images, literal
// env, affinity, tolerations, labels of namespaces and gateways, service ports), plus a sha256 of
// each component's full YAML, so any other change in the render also shows up as a diff. The
// cacerts data is random per run, so the hash covers its keys only.
func TestRenderGolden(t *testing.T) {
	topo, _, ms := renderThree(t)
	for _, c := range topo.Clusters {
		got := summarize(t, ms[c.Name])
		path := filepath.Join("testdata", c.Name+".golden")
		if *update {
			require.NoError(t, os.MkdirAll("testdata", 0o755))
			require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
			continue
		}
		want, err := os.ReadFile(path)
		require.NoError(t, err, "run `go test ./framework/mesh/install -run TestRenderGolden -update` to create it")
		assert.Equal(t, string(want), got, "%s differs from the render: check the diff, then rerun with -update", path)
	}
}

func TestRenderComponentsInIstioOrder(t *testing.T) {
	_, _, ms := renderThree(t)
	var names []string
	for _, c := range ms["cluster-1"].Components {
		names = append(names, c.Name)
		assert.NotEmpty(t, c.Objects, c.Name)
	}
	assert.Equal(t, []string{"gateway-api-crds", "base", "istiod", "cni", "ztunnel", "eastwest-gateway", "probes"}, names)
	assert.Equal(t, []string{"01-gateway-api-crds.yaml", "02-base.yaml", "03-istiod.yaml", "04-cni.yaml", "05-ztunnel.yaml", "06-eastwest-gateway.yaml", "07-probes.yaml"},
		ms["cluster-1"].FileNames())
}

func TestRenderIstiodCarriesItsClusterAndMultiNetwork(t *testing.T) {
	topo, _, ms := renderThree(t)
	for _, c := range topo.Clusters {
		istiod := deployment(t, ms[c.Name], ComponentIstiod, "istiod")
		env := literalEnv(istiod.Spec.Template.Spec.Containers[0])
		assert.Equal(t, c.Name, env["CLUSTER_ID"], c.Name)
		assert.Equal(t, "true", env["AMBIENT_ENABLE_MULTI_NETWORK"], c.Name)
		assert.Equal(t, "true", env["PILOT_ENABLE_AMBIENT"], c.Name)
	}
}

func TestRenderMeshConfigHasMeshIDAndGlobalScope(t *testing.T) {
	_, _, ms := renderThree(t)
	cm := find(t, *ms["cluster-2"].Component(ComponentIstiod), "ConfigMap", mesh.SystemNamespace, "istio")
	data, _, _ := unstructured.NestedString(cm.Object, "data", "mesh")
	var cfg struct {
		DefaultConfig struct {
			MeshID string `json:"meshId"`
		} `json:"defaultConfig"`
		TrustDomain         string `json:"trustDomain"`
		ServiceScopeConfigs []struct {
			Scope            string `json:"scope"`
			ServicesSelector struct {
				MatchExpressions []struct {
					Key    string   `json:"key"`
					Values []string `json:"values"`
				} `json:"matchExpressions"`
			} `json:"servicesSelector"`
		} `json:"serviceScopeConfigs"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(data), &cfg))
	assert.Equal(t, DefaultMeshID, cfg.DefaultConfig.MeshID)
	assert.Equal(t, pki.TrustDomain, cfg.TrustDomain)
	require.Len(t, cfg.ServiceScopeConfigs, 1)
	assert.Equal(t, "GLOBAL", cfg.ServiceScopeConfigs[0].Scope)
	require.Len(t, cfg.ServiceScopeConfigs[0].ServicesSelector.MatchExpressions, 1)
	assert.Equal(t, workload.GlobalLabel, cfg.ServiceScopeConfigs[0].ServicesSelector.MatchExpressions[0].Key)
	assert.Equal(t, []string{"true"}, cfg.ServiceScopeConfigs[0].ServicesSelector.MatchExpressions[0].Values)
}

func TestRenderZtunnelCarriesItsOwnClusterAndNetwork(t *testing.T) {
	topo, _, ms := renderThree(t)
	for _, c := range topo.Clusters {
		zt := daemonSet(t, ms[c.Name], ComponentZtunnel, "ztunnel")
		env := literalEnv(zt.Spec.Template.Spec.Containers[0])
		assert.Equal(t, c.Name, env["ISTIO_META_CLUSTER_ID"], "%s: else ztunnel says Kubernetes", c.Name)
		assert.Equal(t, c.Network, env["NETWORK"], c.Name)
	}
}

func TestRenderEveryIstioImageFromHubAndTag(t *testing.T) {
	_, _, ms := renderThree(t)
	plain := regexp.MustCompile(`^` + regexp.QuoteMeta(testHub) + `/[a-z0-9-]+:` + testTag + `$`)
	n := 0
	for _, comp := range ms["cluster-1"].Components {
		for _, img := range containerImages(t, comp) {
			n++
			if comp.Name == ComponentProbes {
				assert.Equal(t, DefaultProbeImage, img)
				continue
			}
			assert.Regexp(t, plain, img, "component %s", comp.Name)
		}
	}
	assert.GreaterOrEqual(t, n, 3+3, "istiod, istio-cni and ztunnel images, and the probes'")
}

func TestRenderVariantIsAppendedToTheTag(t *testing.T) {
	topo, cas, _ := renderThree(t)
	m, err := Render(Options{Cluster: topo.Clusters[0], Images: Images{Hub: testHub, Tag: testTag, Variant: "distroless"}, CACerts: cas["cluster-1"]})
	require.NoError(t, err)
	imgs := containerImages(t, *m.Component(ComponentZtunnel))
	require.NotEmpty(t, imgs)
	assert.Equal(t, testHub+"/ztunnel:"+testTag+"-distroless", imgs[0])
	assert.Nil(t, m.Component(ComponentProbes), "no probes unless asked for")
}

func TestRenderKeepsZtunnelAndCNIOffFakeNodes(t *testing.T) {
	_, _, ms := renderThree(t)
	m := ms["cluster-2"]
	for _, ds := range []*appsv1.DaemonSet{daemonSet(t, m, ComponentZtunnel, "ztunnel"), daemonSet(t, m, ComponentCNI, "istio-cni-node")} {
		spec := ds.Spec.Template.Spec
		// Why the affinity is needed: the charts tolerate every NoSchedule taint, the fake nodes' too.
		assert.Contains(t, spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}, ds.Name)
		require.NotNil(t, spec.Affinity, ds.Name)
		require.NotNil(t, spec.Affinity.NodeAffinity, ds.Name)
		req := spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		require.NotNil(t, req, ds.Name)
		assert.Equal(t, []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: FakeNodeLabel, Operator: corev1.NodeSelectorOpDoesNotExist}}}}, req.NodeSelectorTerms, ds.Name)
	}
}

// On a shared host (kind) the Istio components ask for a small share of a 2-core node; otherwise the
// charts' own requests stand.
func TestRenderSharedHostRequests(t *testing.T) {
	topo, cas, ms := renderThree(t)
	charts := deployment(t, ms["cluster-1"], ComponentIstiod, "istiod").Spec.Template.Spec.Containers[0].Resources.Requests
	assert.Equal(t, "500m", charts.Cpu().String(), "the chart's default request")
	m, err := Render(Options{Cluster: topo.Clusters[0], Images: Images{Hub: testHub, Tag: testTag}, CACerts: cas["cluster-1"], SharedHost: true})
	require.NoError(t, err)
	var cpu int64
	for _, spec := range []corev1.PodSpec{
		deployment(t, m, ComponentIstiod, "istiod").Spec.Template.Spec,
		daemonSet(t, m, ComponentZtunnel, "ztunnel").Spec.Template.Spec,
		daemonSet(t, m, ComponentCNI, "istio-cni-node").Spec.Template.Spec,
	} {
		req := spec.Containers[0].Resources
		assert.Empty(t, req.Limits, "requests only")
		cpu += req.Requests.Cpu().MilliValue()
	}
	assert.Equal(t, int64(200), cpu, "istiod 100m, ztunnel and istio-cni 50m each")
}

func TestRenderFakeNodeLabelOption(t *testing.T) {
	topo, cas, _ := renderThree(t)
	m, err := Render(Options{Cluster: topo.Clusters[0], Images: Images{Hub: testHub, Tag: testTag}, CACerts: cas["cluster-1"], FakeNodeLabel: "example.com/virtual"})
	require.NoError(t, err)
	zt := daemonSet(t, m, ComponentZtunnel, "ztunnel")
	assert.Equal(t, "example.com/virtual", zt.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Key)
}

func TestRenderBaseHasNetworkNamespaceAndCACerts(t *testing.T) {
	topo, cas, ms := renderThree(t)
	for _, c := range topo.Clusters {
		base := ms[c.Name].Component(ComponentBase)
		ns := find(t, *base, "Namespace", "", mesh.SystemNamespace)
		assert.Equal(t, c.Network, ns.GetLabels()[mesh.NetworkLabel], c.Name)
		assert.Same(t, ns, base.Objects[0], "the namespace comes first")
		assert.Equal(t, 1, countKind(*base, "Namespace"), "one istio-system: ours, with the network label")

		var secret corev1.Secret
		fromUnstructured(t, find(t, *base, "Secret", mesh.SystemNamespace, pki.CACertsSecret), &secret)
		ca := cas[c.Name]
		assert.Equal(t, ca.CertPEM, secret.Data[pki.CACertFile], c.Name)
		assert.Equal(t, ca.KeyPEM, secret.Data[pki.CAKeyFile], c.Name)
		assert.Equal(t, ca.ChainPEM, secret.Data[pki.CertChainFile], c.Name)
		assert.Equal(t, ca.RootPEM, secret.Data[pki.RootCertFile], c.Name)
		_, hasTimestamp, _ := unstructured.NestedFieldNoCopy(find(t, *base, "Secret", mesh.SystemNamespace, pki.CACertsSecret).Object, "metadata", "creationTimestamp")
		assert.False(t, hasTimestamp, "no null creationTimestamp sent to the API server")
	}
}

func TestRenderEastWestGatewayLabelledWithNetwork(t *testing.T) {
	topo, _, ms := renderThree(t)
	for _, c := range topo.Clusters {
		gw := find(t, *ms[c.Name].Component(ComponentEastWestGateway), "Gateway", mesh.SystemNamespace, mesh.EastWestGateway)
		assert.Equal(t, c.Network, gw.GetLabels()[mesh.NetworkLabel])
		class, _, _ := unstructured.NestedString(gw.Object, "spec", "gatewayClassName")
		assert.Equal(t, "istio-east-west", class)
		listeners, _, _ := unstructured.NestedSlice(gw.Object, "spec", "listeners")
		require.Len(t, listeners, 1)
		l := listeners[0].(map[string]any)
		assert.Equal(t, int64(15008), l["port"])
		assert.Equal(t, "HBONE", l["protocol"])
		mode, _, _ := unstructured.NestedString(l, "tls", "mode")
		assert.Equal(t, "Terminate", mode)
	}
}

func TestRenderProbes(t *testing.T) {
	topo, _, ms := renderThree(t)
	wantApps := map[string][]string{
		"cluster-1": {workload.EchoLocal, workload.EchoFailover, FortioClient},
		"cluster-2": {workload.EchoRemote, workload.EchoFailover},
		"cluster-3": nil,
	}
	for _, c := range topo.Clusters {
		probes := *ms[c.Name].Component(ComponentProbes)
		ns := find(t, probes, "Namespace", "", workload.ProbeNamespace)
		assert.Equal(t, "ambient", ns.GetLabels()[workload.DataplaneModeLabel])
		for _, app := range []string{workload.EchoLocal, workload.EchoRemote, workload.EchoFailover} {
			var svc corev1.Service
			fromUnstructured(t, find(t, probes, "Service", workload.ProbeNamespace, app), &svc)
			assert.Equal(t, "true", svc.Labels[workload.GlobalLabel], app)
			require.Len(t, svc.Spec.Ports, 1)
			assert.Equal(t, int32(80), svc.Spec.Ports[0].Port)
			assert.Equal(t, int32(8080), svc.Spec.Ports[0].TargetPort.IntVal)
			if app == workload.EchoFailover {
				require.NotNil(t, svc.Spec.TrafficDistribution)
				assert.Equal(t, corev1.ServiceTrafficDistributionPreferClose, *svc.Spec.TrafficDistribution)
			} else {
				assert.Nil(t, svc.Spec.TrafficDistribution, app)
			}
		}
		var apps []string
		for _, o := range probes.Objects {
			if o.GetKind() != "Deployment" {
				continue
			}
			apps = append(apps, o.GetName())
			d := deployment(t, ms[c.Name], ComponentProbes, o.GetName())
			args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " ")
			if o.GetName() == FortioClient {
				assert.Equal(t, "server -http-port 8080", args)
				continue
			}
			assert.Equal(t, "server -http-port 8080 -echo-server-default-params=header=x-served-by:"+c.Name, args, "each response names the serving cluster")
			assert.Equal(t, "echo", d.Spec.Template.Spec.ServiceAccountName)
		}
		assert.Equal(t, wantApps[c.Name], apps, c.Name)
	}
}

func TestRenderRejectsBadOptions(t *testing.T) {
	topo, cas, _ := renderThree(t)
	ok := Options{Cluster: topo.Clusters[0], Images: Images{Hub: testHub, Tag: testTag}, CACerts: cas["cluster-1"]}
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"no hub", func(o *Options) { o.Images.Hub = "" }, "Images.Hub is empty: pass -istio.hub"},
		{"no tag", func(o *Options) { o.Images.Tag = "" }, "Images.Tag is empty: pass -istio.tag"},
		{"no cluster", func(o *Options) { o.Cluster.Name = "" }, "Options.Cluster.Name is empty"},
		{"no network", func(o *Options) { o.Cluster.Network = "" }, "Options.Cluster.Network is empty"},
		{"no CA", func(o *Options) { o.CACerts = nil }, "Options.CACerts is nil"},
		{"foreign CA", func(o *Options) { o.CACerts = cas["cluster-2"] }, `intermediate of cluster "cluster-2"`},
		{"bad role", func(o *Options) { o.Probes = &ProbeOptions{Role: "both"} }, `Probes.Role is "both"`},
		{"bad app", func(o *Options) { o.Probes = &ProbeOptions{Role: RoleServer, Apps: []string{"echo"}} }, `Probes.Apps has "echo"`},
		{"bad hub", func(o *Options) { o.Images.Hub = "Upper/Case" }, `-istio.hub=Upper/Case: Istio refuses it`},
		{"remote cluster", func(o *Options) { o.Cluster.Primary = "cluster-2" }, "cluster cluster-1 is a remote of cluster-2: ambient multicluster is multi-primary only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ok
			tc.edit(&o)
			_, err := Render(o)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestWriteDir(t *testing.T) {
	_, _, ms := renderThree(t)
	m := ms["cluster-1"]
	dir := t.TempDir()
	require.NoError(t, m.WriteDir(dir))
	for i, name := range m.FileNames() {
		path := filepath.Join(dir, name)
		info, err := os.Stat(path)
		require.NoError(t, err)
		if m.Components[i].Name == ComponentBase {
			assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "base holds the CA key")
		} else {
			assert.Equal(t, os.FileMode(0o644), info.Mode().Perm(), name)
		}
		objs := decodeFile(t, path)
		require.Len(t, objs, len(m.Components[i].Objects), name)
		for k, o := range objs {
			// JSON compares numbers by value: YAML decodes them as int64 where Istio has int.
			want := m.Components[i].Objects[k]
			assert.True(t, compact(t, want.Object) == compact(t, o.Object), "%s: %s %s does not round-trip", name, want.GetKind(), want.GetName())
		}
	}
}

// --- helpers

func find(t *testing.T, c Component, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range c.Objects {
		if o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("component %s has no %s %s/%s", c.Name, kind, ns, name)
	return nil
}

func countKind(c Component, kind string) int {
	n := 0
	for _, o := range c.Objects {
		if o.GetKind() == kind {
			n++
		}
	}
	return n
}

func fromUnstructured(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into))
}

func deployment(t *testing.T, m *Manifests, comp, name string) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	fromUnstructured(t, find(t, *m.Component(comp), "Deployment", namespaceOf(comp), name), &d)
	return &d
}

func daemonSet(t *testing.T, m *Manifests, comp, name string) *appsv1.DaemonSet {
	t.Helper()
	var d appsv1.DaemonSet
	fromUnstructured(t, find(t, *m.Component(comp), "DaemonSet", mesh.SystemNamespace, name), &d)
	return &d
}

func literalEnv(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			out[e.Name] = e.Value
		}
	}
	return out
}

func podSpec(t *testing.T, o *unstructured.Unstructured) (*corev1.PodSpec, bool) {
	t.Helper()
	tmpl, ok, _ := unstructured.NestedMap(o.Object, "spec", "template")
	if !ok {
		return nil, false
	}
	var pt corev1.PodTemplateSpec
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, &pt))
	return &pt.Spec, true
}

func containerImages(t *testing.T, c Component) []string {
	t.Helper()
	var out []string
	for _, o := range c.Objects {
		if spec, ok := podSpec(t, o); ok {
			for _, ctr := range append(spec.InitContainers, spec.Containers...) {
				out = append(out, ctr.Image)
			}
		}
	}
	return out
}

func decodeFile(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := apply.DecodeFile(path)
	require.NoError(t, err)
	return objs
}

// summarize is the golden form of one cluster's render (see TestRenderGolden).
func summarize(t *testing.T, m *Manifests) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "# %s: Render(hub %s, tag %s, variant \"\"), regenerate with -update\n", m.Cluster, testHub, testTag)
	for _, c := range m.Components {
		fmt.Fprintf(&b, "component %s: %d objects, sha256 %s\n", c.Name, len(c.Objects), componentHash(t, c))
		for _, o := range c.Objects {
			fmt.Fprintf(&b, "  %s %s\n", o.GetKind(), objName(o))
			for _, line := range details(t, o) {
				fmt.Fprintf(&b, "    %s\n", line)
			}
		}
	}
	return b.String()
}

func objName(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

// componentHash hashes the component's YAML with Secret data reduced to its keys (cacerts is
// random per run).
func componentHash(t *testing.T, c Component) string {
	t.Helper()
	norm := Component{Name: c.Name}
	for _, o := range c.Objects {
		if o.GetKind() == "Secret" {
			o = o.DeepCopy()
			data, _, _ := unstructured.NestedMap(o.Object, "data")
			for k := range data {
				data[k] = "<redacted>"
			}
			require.NoError(t, unstructured.SetNestedMap(o.Object, data, "data"))
		}
		norm.Objects = append(norm.Objects, o)
	}
	y, err := norm.YAML()
	require.NoError(t, err)
	return fmt.Sprintf("%x", sha256.Sum256(y))
}

func compact(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return string(data)
}

// details are the fields of o that the framework depends on.
func details(t *testing.T, o *unstructured.Unstructured) []string {
	t.Helper()
	var out []string
	switch o.GetKind() {
	case "Namespace", "Gateway":
		out = append(out, "labels "+compact(t, o.GetLabels()))
		if spec, ok := o.Object["spec"]; ok {
			out = append(out, "spec "+compact(t, spec))
		}
	case "ConfigMap":
		if o.GetName() == "istio" { // the mesh config: mesh ID, trust domain, GLOBAL service scope
			mesh, _, _ := unstructured.NestedString(o.Object, "data", "mesh")
			var v any
			require.NoError(t, yaml.Unmarshal([]byte(mesh), &v))
			out = append(out, "mesh "+compact(t, v))
		}
	case "Secret":
		data, _, _ := unstructured.NestedMap(o.Object, "data")
		var keys []string
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out = append(out, "data keys "+strings.Join(keys, " "))
	case "Service":
		spec, _, _ := unstructured.NestedMap(o.Object, "spec")
		out = append(out, "labels "+compact(t, o.GetLabels()), "ports "+compact(t, spec["ports"]))
		if td, ok := spec["trafficDistribution"]; ok {
			out = append(out, "trafficDistribution "+fmt.Sprint(td))
		}
	}
	spec, ok := podSpec(t, o)
	if !ok {
		return out
	}
	if spec.Affinity != nil {
		out = append(out, "affinity "+compact(t, spec.Affinity))
	}
	if len(spec.Tolerations) > 0 {
		out = append(out, "tolerations "+compact(t, spec.Tolerations))
	}
	for _, ctr := range append(spec.InitContainers, spec.Containers...) {
		out = append(out, fmt.Sprintf("container %s image %s", ctr.Name, ctr.Image))
		if len(ctr.Args) > 0 {
			out = append(out, "  args "+strings.Join(ctr.Args, " "))
		}
		env := literalEnv(ctr)
		names := make([]string, 0, len(env))
		for k := range env {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			out = append(out, fmt.Sprintf("  env %s=%s", k, env[k]))
		}
	}
	return out
}

func namespaceOf(comp string) string {
	if comp == ComponentProbes {
		return workload.ProbeNamespace
	}
	return mesh.SystemNamespace
}

func TestProbePlanRejectsUnknownClusters(t *testing.T) {
	topo, _, _ := renderThree(t)
	_, err := ProbePlan(topo, "cluster-9", "cluster-2", "")
	assert.ErrorContains(t, err, `probe client cluster "cluster-9" is not in the topology`)
	_, err = ProbePlan(topo, "cluster-1", "cluster-9", "")
	assert.ErrorContains(t, err, `probe cluster "cluster-9" is not in the topology`)
	_, err = ProbePlan(topo, "cluster-1", "cluster-1", "")
	assert.ErrorContains(t, err, "pick two clusters")
	plan, err := ProbePlan(topo, "cluster-2", "", "")
	require.NoError(t, err)
	assert.Equal(t, RoleClient, plan["cluster-2"].Role)
	assert.Equal(t, &ProbeOptions{Role: RoleServer}, plan["cluster-1"])
}

// With a cluster on the client's network and one on another, each gets its app; echo-failover's
// second endpoint goes to the other network's, as on the local provider.
func TestProbePlanPlacesSameAndOtherNetwork(t *testing.T) {
	topo, err := topology.GenerateNetworks(3, 2) // cluster-1 and cluster-3 share network-1
	require.NoError(t, err)
	remote, peer := ProbeClusters(topo, "cluster-1")
	assert.Equal(t, "cluster-2", remote)
	assert.Equal(t, "cluster-3", peer)
	plan, err := ProbePlan(topo, "cluster-1", remote, peer)
	require.NoError(t, err)
	assert.Equal(t, []string{workload.EchoLocal, workload.EchoFailover}, plan["cluster-1"].Apps)
	assert.Equal(t, []string{workload.EchoRemote, workload.EchoFailover}, plan["cluster-2"].Apps)
	assert.Equal(t, []string{workload.EchoPeer}, plan["cluster-3"].Apps)
	one, err := topology.GenerateNetworks(2, 1)
	require.NoError(t, err)
	remote, peer = ProbeClusters(one, "cluster-1")
	plan, err = ProbePlan(one, "cluster-1", remote, peer)
	require.NoError(t, err)
	assert.Equal(t, []string{workload.EchoPeer, workload.EchoFailover}, plan["cluster-2"].Apps, "a single network fails over to the peer")
}
