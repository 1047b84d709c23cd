package report

import (
	"fmt"
)

// Results of an istiod property check.
const (
	CheckPass       = "pass"
	CheckFail       = "fail"
	CheckKnownIssue = "known-issue"
)

// IstiodCheck is the outcome of one istiod property check, after the known-issues table.
type IstiodCheck struct {
	Name   string `json:"name"`
	Result string `json:"result"` // pass, fail or known-issue
	// Reference is the upstream issue a known-issue (or an out-of-date table entry) names.
	Reference string `json:"reference,omitempty"`
	Detail    string `json:"detail"`
	// Istiod is the istiod (and version) the check ran against.
	IstiodVersion string `json:"istiodVersion,omitempty"`

	// The figures a check measured; absent when it does not measure them.
	Rotation *RotationFigures `json:"rotation,omitempty"`
	Traffic  *TrafficFigures  `json:"traffic,omitempty"`
	// ReconvergeSeconds is how long the ztunnel-like clients took to hold again what they held,
	// from the moment istiod was ready again (restart) or the remote was reachable again (outage).
	ReconvergeSeconds *float64 `json:"reconvergeSeconds,omitempty"`
	// ChangeSeenSeconds is how long after the remote API server came back a change made during
	// its outage reached the clients.
	ChangeSeenSeconds *float64 `json:"changeSeenSeconds,omitempty"`
	// Status is what istiod's sync status said against what the framework knew.
	Status *StatusFigures `json:"status,omitempty"`
	// Profiles are the profile files that bear on the check, relative to the report directory.
	Profiles []string `json:"profiles,omitempty"`
	// Evidence names what the check saw that tells one fault from another (istiodcheck's
	// Evidence*): a failure is a known issue only when it shows that issue's signature.
	Evidence []string `json:"evidence,omitempty"`
}

// Expected outcomes and verdicts of a control run.
const (
	ControlMustPass   = "must-pass"
	ControlMustFail   = "must-fail"
	ControlAsExpected = "as-expected"
	ControlUnexpected = "unexpected"
)

// IstiodCheckControl is one run of a check whose outcome was known before it ran: with a fault
// injected (must-fail) or with the fault absent (must-pass). It shows the check can say either.
type IstiodCheckControl struct {
	Check  string `json:"check"`
	Expect string `json:"expect"` // must-pass or must-fail
	// Fault is what was injected, or how the fault was kept away.
	Fault string `json:"fault"`
	// Outcome is what the check said, before any known-issue table: pass or fail.
	Outcome string `json:"outcome"`
	Verdict string `json:"verdict"` // as-expected or unexpected
	Detail  string `json:"detail"`
	// IstiodVersion is the istiod the control ran against.
	IstiodVersion string `json:"istiodVersion,omitempty"`
}

// RotationFigures are istiod's live heap and goroutines against the number of remote-secret
// rotations, with least-squares slopes per rotation.
type RotationFigures struct {
	Points                []RotationPoint `json:"points"`
	LiveHeapSlopeBytes    *float64        `json:"liveHeapSlopeBytes,omitempty"`
	LiveHeapSlopeStdErr   *float64        `json:"liveHeapSlopeStdErr,omitempty"`
	LiveHeapBoundBytes    *float64        `json:"liveHeapBoundBytes,omitempty"`
	GoroutineSlope        *float64        `json:"goroutineSlope,omitempty"`
	GoroutineSlopeStdErr  *float64        `json:"goroutineSlopeStdErr,omitempty"`
	GoroutineBound        *float64        `json:"goroutineBound,omitempty"`
	RemoteClusterLiveHeap *float64        `json:"remoteClusterLiveHeapBytes,omitempty"`
}

// RotationPoint is one reading after Rotations rotations (in place, then deleted and recreated).
type RotationPoint struct {
	Rotations     int     `json:"rotations"`
	Mode          string  `json:"mode"`
	LiveHeapBytes float64 `json:"liveHeapBytes"`
	Goroutines    float64 `json:"goroutines"`
}

// TrafficFigures are the requests a check sent through the data plane while it disturbed the mesh.
type TrafficFigures struct {
	IntervalSeconds   float64 `json:"intervalSeconds"`
	Requests          int     `json:"requests"`
	Succeeded         int     `json:"succeeded"`
	LongestGapSeconds float64 `json:"longestGapSeconds"`
	// Failures describe the first failed requests: when, from the start, and why.
	Failures []string `json:"failures,omitempty"`
}

// StatusFigures compare istiod's sync status (the metric and /debug/clusterz) with what the
// framework knew, sampled through the check.
type StatusFigures struct {
	Samples int `json:"samples"`
	// Disagreements are stretches where istiod said something else for longer than AllowedSeconds.
	Disagreements  []string `json:"disagreements,omitempty"`
	AllowedSeconds float64  `json:"allowedSeconds"`
}

func validateChecks(cs []IstiodCheck) error {
	for i, c := range cs {
		switch c.Result {
		case CheckPass, CheckFail:
		case CheckKnownIssue:
			if c.Reference == "" {
				return fmt.Errorf("istiodChecks[%d] %q is a known-issue without a reference", i, c.Name)
			}
		default:
			return fmt.Errorf("istiodChecks[%d].result %q is not pass, fail or known-issue", i, c.Result)
		}
	}
	return nil
}

func validateControls(cs []IstiodCheckControl) error {
	for i, c := range cs {
		if c.Expect != ControlMustPass && c.Expect != ControlMustFail {
			return fmt.Errorf("istiodCheckControls[%d].expect %q is not %s or %s", i, c.Expect, ControlMustPass, ControlMustFail)
		}
		if c.Outcome != CheckPass && c.Outcome != CheckFail {
			return fmt.Errorf("istiodCheckControls[%d].outcome %q is not pass or fail", i, c.Outcome)
		}
		want := ControlUnexpected
		if (c.Expect == ControlMustPass) == (c.Outcome == CheckPass) {
			want = ControlAsExpected
		}
		if c.Verdict != want {
			return fmt.Errorf("istiodCheckControls[%d].verdict %q: a %s control whose outcome is %s is %s", i, c.Verdict, c.Expect, c.Outcome, want)
		}
	}
	return nil
}
