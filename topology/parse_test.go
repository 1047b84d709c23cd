package topology

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Istio's prow/config/topology/ambient-multicluster.json.
const istioAmbient = `[
  {"kind": "Kubernetes", "clusterName": "primary", "podSubnet": "10.10.0.0/16", "svcSubnet": "10.255.10.0/24", "network": "network-1", "meta": {"kubeconfig": "/tmp/work/config0"}},
  {"kind": "Kubernetes", "clusterName": "cross-network-primary", "podSubnet": "10.30.0.0/16", "svcSubnet": "10.255.30.0/24", "network": "network-2", "meta": {"kubeconfig": "/tmp/work/config1"}}
]`

func TestParseIstio(t *testing.T) {
	topo, err := Parse([]byte("\n  "+istioAmbient+"\n"), "ambient-multicluster.json")
	require.NoError(t, err)
	assert.Equal(t, "ambient-multicluster.json", topo.Source)
	assert.Equal(t, []Cluster{
		{Name: "primary", Network: "network-1", Primary: "primary", Config: "primary", Index: 1, Kubeconfig: "/tmp/work/config0"},
		{Name: "cross-network-primary", Network: "network-2", Primary: "cross-network-primary", Config: "cross-network-primary", Index: 2, Kubeconfig: "/tmp/work/config1"},
	}, topo.Clusters)
	assert.True(t, topo.HasKubeconfigs())
	assert.NoError(t, topo.Check(local))
}

func TestParseIstioRemoteAndAllFields(t *testing.T) {
	topo, err := Parse([]byte(`[
  {"kind": "Kubernetes", "clusterName": "primary", "podSubnet": "10.10.0.0/16", "svcSubnet": "10.255.10.0/24", "network": "network-1",
   "httpProxy": "http://proxy:3128", "proxyKubectlOnly": true},
  {"kind": "Kubernetes", "clusterName": "remote", "network": "network-1", "primaryClusterName": "primary", "meta": {"fakeVM": false, "other": {"x": 1}}},
  {"clusterName": "third"}
]`), "multicluster.json")
	require.NoError(t, err)
	remote, ok := topo.Get("remote")
	require.True(t, ok)
	assert.True(t, remote.IsRemote())
	assert.Equal(t, "primary", remote.Primary)
	assert.Empty(t, remote.Kubeconfig)
	third, _ := topo.Get("third")
	assert.Equal(t, "network-3", third.Network, "empty network defaults to network-<Index>")
	assert.Equal(t, []string{"network-1", "network-3"}, topo.Networks())
}

func TestParseAmbientYAML(t *testing.T) {
	topo, err := Parse([]byte(`# two primaries on one network, one remote
clusters:
- name: cluster-1
  network: net-a
  kubeconfig: /k/1
- name: cluster-2
  network: net-a
  primary: cluster-2
- name: cluster-3
  primary: cluster-1
`), "topo.yaml")
	require.NoError(t, err)
	assert.Equal(t, []Cluster{
		{Name: "cluster-1", Network: "net-a", Primary: "cluster-1", Config: "cluster-1", Index: 1, Kubeconfig: "/k/1"},
		{Name: "cluster-2", Network: "net-a", Primary: "cluster-2", Config: "cluster-2", Index: 2},
		{Name: "cluster-3", Network: "network-3", Primary: "cluster-1", Config: "cluster-1", Index: 3},
	}, topo.Clusters)
}

func TestParseAmbientJSON(t *testing.T) {
	topo, err := Parse([]byte(`{"clusters": [{"name": "a"}, {"name": "b", "network": "n"}]}`), "topo.json")
	require.NoError(t, err)
	require.Len(t, topo.Clusters, 2)
	assert.Equal(t, "n", topo.Clusters[1].Network)
	assert.Equal(t, "network-1", topo.Clusters[0].Network)
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "topo.yaml")
	require.NoError(t, os.WriteFile(path, []byte("clusters:\n- name: a\n"), 0o600))
	topo, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, path, topo.Source)
	assert.Equal(t, "a", topo.Clusters[0].Name)

	_, err = Load(filepath.Join(dir, "missing.yaml"))
	require.Error(t, err)
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), "missing.yaml")
	assert.Contains(t, err.Error(), "-topology")

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`[{"clusterName": "Bad_Name"}]`), 0o600))
	_, err = Load(bad)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "topology "+bad+": [0].clusterName: ")
}

// parseErrorCases are files Parse refuses, each with substrings of its error; FuzzParse starts
// from them too.
var parseErrorCases = []struct {
	name, src string
	want      []string // substrings of the error
}{
	{"empty file", "", []string{"topology f: clusters: no clusters; list at least one cluster"}},
	{"whitespace only", " \n\t\n", []string{"topology f: clusters: no clusters"}},
	{"comments only", "# nothing\n", []string{"topology f: clusters: no clusters"}},
	{"empty list", "clusters: []\n", []string{"topology f: clusters: no clusters"}},
	{"empty istio array", "[]", []string{"topology f: no clusters; add at least one cluster object"}},
	{"control character in a kubeconfig path", `[{"clusterName": "a", "meta": {"kubeconfig": "/k/\u007f"}}]`,
		[]string{`topology f: [0].meta.kubeconfig: kubeconfig path "/k/\x7f" holds a control character; set it to the kubeconfig file's path`}},
	{"malformed YAML", "clusters:\n- name: a\n  network: [x\n", []string{"topology f: invalid YAML: yaml: line"}},
	{"malformed YAML line", "\n\nclusters:\n- name: a\n bad: : x\n", []string{"topology f: invalid YAML: yaml: line 4"}},
	{"duplicate YAML key", "clusters:\n- name: a\n  name: b\n", []string{"topology f: invalid YAML:", `"name"`}},
	{"malformed istio JSON", "[\n  {\"clusterName\": \"a\",}\n]", []string{"topology f: invalid JSON at line 2, column 23: invalid character '}'"}},
	{"trailing data after istio JSON", `[{"clusterName": "a"}] x`, []string{"topology f: invalid JSON at line 1, column 24: invalid character 'x' after top-level value"}},
	{"scalar document", "hello\n", []string{"topology f: not a topology: the top level is a string"}},
	{"list at the top", "- name: a\n", []string{"topology f: not a topology: the top level is an array; write an object with a clusters list"}},
	{"top-level key in another case", "Clusters:\n- name: a\n", []string{`topology f: unknown field "Clusters"; the top level holds only clusters`}},
	{"cluster key in another case", "clusters:\n- name: a\n  Name: b\n", []string{`topology f: clusters[0]: unknown field "Name"; a cluster has only name, network, primary and kubeconfig`}},
	{"istio key in another case", `[{"ClusterName": "a"}]`, []string{`topology f: [0]: unknown field "ClusterName"; a cluster has only kind, clusterName`}},
	{"unknown top-level field", "clusters: []\ncluster: x\n", []string{`topology f: unknown field "cluster"; the top level holds only clusters`}},
	{"unknown cluster field", "clusters:\n- name: a\n- name: b\n  primaryClusterName: a\n", []string{`topology f: clusters[1]: unknown field "primaryClusterName"; a cluster has only name, network, primary and kubeconfig`}},
	{"clusters not a list", "clusters: a\n", []string{"topology f: clusters: got a string, want a list"}},
	{"cluster not an object", "clusters:\n- a\n", []string{"topology f: clusters[0]: got a string, want an object"}},
	{"YAML bool for a string", "clusters:\n- name: a\n  network: n\n", []string{"topology f: clusters[0].network: got a bool, want a string; write it as a string; in YAML, quote"}},
	{"name not a string", "clusters:\n- name: 3\n", []string{"topology f: clusters[0].name: got a number, want a string"}},
	{"unknown istio field", `[{"clusterName": "a"}, {"clusterName": "c", "zone": "x"}]`, []string{`topology f: [1]: unknown field "zone"; a cluster has only kind, clusterName`}},
	{"istio element not an object", `[1]`, []string{"topology f: [0]: got a number, want an object"}},
	{"istio kind", `[{"kind": "StaticVM", "clusterName": "vm"}]`, []string{`topology f: [0].kind: kind "StaticVM" is not supported`}},
	{"istio kubeconfig not a string", `[{"clusterName": "a", "meta": {"kubeconfig": 1}}]`, []string{"topology f: [0].meta.kubeconfig: kubeconfig is float64, want a string"}},
	{"missing name", "clusters:\n- network: net\n", []string{`topology f: clusters[0].name: missing cluster name; set name to a DNS-1123 label such as "cluster-1"`}},
	{"missing istio name", `[{"clusterName": "a"}, {"network": "n"}]`, []string{`topology f: [1].clusterName: missing cluster name; set clusterName to a DNS-1123 label such as "cluster-2"`}},
	{"upper-case name", "clusters:\n- name: Cluster1\n", []string{`topology f: clusters[0].name: cluster name "Cluster1" is not a DNS-1123 label; use at most 63`}},
	{"name too long", "clusters:\n- name: " + strings.Repeat("a", 64) + "\n", []string{"topology f: clusters[0].name: cluster name", "is not a DNS-1123 label"}},
	{"duplicate name", "clusters:\n- name: cluster-1\n- name: cluster-2\n- name: cluster-1\n", []string{`topology f: clusters[2].name: duplicate cluster name "cluster-1" (also clusters[0]); give every cluster a unique name`}},
	{"duplicate istio name", `[{"clusterName": "a"}, {"clusterName": "a"}]`, []string{`topology f: [1].clusterName: duplicate cluster name "a" (also [0])`}},
	{"bad network", "clusters:\n- name: a\n  network: 'net 1'\n", []string{`topology f: clusters[0].network: network "net 1" is not a valid label value`}},
	{"missing primary", "clusters:\n- name: a\n- name: b\n  primary: c\n", []string{`topology f: clusters[1].primary: primary cluster "c" not found; name a primary defined in this file, or remove primary to make "b" a primary`}},
	{"missing istio primary", `[{"clusterName": "a", "primaryClusterName": "x"}]`, []string{`topology f: [0].primaryClusterName: primary cluster "x" not found; name a primary defined in this file, or remove primaryClusterName`}},
	{"primary is a remote", "clusters:\n- name: a\n- name: b\n  primary: a\n- name: c\n  primary: b\n", []string{`topology f: clusters[2].primary: primary "b" is itself a remote (its primary is "a"); point primary at a primary`}},
	{"missing config cluster", `[{"clusterName": "a", "configClusterName": "cfg"}]`, []string{`topology f: [0].configClusterName: config cluster "cfg" not found; name a cluster defined in this file, or remove configClusterName`}},
}

// Each case names the file and the field path in its error.
func TestParseErrors(t *testing.T) {
	for _, tc := range parseErrorCases {
		t.Run(tc.name, func(t *testing.T) {
			topo, err := Parse([]byte(tc.src), "f")
			require.Error(t, err)
			assert.Nil(t, topo)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// Validate reports every problem at once, each as an *Error.
func TestParseReportsAllProblems(t *testing.T) {
	_, err := Parse([]byte("clusters:\n- name: A\n- name: b\n  primary: zz\n- name: b\n"), "topo.yaml")
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	assert.Len(t, lines, 3, err.Error())
	assert.Contains(t, err.Error(), "topology topo.yaml: clusters[0].name: ")
	assert.Contains(t, err.Error(), "topology topo.yaml: clusters[2].name: duplicate")
	assert.Contains(t, err.Error(), "topology topo.yaml: clusters[1].primary: ")

	var te *Error
	require.ErrorAs(t, err, &te)
	assert.Equal(t, "topo.yaml", te.Source)
	assert.NotEmpty(t, te.Fix)
}

func TestValidateHandBuilt(t *testing.T) {
	err := (&Topology{Source: "test", Clusters: []Cluster{{Name: "a"}}}).Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "topology test: clusters[0]: index 0, want 1")

	err = (&Topology{Source: "test"}).Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "topology test: clusters: no clusters")
}

// The example files parse into the topologies their comments describe.
func TestExampleTopologies(t *testing.T) {
	for file, want := range map[string][]string{
		"examples/two-share-a-network.yaml": {"network-a", "network-a", "network-b"},
		"examples/one-network.yaml":         {"network-a", "network-a", "network-a"},
	} {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		topo, err := Parse(b, file)
		require.NoError(t, err, file)
		var got []string
		for _, c := range topo.Clusters {
			got = append(got, c.Network)
			assert.Equal(t, c.Name, c.Primary, "%s: every cluster a primary", file)
		}
		assert.Equal(t, want, got, file)
	}
}

// go test runs a suite in its package's directory: a path typed at the repository's root is found
// from the module root. The test runs in topology/, where the path below names nothing.
func TestLoadFindsARelativePathFromTheModuleRoot(t *testing.T) {
	const rel = "topology/examples/one-network.yaml"
	_, err := os.Stat(rel)
	require.ErrorIs(t, err, os.ErrNotExist, "the test needs a working directory below the module root")
	topo, err := Load(rel)
	require.NoError(t, err)
	assert.Len(t, topo.Clusters, 3)
	assert.True(t, filepath.IsAbs(topo.Source), "the report names the file it read: %s", topo.Source)

	_, err = Load("topology/examples/none.yaml")
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), "module root")
}
