package multicluster

import (
	"context"
	"testing"

	"github.com/ambientmc/ambientmc/framework/istiodcheck"
	"github.com/ambientmc/ambientmc/framework/join"
	"github.com/ambientmc/ambientmc/framework/subtest"
)

// TestIstiodProperties asserts what a correct istiod does where the suites have met istiod faults.
// Each outcome goes through istiodcheck's known-issues table: a known fault on a listed version is
// skipped and recorded, anything else that fails fails. Every check but those of the data plane
// runs an isolated istiod of its own for the observed cluster (istiodcheck.Isolated), touching
// neither the suite's istiods nor its membership. The two that read istiod's live heap run first,
// together, while nothing else changes the clusters: another check's namespaces, pods and secrets
// would land in the heap they read. What each writes that the other's istiod sees is one
// namespace per cluster, made at its start and deleted at its end: a few KB against bounds of
// 1 MB and of a twentieth of a remote cluster. The other isolated ones then run at once
// (istiodcheck.Concurrently: all of them, not t.Parallel's two at a time). The data-plane two,
// which share the suite's mesh, run last, alone: with four isolated istiods starting beside it,
// the suite's restarted istiod once never served the remote network again (docs/findings.md).
func TestIstiodProperties(t *testing.T) {
	if len(mc.Clusters) < 2 {
		t.Skip("the istiod checks need two clusters")
	}
	ctx := mc.Context(t)
	r := checks()
	t.Cleanup(func() { mc.Report.IstiodChecks = append(mc.Report.IstiodChecks, r.Rows()...) })
	obs := mc.observed()
	other := istiodcheck.OtherCluster(mc.Clusters, obs)
	subtest.Concurrently(t,
		subtest.Case{Name: istiodcheck.MemoryComesBack, Run: func(t *testing.T) { r.MemoryComesBack(t, ctx, obs) }},
		subtest.Case{Name: istiodcheck.RotationNoLeak, Run: func(t *testing.T) { r.RotationNoLeak(t, ctx, obs, other) }},
	)
	subtest.Concurrently(t,
		subtest.Case{Name: istiodcheck.MidSyncDeletion, Run: func(t *testing.T) { r.MidSyncDeletion(t, ctx, obs, other) }},
		subtest.Case{Name: istiodcheck.RejoinLongLived, Run: func(t *testing.T) { r.RejoinLongLived(t, ctx, obs, other) }},
		subtest.Case{Name: istiodcheck.RemoteOutage, Run: func(t *testing.T) { r.RemoteOutage(t, ctx, obs, other) }},
		subtest.Case{Name: istiodcheck.SyncStatusTruth, Run: func(t *testing.T) { r.SyncStatusTruth(t, ctx, obs, other) }},
	)
	t.Run(istiodcheck.TrafficDuringRotation, func(t *testing.T) {
		d := dataPath(t, ctx)
		// The rotations can leave istiod serving nothing of the remote until its secret changes
		// again (the in-place rotation race): the remote leaves the mesh at the end, so whichever
		// test needs it next joins it afresh instead of meeting what the race left.
		leaveAtEnd(t, d.Target.Name)
		r.TrafficDuringRotation(t, ctx, d)
	})
	t.Run(istiodcheck.TrafficDuringRestart, func(t *testing.T) { r.TrafficDuringRestart(t, ctx, dataPath(t, ctx)) })
}

// checks is the run as the istiod checks reach it.
func checks() *istiodcheck.Run {
	version := ""
	if mc.Istiod != nil {
		version = mc.Istiod.ModuleVersion
	}
	return &istiodcheck.Run{
		Clusters: mc.Clusters, Scale: mc.scale, Expect: expect(), Join: joinOptions(),
		Rotations: mc.opts.Checks.Rotations, Remotes: mc.opts.Checks.Clusters, IstiodVersion: version,
		CAs: mc.mesh.Intermediates, ExtraIstiod: extraIstiod, RunContext: mc.RunContext, Logf: mc.Logf,
		Profile: func(i join.Istiod, when string) []string { return mc.Profile(i, when) },
	}
}

// dataPath is the probes' path to the other probe cluster, for the traffic checks.
func dataPath(t *testing.T, ctx context.Context) istiodcheck.DataPath {
	p := dataPlane(t, ctx)
	target, app := p.other()
	d := istiodcheck.DataPath{
		Probes: p, Local: p.local, Istiod: mc.mesh.Istiods[p.local.Name], Target: target, App: app,
		RotateSecret: func(ctx context.Context) error { return mc.mesh.RotateSecret(ctx, target.Name) },
	}
	if mc.mesh.Restartable(p.local.Name) {
		d.RestartIstiod = func(ctx context.Context) error { return mc.mesh.RestartIstiod(ctx, p.local.Name) }
	}
	return d
}
