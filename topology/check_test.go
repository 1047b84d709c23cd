package topology

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var local = Capabilities{Provider: "local", MaxClusters: MaxClusters, MaxClustersReason: "its loopback address plan has room for 100"}

// Alternatives as the fixes see them: one as limited as local, one without a limit that builds
// remotes, one that builds everything.
var (
	capped   = Capabilities{Provider: "capped", MaxClusters: MaxClusters}
	remotes  = Capabilities{Provider: "remotes", Remotes: true}
	anything = Capabilities{Provider: "anything", Remotes: true, ExternalControlPlane: true}
)

func TestCheckLocalTooMany(t *testing.T) {
	var b strings.Builder
	b.WriteString("clusters:\n")
	for i := 1; i <= MaxClusters+1; i++ {
		fmt.Fprintf(&b, "- name: c%d\n", i)
	}
	topo, err := Parse([]byte(b.String()), "big.yaml")
	require.NoError(t, err, "Validate has no cluster limit; providers do")
	err = topo.Check(local, capped, remotes)
	require.Error(t, err)
	assert.Equal(t, "topology big.yaml: clusters: 101 clusters, but the local provider builds at most 100 (its loopback address plan has room for 100); use at most 100 clusters with -provider=local, or -provider=remotes for more", err.Error(),
		"only the alternative without the limit is suggested")
	err = topo.Check(local, capped)
	require.Error(t, err)
	assert.True(t, strings.HasSuffix(err.Error(), "use at most 100 clusters with -provider=local"), "no alternative builds more: %v", err)

	assert.NoError(t, topo.Check(Capabilities{Provider: "kube"}), "0 means no limit")
}

func TestCheckLocalRemote(t *testing.T) {
	topo, err := Parse([]byte(`[
  {"kind": "Kubernetes", "clusterName": "primary", "network": "network-1"},
  {"kind": "Kubernetes", "clusterName": "remote", "network": "network-1", "primaryClusterName": "primary"}
]`), "mc.json")
	require.NoError(t, err)
	err = topo.Check(local, capped, remotes, anything)
	require.Error(t, err)
	assert.Equal(t, `topology mc.json: [1].primaryClusterName: cluster "remote" is a remote of "primary"; the local provider builds primary clusters only; drop primaryClusterName or use -provider=remotes or -provider=anything`, err.Error())
	err = topo.Check(local, capped)
	require.Error(t, err)
	assert.True(t, strings.HasSuffix(err.Error(), "drop primaryClusterName"), "no alternative builds remotes: %v", err)
	assert.NoError(t, topo.Check(Capabilities{Provider: "kube", Remotes: true}))
}

func TestCheckLocalRemoteAmbientFormat(t *testing.T) {
	topo, err := Parse([]byte("clusters:\n- name: a\n- name: b\n  primary: a\n"), "t.yaml")
	require.NoError(t, err)
	err = topo.Check(local, remotes)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "topology t.yaml: clusters[1].primary: ")
	assert.Contains(t, err.Error(), "drop primary or use -provider=remotes")
}

func TestCheckExternalControlPlane(t *testing.T) {
	// Istio's external-istiod-multicluster.json, trimmed.
	topo, err := Parse([]byte(`[
  {"kind": "Kubernetes", "clusterName": "config", "network": "network-1", "primaryClusterName": "external", "configClusterName": "config"},
  {"kind": "Kubernetes", "clusterName": "remote", "network": "network-2", "primaryClusterName": "external", "configClusterName": "config", "meta": {"fakeVM": false}},
  {"kind": "Kubernetes", "clusterName": "external", "network": "network-1", "primaryClusterName": "external", "configClusterName": "config", "meta": {"fakeVM": false}}
]`), "ext.json")
	require.NoError(t, err)

	err = topo.Check(Capabilities{Provider: "local", MaxClusters: 50, Remotes: true}, remotes, anything)
	require.Error(t, err)
	assert.Equal(t, `topology ext.json: [2].configClusterName: cluster "external" is an external control plane (its config cluster is "config"); the local provider cannot build an external control plane; drop configClusterName or use -provider=anything`, err.Error())

	err = topo.Check(local)
	require.Error(t, err)
	msg := err.Error()
	assert.Contains(t, msg, `[0].primaryClusterName: cluster "config" is a remote of "external"`)
	assert.Contains(t, msg, `[1].primaryClusterName: cluster "remote" is a remote of "external"`)
	assert.Contains(t, msg, `[2].configClusterName: cluster "external" is an external control plane`)

	assert.NoError(t, topo.Check(Capabilities{Provider: "kube", Remotes: true, ExternalControlPlane: true}))
}

func TestErrorFormat(t *testing.T) {
	assert.Equal(t, "topology f.yaml: clusters[0].name: bad; fix it",
		(&Error{Source: "f.yaml", Field: "clusters[0].name", Problem: "bad", Fix: "fix it"}).Error())
	assert.Equal(t, "topology f.yaml: bad", (&Error{Source: "f.yaml", Problem: "bad"}).Error())
	assert.Equal(t, "topology: bad", (&Error{Problem: "bad"}).Error())
}

func TestCheckNeedsKubeconfigs(t *testing.T) {
	topo, err := Parse([]byte(`[
  {"kind": "Kubernetes", "clusterName": "a", "meta": {"kubeconfig": "/k/a"}},
  {"kind": "Kubernetes", "clusterName": "b"}
]`), "prow.json")
	require.NoError(t, err)
	kube := Capabilities{Provider: "kube", NeedsKubeconfigs: true}
	err = topo.Check(kube)
	require.Error(t, err)
	assert.Equal(t, `topology prow.json: [1].meta.kubeconfig: cluster "b" has no kubeconfig; the kube provider uses existing clusters: set meta.kubeconfig to the path of cluster "b"'s kubeconfig`, err.Error())
	assert.NoError(t, topo.Check(local), "the local provider makes its own")
}

func TestCheckKubeDoesNotSuggestItself(t *testing.T) {
	topo, err := Parse([]byte(`[
  {"kind": "Kubernetes", "clusterName": "primary", "meta": {"kubeconfig": "/k/p"}},
  {"kind": "Kubernetes", "clusterName": "remote", "primaryClusterName": "primary", "meta": {"kubeconfig": "/k/r"}}
]`), "mc.json")
	require.NoError(t, err)
	err = topo.Check(Capabilities{Provider: "kube", NeedsKubeconfigs: true})
	require.Error(t, err)
	assert.Equal(t, `topology mc.json: [1].primaryClusterName: cluster "remote" is a remote of "primary"; the kube provider builds primary clusters only; drop primaryClusterName`, err.Error())
}
