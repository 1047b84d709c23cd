package istiodcheck

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/topology"
)

func TestNamespaceOfIsADNSLabelUniquePerTest(t *testing.T) {
	assert.Equal(t, "amc-testistiodproperties-memory-comes-back", NamespaceOf("TestIstiodProperties/memory_comes_back"))
	long := NamespaceOf("TestIstiodProperties/a_deletion_mid-sync_does_not_wedge/attempt_1")
	other := NamespaceOf("TestIstiodProperties/a_deletion_mid-sync_does_not_wedge/attempt_2")
	assert.LessOrEqual(t, len(long), 63)
	assert.NotEqual(t, long, other, "subtests with a long shared prefix keep distinct namespaces")
	assert.Regexp(t, `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, long)
}

func TestOtherClusterPrefersAnotherNetwork(t *testing.T) {
	c := func(name, network string) *cluster.Cluster {
		return &cluster.Cluster{Cluster: topology.Cluster{Name: name, Network: network}}
	}
	a, b, d := c("a", "n1"), c("b", "n1"), c("d", "n2")
	assert.Equal(t, d, OtherCluster([]*cluster.Cluster{a, b, d}, a))
	assert.Equal(t, b, OtherCluster([]*cluster.Cluster{a, b}, a))
	assert.Nil(t, OtherCluster([]*cluster.Cluster{a}, a))
}

// decide goes through the known-issue table: the row carries the result, the reference and the
// istiod version, and a failure names the profiles kept.
func TestDecideRecordsTheTablesVerdict(t *testing.T) {
	r := &Run{IstiodVersion: "v0.0.0-unlisted"}
	row, v := r.decide(report.IstiodCheck{Name: MemoryComesBack, Detail: "grew", Profiles: []string{"heap.pprof"}}, false)
	assert.Equal(t, Fail, v.Result)
	assert.Equal(t, report.CheckFail, row.Result)
	assert.Equal(t, "v0.0.0-unlisted", row.IstiodVersion)
	assert.Contains(t, v.Message, "its istiod's profiles: heap.pprof")

	row, v = r.decide(report.IstiodCheck{Name: MemoryComesBack, Detail: "flat"}, true)
	assert.Equal(t, Pass, v.Result)
	assert.Equal(t, report.CheckPass, row.Result)

	r.IstiodVersion = istioPinned131 // listed as affected by istio/istio#61263
	row, v = r.decide(report.IstiodCheck{Name: MemoryComesBack, Detail: "grew"}, false)
	assert.Equal(t, KnownIssue, v.Result)
	assert.Equal(t, "istio/istio#61263", row.Reference)
}

func TestLines(t *testing.T) {
	assert.Equal(t, "first", firstLine("first\nsecond", 10))
	assert.Equal(t, "abc...", firstLine("abcdef", 3))
	assert.Equal(t, "last", lastLine("one\ntwo\nlast\n"))
}
