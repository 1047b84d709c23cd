package istiodcheck

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/faults"
	"github.com/ambientmc/ambientmc/framework/join"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/subtest"
)

// SlowSync is the delaying proxy's setting that makes a small-scale remote sync take several
// seconds instead of ~0.1 s: every chunk the remote API server sends waits this long.
var SlowSync = faults.Delay{PerChunk: 150 * time.Millisecond}

// controlCanaryWithin bounds the control attempt's canary, which sets the later attempts' window
// (Window): one istiod alone, nothing deleted mid-sync, so only a broken istiod or
// host takes this long.
const controlCanaryWithin = time.Minute

// MidSyncDeletion deletes a remote secret while istiod syncs its cluster (slowed by a delaying
// proxy), at several points of the sync, and checks that a canary cluster added after it syncs.
// ctl is nil, or the control to run: FaultStalledTransfer stalls the transfer for good as soon as
// istiod says it syncs, then deletes. istiod waits only for a watch the remote has not answered yet
// (docs/findings.md); stalled later, at half the bytes, every watch had its answer in some runs
// (1 of 16 controls in a .ci/run, 2026-12-07), and the control could not tell the fault.
func (r *Run) MidSyncDeletion(t *testing.T, ctx context.Context, obs, remote *cluster.Cluster, ctl *Control) {
	fracs := []float64{-1, 0.2, 0.5, 0.8}
	if ctl.is(FaultStalledTransfer) {
		fracs = []float64{-1, 0}
	}
	lines := make([]string, len(fracs))
	wedged := make([]bool, len(fracs))
	// Attempt 0 deletes after the sync finished: the control, which must pass on any istiod and
	// measures how long the slowed sync takes and how many bytes it moves through the proxy. The
	// later attempts delete at fractions of those bytes, at once: each has its own istiod. Aiming
	// by bytes, not time, keeps the aim on a host whose CPU stretches the sync (seen on kind: the
	// control's sync took 6.3-8.4 s, and a deletion aimed at 80% of 8.4 s came after a sync had
	// ended).
	var syncTime time.Duration
	var syncBytes int64
	// The later attempts' canary window, from the control's canary at this run's scale.
	window := Window{AtOnce: len(fracs) - 1}
	skipped := make([]bool, len(fracs))
	attempt := func(k int) func(t *testing.T) {
		return func(t *testing.T) {
			defer func() { skipped[k] = t.Skipped() }()
			frac := fracs[k]
			fresh := r.Isolated(t, ctx, obs)
			slow, proxy := fresh.Slow(t, remote, remote.Name, SlowSync)
			start := time.Now()
			fresh.Add(t, slow)
			_, _, err := join.WaitStatus(ctx, fresh.Istiod, remote.Name, measure.StatusSyncing, 10*time.Second)
			require.NoError(t, err, "the slowed cluster starts syncing")
			var at string
			var remaining time.Duration // of the slowed sync, at the deletion
			if frac < 0 {
				took, _, err := join.WaitStatus(ctx, fresh.Istiod, remote.Name, measure.StatusSynced, time.Minute)
				require.NoError(t, err)
				syncTime, syncBytes = time.Since(start), proxy.Delivered()
				require.Greater(t, syncTime, 2*time.Second, "the proxy must make the sync slow enough to delete inside it (took %s)", took)
				at = fmt.Sprintf("after the sync (%.1fs)", syncTime.Seconds())
			} else {
				target := int64(frac * float64(syncBytes))
				moved, err := waitDelivered(ctx, proxy, target, max(controlCanaryWithin, windowFactor*syncTime))
				require.NoError(t, err, "the slowed sync of %s moves %.0f%% of the control's %d bytes", remote.Name, 100*frac, syncBytes)
				m, err := fresh.Sampler().Scrape(ctx)
				require.NoError(t, err)
				st := m.RemoteStatus[remote.Name]
				require.Equal(t, measure.StatusSyncing, st, "istiod must still be syncing %s at the deletion (%d of the control's %d bytes moved, %.1fs in)",
					remote.Name, moved, syncBytes, time.Since(start).Seconds())
				at = fmt.Sprintf("at %.1fs, %.0f%% of the control's bytes moved (syncing)", time.Since(start).Seconds(), 100*float64(moved)/float64(syncBytes))
				if ctl.is(FaultStalledTransfer) {
					proxy.SetStalled(true)
					t.Cleanup(func() { proxy.SetStalled(false) })
					at += ", the transfer stalled from there"
				}
				remaining = time.Duration(float64(syncTime) * max(0, 1-float64(moved)/float64(syncBytes)))
			}
			require.NoError(t, fresh.Remove(slow))
			deleted := time.Now()
			canary := fresh.Direct(t, remote, "canary-"+remote.Name)
			fresh.Add(t, canary)
			var line string
			if frac < 0 {
				took, m, err := join.WaitStatus(ctx, fresh.Istiod, "canary-"+remote.Name, measure.StatusSynced, controlCanaryWithin)
				line = fmt.Sprintf("deleted %s; canary synced in %.1fs (the control's bound); deleted cluster's status %s", at, took.Seconds(), join.StatusOf(m, remote.Name))
				if err != nil {
					line = fmt.Sprintf("deleted %s; canary not synced within %s (the control's bound: wedged); deleted cluster's status %s; istiod log tail: %s",
						at, controlCanaryWithin, join.StatusOf(m, remote.Name), lastLine(fresh.Tail(5)))
					wedged[k] = true
				} else {
					window.Undisturbed = took
				}
			} else {
				// istiod's secret controller handles one secret at a time, and the canary queues
				// behind the rest of the deleted cluster's sync (docs/findings.md): its window runs
				// from when that transfer, still going through the proxy, stood still. A transfer
				// that never stops is bounded too.
				canarySynced := func() bool {
					return scrape(t, ctx, fresh.Istiod).RemoteStatus["canary-"+remote.Name] == measure.StatusSynced
				}
				bound := max(controlCanaryWithin, syncTime) + window.Duration()
				bctx, cancel := context.WithTimeout(ctx, bound)
				lastMoved := func() time.Time { return later(proxy.LastChunk(), deleted) }
				synced := servedAfter(bctx, canarySynced, lastMoved, deleted, window.Duration())
				cancel()
				took := time.Since(deleted)
				moved := max(0, proxy.LastChunk().Sub(deleted))
				m := scrape(t, ctx, fresh.Istiod)
				why := fmt.Sprintf("the deleted cluster's transfer last moved %.1fs after the deletion (%.1fs expected from the control's sync); window %s after it stood still, at most %s in all",
					moved.Seconds(), remaining.Seconds(), window, bound)
				line = fmt.Sprintf("deleted %s; canary synced in %.1fs (%s); deleted cluster's status %s", at, took.Seconds(), why, join.StatusOf(m, remote.Name))
				if !synced {
					line = fmt.Sprintf("deleted %s; canary not synced after %.1fs (%s: wedged); deleted cluster's status %s; istiod log tail: %s",
						at, took.Seconds(), why, join.StatusOf(m, remote.Name), lastLine(fresh.Tail(5)))
					wedged[k] = true
				}
			}
			lines[k] = line
			r.Logf("istiod check: mid-sync deletion attempt %d: %s", k, line)
		}
	}
	ranControl := t.Run("attempt 0", attempt(0))
	if skipped[0] {
		t.Skip("the control (attempt 0) was skipped, and the later attempts aim by it: its reason is above")
	}
	if ranControl || syncTime > 0 { // without the control there is no window to aim at
		var later []subtest.Case
		for k := 1; k < len(fracs); k++ {
			later = append(later, subtest.Case{Name: fmt.Sprintf("attempt %d", k), Run: attempt(k)})
		}
		subtest.Concurrently(t, later...)
	}
	var ran []string
	for _, l := range lines {
		if l != "" {
			ran = append(ran, l)
		}
	}
	if len(ran) < len(fracs) {
		r.broken(t, ctl, MidSyncDeletion, fmt.Sprintf("only %d of %d attempts ran to a verdict: %s", len(ran), len(fracs), strings.Join(ran, "; ")))
	}
	r.verdict(t, ctl, report.IstiodCheck{Name: MidSyncDeletion, Detail: strings.Join(ran, "; ")}, !slices.Contains(wedged, true))
}

// waitDelivered waits until p has delivered at least n bytes, at most within, and returns how many
// it had delivered then.
func waitDelivered(ctx context.Context, p *faults.Proxy, n int64, within time.Duration) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		if got := p.Delivered(); got >= n {
			return got, nil
		}
		select {
		case <-ctx.Done():
			return p.Delivered(), fmt.Errorf("%d of %d bytes delivered within %s", p.Delivered(), n, within)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
