package multicluster

import (
	"fmt"
	"testing"

	"github.com/ambientmc/ambientmc/framework/experiment"
	"github.com/ambientmc/ambientmc/framework/istiodcheck"
	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/framework/subtest"
)

// The two heap checks together, as long as the longer (the memory check joins and leaves its
// clusters twice; the rotation check rotates 2n+1 times, reading the live heap after each), then
// the isolated rest at once, as long as the longest (four mid-sync deletions on fresh istiods, or
// the slowed sync), then the data-plane two (traffic through n rotations, then through an istiod
// restart). With -checks.controls each group runs again with its controls: the heap pair, the
// isolated four (a failing control waits out its window, at least 10 s, beyond its check), each
// data-plane check twice more (its restart control waits out the window too).
var _ = planned.Add("TestIstiodProperties", []plan.Need[experiment.PlanIn]{experiment.NeedTwoClusters}, func(in experiment.PlanIn) plan.Item {
	c := in.O.Checks.Clusters
	if c == 0 || c > in.Remotes {
		c = in.Remotes
	}
	n, pods := float64(in.O.Checks.Rotations), in.Pods
	memory := 5 + float64(c)*(5.5+pods/250)
	rotation := 5 + pods/1000 + (2*n+1)*(5.8+pods/1000*4)
	midSync := 2 * (10 + pods/1000*21) // the slowed sync grows with the pods; the canaries wait out its rest
	truth := 18.9
	traffic := in.DataPlane + 2 + n*3.5
	restart := 6 + pods/1000*2
	expected := max(memory, rotation) + max(midSync, truth) + traffic + restart
	detail := fmt.Sprintf("at once: memory over %d remote clusters and 2 x %d rotations; then at once: 4 mid-sync deletions, a rejoin, an outage, a slowed sync; then traffic through rotations and a restart", c, in.O.Checks.Rotations)
	if in.O.Checks.Controls {
		floor := istiodcheck.WindowFloor.Seconds()
		expected += max(memory, rotation) + max(midSync, truth) + floor + 2*traffic + restart + floor
		detail += "; each with its controls"
	}
	return plan.Item{Expected: experiment.S(expected), Detail: detail}
})

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
	ctx := mc.Begin(t)
	r := mc.Checks()
	t.Cleanup(func() {
		mc.Report.IstiodChecks = append(mc.Report.IstiodChecks, r.Rows()...)
		mc.Report.IstiodCheckControls = append(mc.Report.IstiodCheckControls, r.ControlRows()...)
	})
	obs := mc.ObservedCluster()
	other := istiodcheck.OtherCluster(mc.Clusters, obs)
	check := func(name string, run func(t *testing.T, ctl *istiodcheck.Control)) subtest.Case {
		return subtest.Case{Name: name, Run: func(t *testing.T) { run(t, nil) }}
	}
	memory := func(t *testing.T, ctl *istiodcheck.Control) { r.MemoryComesBack(t, ctx, obs, ctl) }
	rotation := func(t *testing.T, ctl *istiodcheck.Control) { r.RotationNoLeak(t, ctx, obs, other, ctl) }
	midSync := func(t *testing.T, ctl *istiodcheck.Control) { r.MidSyncDeletion(t, ctx, obs, other, ctl) }
	rejoin := func(t *testing.T, ctl *istiodcheck.Control) { r.RejoinLongLived(t, ctx, obs, other, ctl) }
	outage := func(t *testing.T, ctl *istiodcheck.Control) { r.RemoteOutage(t, ctx, obs, other, ctl) }
	truth := func(t *testing.T, ctl *istiodcheck.Control) { r.SyncStatusTruth(t, ctx, obs, other, ctl) }
	subtest.Concurrently(t, check(istiodcheck.MemoryComesBack, memory), check(istiodcheck.RotationNoLeak, rotation))
	controls(t, true, controlled{istiodcheck.MemoryComesBack: memory, istiodcheck.RotationNoLeak: rotation})
	subtest.Concurrently(t, check(istiodcheck.MidSyncDeletion, midSync), check(istiodcheck.RejoinLongLived, rejoin),
		check(istiodcheck.RemoteOutage, outage), check(istiodcheck.SyncStatusTruth, truth))
	controls(t, true, controlled{istiodcheck.MidSyncDeletion: midSync, istiodcheck.RejoinLongLived: rejoin,
		istiodcheck.RemoteOutage: outage, istiodcheck.SyncStatusTruth: truth})
	rotationTraffic := func(t *testing.T, ctl *istiodcheck.Control) {
		d := mc.DataPath(t, ctx)
		// The rotations can leave istiod serving nothing of the remote until its secret changes
		// again (the in-place rotation race), and a control takes it out: the remote leaves the
		// mesh at the end, so whichever test needs it next joins it afresh.
		mc.LeaveAtEnd(t, d.Target.Name)
		r.TrafficDuringRotation(t, ctx, d, ctl)
	}
	restart := func(t *testing.T, ctl *istiodcheck.Control) { r.TrafficDuringRestart(t, ctx, mc.DataPath(t, ctx), ctl) }
	// The data-plane two share the suite's mesh: one after the other, each with its controls.
	t.Run(istiodcheck.TrafficDuringRotation, func(t *testing.T) { rotationTraffic(t, nil) })
	controls(t, false, controlled{istiodcheck.TrafficDuringRotation: rotationTraffic})
	t.Run(istiodcheck.TrafficDuringRestart, func(t *testing.T) { restart(t, nil) })
	controls(t, false, controlled{istiodcheck.TrafficDuringRestart: restart})
	if mc.Opts.Checks.Controls {
		if missing := istiodcheck.MissingControls(r.Rows(), r.ControlRows()); len(missing) > 0 {
			t.Errorf("checks without a control that shows they can fail or pass: %v", missing)
		}
	}
}

// controlled are checks by name, each run with the control it is given.
type controlled map[string]func(t *testing.T, ctl *istiodcheck.Control)

// controls runs the controls of the checks given (with -checks.controls), all at once or one after
// another: each is its check with a fault injected or kept away (istiodcheck.Controls). The
// must-pass control of a check that no known issue lists is the check's own run, recorded there.
func controls(t *testing.T, atOnce bool, runs controlled) {
	if !mc.Opts.Checks.Controls {
		return
	}
	var cases []subtest.Case
	for _, check := range istiodcheck.Checks {
		run, ok := runs[check]
		if !ok {
			continue
		}
		for _, c := range istiodcheck.ControlsOf(check) {
			if c.Fault != istiodcheck.FaultNone {
				cases = append(cases, subtest.Case{Name: check + "/" + c.Name(), Run: func(t *testing.T) { run(t, &c) }})
			}
		}
	}
	if atOnce {
		subtest.Concurrently(t, cases...)
		return
	}
	for _, c := range cases {
		t.Run(c.Name, c.Run)
	}
}
