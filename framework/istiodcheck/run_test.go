package istiodcheck

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/expctx"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/xdswatch"
	"github.com/ambientmc/ambientmc/topology"
	"istio.io/istio/pkg/workloadapi"
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
	r := New(&expctx.Context{IstiodVersion: "v0.0.0-unlisted", Flags: &expctx.Options{}})
	row, v := r.decide(report.IstiodCheck{Name: MemoryComesBack, Detail: "grew", Profiles: []string{"heap.pprof"}}, false)
	assert.Equal(t, Fail, v.Result)
	assert.Equal(t, report.CheckFail, row.Result)
	assert.Equal(t, "v0.0.0-unlisted", row.IstiodVersion)
	assert.Contains(t, v.Message, "its istiod's profiles: heap.pprof")

	row, v = r.decide(report.IstiodCheck{Name: MemoryComesBack, Detail: "flat"}, true)
	assert.Equal(t, Pass, v.Result)
	assert.Equal(t, report.CheckPass, row.Result)

	r.IstiodVersion = istioPinned131 // listed as affected by istio/istio#61263
	row, v = r.decide(report.IstiodCheck{Name: MemoryComesBack, Detail: "grew", Evidence: []string{EvidenceHeapKept}}, false)
	assert.Equal(t, KnownIssue, v.Result)
	assert.Equal(t, "istio/istio#61263", row.Reference)

	// The same check failing another way (the krt debugger's count grew, not the heap) is not it.
	_, v = r.decide(report.IstiodCheck{Name: MemoryComesBack, Detail: "more collections", Evidence: []string{EvidenceKrtGrown}}, false)
	assert.Equal(t, Fail, v.Result)
}

// Every check has one control that must fail and one that must pass, and a control's verdict is
// what it expected against what the check said, whatever the known-issue table lists.
func TestEveryCheckHasBothControls(t *testing.T) {
	for _, check := range Checks {
		var expects []string
		for _, c := range ControlsOf(check) {
			expects = append(expects, c.Expect)
			assert.NotEmpty(t, c.Fault)
		}
		assert.ElementsMatch(t, []string{report.ControlMustFail, report.ControlMustPass}, expects, check)
	}
	assert.Len(t, Controls, 2*len(Checks), "no control of a check that does not exist")
}

func TestControlVerdicts(t *testing.T) {
	r := New(&expctx.Context{IstiodVersion: istioPinned131, Logf: t.Logf, Flags: &expctx.Options{}})
	mustFail := ControlsOf(MemoryComesBack)[0]
	require.Equal(t, report.ControlMustFail, mustFail.Expect)
	assert.Equal(t, report.ControlAsExpected, r.recordControl(&mustFail, false, "kept").Verdict)
	assert.Equal(t, report.ControlUnexpected, r.recordControl(&mustFail, true, "flat").Verdict, "a must-fail control that passed: the check cannot see the fault")
	rows := r.ControlRows()
	require.Len(t, rows, 2)
	assert.Equal(t, report.CheckFail, rows[0].Outcome)
	assert.Equal(t, istioPinned131, rows[0].IstiodVersion)

	ran := []report.IstiodCheck{{Name: MemoryComesBack}, {Name: RejoinLongLived}}
	missing := MissingControls(ran, rows)
	assert.Len(t, missing, 3, "memory's must-pass and both of the rejoin's: %v", missing)
	assert.Contains(t, missing[0], MemoryComesBack)
}

// The checks' own runs stand as their must-pass controls where no known issue lists the istiod,
// and only there.
func TestOwnRunIsTheMustPassControlWhereUnlisted(t *testing.T) {
	r := New(&expctx.Context{IstiodVersion: istioPinned131, Logf: t.Logf, Flags: &expctx.Options{Checks: expctx.Checks{Controls: true}}})
	assert.True(t, r.listed(MemoryComesBack))
	assert.False(t, r.listed(RejoinLongLived))
	t.Run("rejoin", func(t *testing.T) {
		r.verdict(t, nil, report.IstiodCheck{Name: RejoinLongLived, Detail: "fine"}, true)
	})
	rows := r.ControlRows()
	require.Len(t, rows, 1)
	assert.Equal(t, string(FaultNone), rows[0].Fault)
	assert.Equal(t, report.ControlAsExpected, rows[0].Verdict)
}

func TestLines(t *testing.T) {
	assert.Equal(t, "first", firstLine("first\nsecond", 10))
	assert.Equal(t, "abc...", firstLine("abcdef", 3))
	assert.Equal(t, "last", lastLine("one\ntwo\nlast\n"))
}

// A withdrawal is every resource of the remote leaving a stream's state; one of several leaving,
// or the local cluster's, is not.
func TestCountWithdrawals(t *testing.T) {
	wl := func(uid, clusterID, network string) *workloadapi.Address {
		return &workloadapi.Address{Type: &workloadapi.Address_Workload{Workload: &workloadapi.Workload{Uid: uid, ClusterId: clusterID, Network: network}}}
	}
	local := &cluster.Cluster{Cluster: topology.Cluster{Name: "cluster-1", Network: "network-1"}}
	remote := &cluster.Cluster{Cluster: topology.Cluster{Name: "cluster-2", Network: "network-2"}}
	w := xdswatch.Holding("cluster-1", map[string]*workloadapi.Address{
		"a": wl("a", "cluster-2", "network-2"), "b": wl("b", "cluster-2", "network-2"), "l": wl("l", "cluster-1", "network-1")})
	withdrawals := countWithdrawals(w, ofRemote(local, remote))
	w.Drop(func(name string, _ *workloadapi.Address) bool { return name == "a" || name == "l" })
	w.Drop(nil)
	w.Drop(func(name string, _ *workloadapi.Address) bool { return name == "b" })
	assert.Equal(t, 1, withdrawals(), "the remote was withdrawn once: when its last workload left")
}
