package env

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/topology"
)

// stubProvider answers Name and Facts (the data plane, and the platforms where set); nothing else
// is called.
type stubProvider struct {
	cluster.Provider
	name, dataPlane string
	platforms       map[string]cluster.Platform
}

func (p stubProvider) Name() string { return p.name }
func (p stubProvider) Facts() cluster.Facts {
	return cluster.Facts{DataPlane: p.dataPlane, Platforms: p.platforms}
}

// The report carries the provider's name and the data plane it declares, whatever the name, and
// validates.
func TestReportRecordsTheDeclaredDataPlane(t *testing.T) {
	topo, err := topology.Generate(1)
	require.NoError(t, err)
	r := newReport(stubProvider{name: "k3d", dataPlane: "ztunnel"}, topo)
	assert.Equal(t, "k3d", r.Provider)
	assert.Equal(t, "ztunnel", r.DataPlane)
	assert.NoError(t, r.Validate())
}

// The report records each cluster's platform in camelCase and leaves it out where there is none.
func TestReportRecordsThePlatform(t *testing.T) {
	topo, err := topology.Generate(2)
	require.NoError(t, err)
	p := stubProvider{name: "kube", dataPlane: "ztunnel", platforms: map[string]cluster.Platform{
		"cluster-1": {Name: "gke", From: "server version v1.33.5-gke.1201000"},
	}}
	e := &Env{Report: newReport(p, topo), Provider: p}
	recordPlatforms(e)
	data, err := json.Marshal(e.Report.Topology)
	require.NoError(t, err)
	assert.JSONEq(t, `{"clusters":[
		{"name":"cluster-1","network":"network-1","primary":true,"platform":"gke","platformFrom":"server version v1.33.5-gke.1201000"},
		{"name":"cluster-2","network":"network-2","primary":true}]}`, string(data))
}
