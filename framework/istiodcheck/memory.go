package istiodcheck

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/join"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/report"
)

// Memory bound. After every remote cluster left, the live heap must be back at its baseline up to
// measurement noise, which the check measures on each run: two live-heap estimates of the idle
// baseline istiod, 5 s apart. The bound is the larger of memorySlackBytes and noiseFactor times
// that noise: below a small-scale remote cluster's cost, so it still catches a cluster's worth of
// memory that does not come back (docs/measurements.md#why-the-settings-are-what-they-are).
const (
	heapReadings     = 5
	memorySlackBytes = 1e6
	noiseFactor      = 3
)

// heapCheckEnv is the heap checks' istiod environment: without it, istiod's two remote-sync timers
// (PILOT_REMOTE_CLUSTER_TIMEOUT, 30 s) hold a removed cluster's informer caches and registry until
// 30 s after its join, so a reading taken sooner sees them (docs/findings.md#a-removed-cluster-is-held-until-its-sync-timer-fires).
// The checks ask whether memory comes back, not how long istiod holds it.
var heapCheckEnv = []string{"PILOT_REMOTE_CLUSTER_TIMEOUT=0s"}

// heapCheckNote says so in the checks' details.
const heapCheckNote = "istiod run with PILOT_REMOTE_CLUSTER_TIMEOUT=0s (its 30 s sync timers hold a removed cluster until they fire)"

// MemoryComesBack joins remote clusters to an isolated istiod of obs, lets them all leave, and
// checks that its live heap came back to where it was. ctl is nil, or the control to run.
func (r *Run) MemoryComesBack(t *testing.T, ctx context.Context, obs *cluster.Cluster, ctl *Control) {
	version := ""
	if ctl.is(FaultFixedIstiod) {
		version = IstioRelease130
	}
	istiod := r.IsolatedOf(t, ctx, obs, version, heapCheckEnv...)
	remotes := r.memoryCheckRemotes(obs)
	var secrets []*corev1.Secret
	// kept is the secret the FaultRemoteKept control leaves in place when the others leave.
	var kept *corev1.Secret
	joinAll := func() {
		for _, c := range remotes {
			s := istiod.Direct(t, c, c.Name)
			istiod.Add(t, s)
			secrets = append(secrets, s)
			_, _, err := join.WaitStatus(ctx, istiod.Istiod, c.Name, measure.StatusSynced, r.Flags.Join.Timeout)
			require.NoError(t, err)
		}
	}
	leaveAll := func() {
		for k, s := range secrets {
			if s == kept {
				continue
			}
			require.NoError(t, istiod.Remove(s))
			_, err := istiod.Sampler().WaitRemoteGone(ctx, remotes[k].Name, 50*time.Millisecond)
			require.NoError(t, err)
		}
		secrets = nil
	}
	// One-off allocations of a first join (caches, lazily built state) are not a leak: warm up.
	r.Logf("istiod check: warm-up join and leave of %d remote clusters", len(remotes))
	joinAll()
	leaveAll()
	r.waitQuiet(t, ctx, istiod.Istiod)
	first, _ := liveHeap(t, ctx, istiod.Istiod, heapReadings)
	before, spreadBefore := liveHeap(t, ctx, istiod.Istiod, heapReadings)
	noise := math.Abs(before - first)
	beforeKrt, beforeBy, beforeErr := krtCollections(ctx, istiod.Istiod)

	joinAll()
	r.waitQuiet(t, ctx, istiod.Istiod)
	joined, _ := liveHeap(t, ctx, istiod.Istiod, heapReadings)
	if ctl.is(FaultRemoteKept) {
		kept = secrets[len(secrets)-1]
	}
	leaveAll()
	r.waitQuiet(t, ctx, istiod.Istiod)
	after, spreadAfter := liveHeap(t, ctx, istiod.Istiod, heapReadings)
	afterKrt, afterBy, afterErr := krtCollections(ctx, istiod.Istiod) // after the memory samples: a full state dump

	bound := max(memorySlackBytes, noiseFactor*noise)
	grew := after - before
	detail := fmt.Sprintf("live heap %.1f MB before %d remote clusters joined, %.1f MB joined, %.1f MB after all left (%+.1f MB, bound %.1f MB; baseline noise %.2f MB, spread of the readings %.2f / %.2f MB)",
		before/1e6, len(remotes), joined/1e6, after/1e6, grew/1e6, bound/1e6, noise/1e6, spreadBefore/1e6, spreadAfter/1e6)
	passed := grew <= bound
	var evidence []string
	if !passed {
		evidence = append(evidence, EvidenceHeapKept)
	}
	if err := errors.Join(beforeErr, afterErr); err != nil {
		// Not a pass by default: the collection count is unknown, so only the heap decides, and
		// the detail says so.
		detail += fmt.Sprintf("; krt collections not countable, istiod's %s failed: %s", measure.KrtzPath, firstLine(err.Error(), 200))
	} else {
		detail += fmt.Sprintf("; krt collections %d before, %d after", beforeKrt, afterKrt)
		var grown []string
		for n, k := range afterBy {
			if k > beforeBy[n] {
				grown = append(grown, fmt.Sprintf("%s +%d", n, k-beforeBy[n]))
			}
		}
		sort.Strings(grown)
		if len(grown) > 5 {
			grown = append(grown[:5], fmt.Sprintf("... %d more", len(grown)-5))
		}
		if len(grown) > 0 {
			detail += " (grown: " + strings.Join(grown, ", ") + ")"
		}
		if afterKrt > beforeKrt {
			passed = false
			evidence = append(evidence, EvidenceKrtGrown)
		}
	}
	if kept != nil {
		detail += fmt.Sprintf("; %s was left joined (%s)", remotes[len(remotes)-1].Name, FaultRemoteKept)
	}
	r.verdict(t, ctl, report.IstiodCheck{Name: MemoryComesBack, Detail: detail + "; " + heapCheckNote, Evidence: evidence}, passed)
}

// memoryCheckRemotes are the remote clusters the memory check joins: -checks.clusters of them
// (0: all), so its work is bounded at any cluster count.
func (r *Run) memoryCheckRemotes(obs *cluster.Cluster) []*cluster.Cluster {
	var out []*cluster.Cluster
	for _, c := range r.Clusters {
		if c.Name != obs.Name && (r.Flags.Checks.Clusters == 0 || len(out) < r.Flags.Checks.Clusters) {
			out = append(out, c)
		}
	}
	return out
}
