// Package istiodcheck decides what an istiod property check's outcome means for the istiod that
// ran: a pass, a failure, or an upstream fault this table already knows about.
package istiodcheck

import (
	"fmt"
	"strings"
)

// Check names, as the suite's subtests and the report name them.
const (
	MemoryComesBack    = "memory comes back"
	MidSyncDeletion    = "a deletion mid-sync does not wedge"
	RejoinLongLived    = "a rejoin reaches long-lived streams"
	istioPinned131     = "v0.0.0-20260827124520-eed52ebb66ad" // release-1.31 of 2026-08-27, go.mod's pin
	istioRelease130Aug = "v0.0.0-20260826214018-9739e10eb9d7" // release-1.30 of 2026-08-26
)

// Known is one upstream fault a check reproduces on the istiod versions listed.
type Known struct {
	Check     string
	Reference string // e.g. istio/istio#61263
	// Affected lists istio.io/istio module versions, or prefixes ending in "*", known to fail.
	Affected []string
	// Why says what was verified, for the reader of the table.
	Why string
}

// Table is what was verified against the pinned sources (read under the module cache) and by
// running the checks; a version appears here only once a check has failed on it.
var Table = []Known{
	{
		Check:     MemoryComesBack,
		Reference: "istio/istio#61263",
		Affected:  []string{istioPinned131},
		Why: "pkg/kube/krt/debug.go of the pinned 1.31 only appends to DebugHandler.debugCollections, so every " +
			"collection a remote cluster built stays registered (and reachable) after it leaves; the release-1.30 " +
			istioRelease130Aug + " has the fix (#61314: a map keyed by collection uid and maybeUnregisterCollectionFromDebugger)",
	},
}

// Result of a check after the table was consulted.
type Result string

const (
	Pass       Result = "pass"
	Fail       Result = "fail"
	KnownIssue Result = "known-issue"
)

// Verdict is what the suite logs, records and acts on (a KnownIssue is skipped, a Fail fails).
type Verdict struct {
	Result    Result
	Reference string
	Message   string
}

// Judge turns a check's outcome on istiod version into a verdict using table: a failure on a
// listed version is the known issue reproduced; a failure elsewhere fails; a pass on a listed
// version fails too, because the table no longer says what this istiod does.
func Judge(table []Known, check, version string, passed bool, detail string) Verdict {
	var k *Known
	for i := range table {
		if table[i].Check == check && affects(table[i].Affected, version) {
			k = &table[i]
			break
		}
	}
	switch {
	case k == nil && passed:
		return Verdict{Result: Pass, Message: detail}
	case k == nil:
		return Verdict{Result: Fail, Message: fmt.Sprintf("%s on istiod %s: %s", check, version, detail)}
	case passed:
		return Verdict{Result: Fail, Reference: k.Reference, Message: fmt.Sprintf(
			"known-issue table out of date: %s passed on istiod %s, which the table lists as affected by %s: %s",
			check, version, k.Reference, detail)}
	default:
		return Verdict{Result: KnownIssue, Reference: k.Reference, Message: fmt.Sprintf(
			"known istiod issue reproduced: %s (%s on istiod %s): %s", k.Reference, check, version, detail)}
	}
}

// affects says whether version matches one of the listed versions or "prefix*" patterns.
func affects(list []string, version string) bool {
	for _, v := range list {
		if p, ok := strings.CutSuffix(v, "*"); ok && strings.HasPrefix(version, p) || v == version {
			return true
		}
	}
	return false
}
