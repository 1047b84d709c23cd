package istiodcheck

import (
	"fmt"
	"slices"

	"github.com/ambientmc/ambientmc/framework/report"
)

// A Control is a run of a check whose outcome is known before it runs: with a fault the framework
// injects it must fail, with the fault kept away it must pass. Controls show that a check which
// says pass would have said fail had the fault been there, and the other way round; their outcome
// is the check's own, before any known-issue table.
type Control struct {
	Check  string
	Expect string // report.ControlMustPass or report.ControlMustFail
	Fault  Fault
}

// Fault is what a control injects or keeps away; its text is what the report says of it.
type Fault string

// Faults the controls inject (their checks must fail) or the ways they keep a fault away (their
// checks must pass), on any istiod.
const (
	// FaultRemoteKept: in the measured cycle of MemoryComesBack, one remote's secret is not removed,
	// so a whole remote cluster's memory stays.
	FaultRemoteKept Fault = "one remote cluster is left joined when the others leave"
	// FaultFixedIstiod: MemoryComesBack on release-1.30, which has the fix for istio/istio#61263.
	FaultFixedIstiod Fault = "none: the check on release-1.30, which has the krt debugger's fix (istio/istio#61314)"
	// FaultRemotePerRotation: each rotation of RotationNoLeak also joins the remote under one more
	// cluster ID, so each leaves a whole remote cluster's state behind.
	FaultRemotePerRotation Fault = "each rotation leaves one more copy of the remote joined"
	// FaultUnchangedKubeconfig: the rotations rewrite the secret with the kubeconfig it holds (a
	// label changes), which istiod takes up without rebuilding the cluster
	// (pkg/kube/multicluster/secretcontroller.go: "skipping update (kubeconfig are identical)").
	FaultUnchangedKubeconfig Fault = "none: the rotations keep the kubeconfig, so istiod does not rebuild the remote"
	// FaultStalledTransfer: the remote API server's answers stop mid-transfer and never resume, as
	// a blackholed connection would.
	FaultStalledTransfer Fault = "the remote API server's transfer stalls mid-sync and never resumes"
	// FaultDroppedRejoin: the long-lived stream's client drops what istiod sends of the rejoined
	// remote, as a stream that lost the event would.
	FaultDroppedRejoin Fault = "the long-lived stream drops the rejoined remote's resources"
	// FaultForgottenDuringOutage: the client forgets the remote during the outage, as if istiod
	// had dropped its state.
	FaultForgottenDuringOutage Fault = "the client's view of the remote is emptied during the outage"
	// FaultRecreatedSecret: SyncStatusTruth's rotation deletes and recreates the secret instead of
	// updating it in place (the in-place update is what reports closed).
	FaultRecreatedSecret Fault = "none: the secret is deleted and recreated instead of rotated in place"
	// FaultRemoteRemoved: instead of rotating the target's secret, it is deleted: the target
	// leaves the mesh, and requests to a service only it serves fail.
	FaultRemoteRemoved Fault = "the remote's secret is deleted instead of rotated"
	// FaultNotRestarted: istiod is killed and started again only after the check's window.
	FaultNotRestarted Fault = "istiod is killed and not started again within the window"
	// FaultNone: the check as it runs, on an istiod the known-issue table does not list for it.
	FaultNone Fault = "none: the check itself, on an istiod not listed as affected"
)

// Controls is every check's pair: one that must fail, one that must pass. The must-pass of a check
// that no known issue lists for the istiod under test is the check's own run (FaultNone).
var Controls = []Control{
	{MemoryComesBack, report.ControlMustFail, FaultRemoteKept},
	{MemoryComesBack, report.ControlMustPass, FaultFixedIstiod},
	{RotationNoLeak, report.ControlMustFail, FaultRemotePerRotation},
	{RotationNoLeak, report.ControlMustPass, FaultUnchangedKubeconfig},
	{MidSyncDeletion, report.ControlMustFail, FaultStalledTransfer},
	{MidSyncDeletion, report.ControlMustPass, FaultNone},
	{RejoinLongLived, report.ControlMustFail, FaultDroppedRejoin},
	{RejoinLongLived, report.ControlMustPass, FaultNone},
	{RemoteOutage, report.ControlMustFail, FaultForgottenDuringOutage},
	{RemoteOutage, report.ControlMustPass, FaultNone},
	{SyncStatusTruth, report.ControlMustFail, FaultStalledTransfer},
	{SyncStatusTruth, report.ControlMustPass, FaultRecreatedSecret},
	{TrafficDuringRotation, report.ControlMustFail, FaultRemoteRemoved},
	{TrafficDuringRotation, report.ControlMustPass, FaultUnchangedKubeconfig},
	{TrafficDuringRestart, report.ControlMustFail, FaultNotRestarted},
	{TrafficDuringRestart, report.ControlMustPass, FaultNone},
}

// Checks names every check, in the order the suite runs them.
var Checks = []string{MemoryComesBack, RotationNoLeak, MidSyncDeletion, RejoinLongLived, RemoteOutage, SyncStatusTruth, TrafficDuringRotation, TrafficDuringRestart}

// ControlsOf are check's controls.
func ControlsOf(check string) []Control {
	var out []Control
	for _, c := range Controls {
		if c.Check == check {
			out = append(out, c)
		}
	}
	return out
}

// Name is the control's subtest name.
func (c Control) Name() string { return fmt.Sprintf("control %s: %s", c.Expect, c.Fault) }

// is says whether this run injects f (nil: a check's own run injects nothing).
func (c *Control) is(f Fault) bool { return c != nil && c.Fault == f }

// recordControl keeps a control's outcome and says whether it was the expected one.
func (r *Run) recordControl(c *Control, passed bool, detail string) report.IstiodCheckControl {
	row := report.IstiodCheckControl{Check: c.Check, Expect: c.Expect, Fault: string(c.Fault), Outcome: report.CheckFail,
		Verdict: report.ControlUnexpected, Detail: detail, IstiodVersion: r.IstiodVersion}
	if passed {
		row.Outcome = report.CheckPass
	}
	if passed == (c.Expect == report.ControlMustPass) {
		row.Verdict = report.ControlAsExpected
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.controls = append(r.controls, row)
	return row
}

// ControlRows are the controls' outcomes so far, for the report.
func (r *Run) ControlRows() []report.IstiodCheckControl {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.controls)
}

// MissingControls names the controls of checks that ran (rows) but whose control did not
// (controls): with controls on, every check that gave a verdict has both.
func MissingControls(rows []report.IstiodCheck, controls []report.IstiodCheckControl) []string {
	var missing []string
	for _, row := range rows {
		for _, c := range ControlsOf(row.Name) {
			if !slices.ContainsFunc(controls, func(got report.IstiodCheckControl) bool {
				return got.Check == c.Check && got.Expect == c.Expect
			}) {
				missing = append(missing, fmt.Sprintf("%s: %s", c.Check, c.Name()))
			}
		}
	}
	return missing
}
