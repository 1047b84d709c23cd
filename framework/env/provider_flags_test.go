package env

import (
	"encoding/json"
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/topology"
)

func TestIstioPlatformFlag(t *testing.T) {
	require.NotNil(t, flag.CommandLine.Lookup("istio.platform"), "-istio.platform on the suite's flag set")
	for _, tc := range []struct {
		name, provider, platform string
		want                     string
	}{
		{"unknown name", "kube", "eks", "-istio.platform=eks: not one of Istio's platforms (gke, k3d, k3s, microk8s, minikube, openshift)"},
		{"not the kube provider", "local", "gke", "-istio.platform=gke: only -provider=kube installs onto other platforms; -provider=local clusters need no platform settings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := setupWith(t, flagsWith(func(f *Flags) { f.Clusters = 1; f.Provider = tc.provider; f.IstioPlatform = tc.platform }))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	f := flagsWith(func(f *Flags) { f.Provider = "kube"; f.IstioPlatform = "openshift" })
	assert.NoError(t, f.ProviderFlags.validateFor("kube"))
}

// platformProvider stands in for the kube provider's Platform method; nothing else is called.
type platformProvider struct {
	cluster.Provider
	chosen map[string][2]string
}

func (p platformProvider) Platform(c string) (string, string) { return p.chosen[c][0], p.chosen[c][1] }

// The report records each cluster's platform in camelCase and leaves it out where there is none.
func TestReportRecordsThePlatform(t *testing.T) {
	topo, err := topology.Generate(2)
	require.NoError(t, err)
	e := &Env{Report: newReport("kube", topo), Provider: platformProvider{chosen: map[string][2]string{
		"cluster-1": {"gke", "server version v1.33.5-gke.1201000"},
	}}}
	recordPlatforms(e)
	data, err := json.Marshal(e.Report.Topology)
	require.NoError(t, err)
	assert.JSONEq(t, `{"clusters":[
		{"name":"cluster-1","network":"network-1","primary":true,"platform":"gke","platformFrom":"server version v1.33.5-gke.1201000"},
		{"name":"cluster-2","network":"network-2","primary":true}]}`, string(data))
}
