package topology

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Field paths an error may name, in each format's spelling; "" is the whole file.
var (
	ambientField = regexp.MustCompile(`^clusters(\[\d+\](\.(name|network|primary|kubeconfig))?)?$`)
	istioField   = regexp.MustCompile(`^\[\d+\](\.(kind|clusterName|podSubnet|svcSubnet|network|primaryClusterName|configClusterName|meta|meta\.kubeconfig|httpProxy|proxyKubectlOnly))?$`)
)

// FuzzParse feeds Parse arbitrary files. What it accepts is a topology by the package's own
// rules, and reads back the same when written out again; what it refuses gets one *Error per
// problem, each with the file, a field path of that format (or none, for the whole file), the
// problem and its fix.
func FuzzParse(f *testing.F) {
	examples, err := filepath.Glob("examples/*.yaml")
	if err != nil || len(examples) == 0 {
		f.Fatalf("examples: %v %v", examples, err)
	}
	for _, name := range examples {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, tc := range parseErrorCases {
		f.Add([]byte(tc.src))
	}
	for _, s := range []string{
		istioAmbient,
		`[{"kind": "Kubernetes", "clusterName": "primary", "network": "network-1", "httpProxy": "http://proxy:3128", "proxyKubectlOnly": true},
 {"clusterName": "remote", "network": "network-1", "primaryClusterName": "primary", "configClusterName": "primary", "meta": {"fakeVM": false, "other": {"x": 1}}},
 {"clusterName": "external", "configClusterName": "primary"}]`,
		"clusters:\n- name: cluster-1\n  network: net-a\n  kubeconfig: /k/1\n- name: cluster-2\n  primary: cluster-2\n- name: cluster-3\n  primary: cluster-1\n",
		`{"clusters": [{"name": "a"}, {"name": "b", "network": "n"}]}`,
		"- name: a\n",
	} {
		f.Add([]byte(s))
	}
	const source = "fuzz.yaml"
	f.Fuzz(func(t *testing.T, data []byte) {
		topo, err := Parse(data, source)
		if err != nil {
			if topo != nil {
				t.Fatalf("Parse returned a topology with its error %v", err)
			}
			checkParseError(t, data, source, err)
			return
		}
		checkTopology(t, topo, data, source)
	})
}

// checkParseError: every problem is an *Error that names the file, a field of the input's format
// (or none) and a fix.
func checkParseError(t *testing.T, data []byte, source string, err error) {
	t.Helper()
	field := ambientField
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '[' {
		field = istioField
	}
	problems := leaves(err)
	if len(problems) == 0 || err.Error() == "" {
		t.Fatalf("empty error %#v", err)
	}
	for _, p := range problems {
		te, ok := p.(*Error)
		if !ok {
			t.Fatalf("problem %T %q is not a *topology.Error", p, p)
		}
		switch {
		case te.Source != source:
			t.Errorf("%q: source %q, want %q", te, te.Source, source)
		case te.Problem == "":
			t.Errorf("%q: no problem stated", te)
		case te.Fix == "":
			t.Errorf("%q: no fix", te)
		case te.Field != "" && !field.MatchString(te.Field):
			t.Errorf("%q: field %q is not a path of this format", te, te.Field)
		}
	}
}

// leaves are the errors errors.Join put together, nested joins flattened.
func leaves(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leaves(e)...)
		}
		return out
	}
	return []error{err}
}

// checkTopology holds an accepted topology to what Validate, normalize and the providers rely on.
func checkTopology(t *testing.T, topo *Topology, data []byte, source string) {
	t.Helper()
	if topo.Source != source {
		t.Errorf("source %q, want %q", topo.Source, source)
	}
	if err := topo.Validate(); err != nil {
		t.Fatalf("Parse accepted a topology that does not validate: %v", err)
	}
	if len(topo.Clusters) == 0 {
		t.Fatal("no clusters")
	}
	checkKeys(t, data)
	again := &Topology{Clusters: append([]Cluster(nil), topo.Clusters...)}
	again.normalize()
	if !reflect.DeepEqual(again.Clusters, topo.Clusters) {
		t.Errorf("normalize is not idempotent:\n%+v\n%+v", topo.Clusters, again.Clusters)
	}
	names := map[string]bool{}
	for i, c := range topo.Clusters {
		switch {
		case c.Index != i+1:
			t.Errorf("%s: index %d at position %d", c.Name, c.Index, i)
		case len(validation.IsDNS1123Label(c.Name)) > 0:
			t.Errorf("cluster name %q is not a DNS-1123 label", c.Name)
		case names[c.Name]:
			t.Errorf("cluster name %q twice", c.Name)
		case c.Network == "" || len(validation.IsValidLabelValue(c.Network)) > 0:
			t.Errorf("%s: network %q", c.Name, c.Network)
		case c.Primary == "" || c.Config == "":
			t.Errorf("%s: primary %q and config %q not filled in", c.Name, c.Primary, c.Config)
		}
		names[c.Name] = true
	}
	for _, c := range topo.Clusters {
		if p, ok := topo.Get(c.Primary); !ok || !p.IsPrimary() {
			t.Errorf("%s: primary %q is not a primary of the topology", c.Name, c.Primary)
		}
		if _, ok := topo.Get(c.Config); !ok {
			t.Errorf("%s: config cluster %q is not in the topology", c.Name, c.Config)
		}
		for _, d := range topo.Clusters {
			rel := RelationOf(c, d)
			if want := (c.Name == d.Name); (rel == SameCluster) != want {
				t.Errorf("RelationOf(%s, %s) = %s", c.Name, d.Name, rel)
			}
			if rel == SameNetwork && c.Network != d.Network || rel == OtherNetwork && c.Network == d.Network {
				t.Errorf("RelationOf(%s, %s) = %s with networks %q and %q", c.Name, d.Name, rel, c.Network, d.Network)
			}
		}
	}
	if len(topo.Primaries()) == 0 {
		t.Error("no primary")
	}
	for _, n := range topo.Networks() {
		if n == "" {
			t.Error("an empty network")
		}
	}
	// A provider that builds every role refuses nothing but missing kubeconfigs, when it needs them.
	all := Capabilities{Provider: "all", Remotes: true, ExternalControlPlane: true}
	if err := topo.Check(all); err != nil {
		t.Errorf("Check refused a valid topology: %v", err)
	}
	all.NeedsKubeconfigs = true
	if err := topo.Check(all); (err == nil) != topo.HasKubeconfigs() {
		t.Errorf("Check with kubeconfigs needed: %v, HasKubeconfigs %v", err, topo.HasKubeconfigs())
	}

	// Written out again, in Istio's format (every field) and, where no cluster has a config
	// cluster of its own, in ambientmc's YAML, it reads back the same.
	var istio []istioCluster
	sameConfig := true
	for _, c := range topo.Clusters {
		ic := istioCluster{ClusterName: c.Name, Network: c.Network, PrimaryClusterName: c.Primary, ConfigClusterName: c.Config}
		if c.Kubeconfig != "" {
			ic.Meta = map[string]any{"kubeconfig": c.Kubeconfig}
		}
		istio = append(istio, ic)
		sameConfig = sameConfig && c.Config == c.Primary
	}
	js, err := json.Marshal(istio)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, topo, js)
	if !sameConfig {
		return
	}
	var ambient struct {
		Clusters []ambientCluster `json:"clusters"`
	}
	for _, c := range topo.Clusters {
		ambient.Clusters = append(ambient.Clusters, ambientCluster{Name: c.Name, Network: c.Network, Primary: c.Primary, Kubeconfig: c.Kubeconfig})
	}
	ym, err := yaml.Marshal(ambient)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, topo, ym)
}

// checkKeys: every key of an accepted file is one of its format's, spelled as the format does.
func checkKeys(t *testing.T, data []byte) {
	t.Helper()
	var clusters []map[string]any
	known := []string{"name", "network", "primary", "kubeconfig"}
	if trimmed := bytes.TrimSpace(data); trimmed[0] == '[' {
		if err := json.Unmarshal(data, &clusters); err != nil {
			t.Fatal(err)
		}
		known = []string{"kind", "clusterName", "podSubnet", "svcSubnet", "network", "primaryClusterName", "configClusterName", "meta", "httpProxy", "proxyKubectlOnly"}
	} else {
		js, err := yaml.YAMLToJSON(data)
		if err != nil {
			t.Fatal(err)
		}
		var file map[string][]map[string]any
		if err := json.Unmarshal(js, &file); err != nil {
			t.Fatal(err)
		}
		for k := range file {
			if k != "clusters" {
				t.Errorf("top-level key %q accepted", k)
			}
		}
		clusters = file["clusters"]
	}
	for i, c := range clusters {
		for k := range c {
			if !slices.Contains(known, k) {
				t.Errorf("cluster %d: key %q accepted", i, k)
			}
		}
	}
}

func roundTrip(t *testing.T, want *Topology, data []byte) {
	t.Helper()
	got, err := Parse(data, want.Source)
	if err != nil {
		t.Fatalf("written out as\n%s\nit does not parse: %v", data, err)
	}
	if !reflect.DeepEqual(got.Clusters, want.Clusters) {
		t.Errorf("written out as\n%s\nit reads back as\n%+v\nwant\n%+v", data, got.Clusters, want.Clusters)
	}
}
