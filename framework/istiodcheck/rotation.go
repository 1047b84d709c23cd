package istiodcheck

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/join"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/stats"
)

// rotationReadings is how many forced GCs each live-heap reading of the rotation check takes.
const rotationReadings = 3

// Bounds of the rotation check, per rotation. The live heap's is the larger of three standard
// errors of its fitted slope (what the readings' own noise allows) and a twentieth of what the
// remote cluster costs istiod (measured in the same check): a leak of that size is a whole
// cluster's state every 20 rotations. The goroutines' is the larger of three standard errors and
// half a goroutine: a leaked informer or handler leaves goroutines behind on every rotation.
const (
	leakSlopeFactor    = 3
	leakPerClusterFrac = 1.0 / 20
	goroutineFloor     = 0.5
)

// RotationNoLeak rotates a remote secret of an isolated istiod in place and by deletion and
// recreation, and checks that neither its live heap nor its goroutines grow with the rotations.
// ctl is nil, or the control to run.
func (r *Run) RotationNoLeak(t *testing.T, ctx context.Context, obs, remote *cluster.Cluster, ctl *Control) {
	iso := r.Isolated(t, ctx, obs, heapCheckEnv...)
	w := r.watch(t, ctx, obs, iso.Istiod)
	n := r.Flags.Checks.Rotations
	r.waitQuiet(t, ctx, iso.Istiod)
	empty, _ := liveHeap(t, ctx, iso.Istiod, rotationReadings)

	start := time.Now()
	first := iso.Direct(t, remote, remote.Name)
	iso.Add(t, first)
	_, _, err := join.WaitStatus(ctx, iso.Istiod, remote.Name, measure.StatusSynced, r.Flags.Join.Timeout)
	require.NoError(t, err)
	// How long a rotation may take until istiod serves the remote synced again: from the first
	// sync, undisturbed, at this run's scale.
	window := Window{Undisturbed: time.Since(start)}
	sw := join.WatchStatus(ctx, iso.Istiod, remote.Name, join.SyncPeriod(time.Since(start)))
	sw.Expect("the remote is listed", measure.StatusSynced)

	// rotate writes a fresh token for the same cluster, in place or by delete and recreate, and
	// waits until istiod took it up, serves the new cluster synced and a client holds it again.
	// What istiod serves is read from /debug/clusterz: after an in-place rotation its metric can
	// say "closed" for the cluster it serves (sync status tells the truth judges that).
	var lost []string
	// rotate returns false, having given the verdict, when istiod never serves the remote synced
	// again: the rotation cannot complete, so there is no slope to fit.
	rotate := func(mode string, k int) bool {
		events := secretEvents(t, ctx, iso.Istiod)
		s := iso.Direct(t, remote, remote.Name)
		sw.Expect("the secret changed: istiod rebuilds the remote")
		secrets := iso.Secrets()
		switch {
		case mode == rotateUnchanged:
			// The kubeconfig the secret holds, and a label that changes: an update istiod skips.
			s = first.DeepCopy()
			s.Labels["ambientmc.io/rotation"] = strconv.Itoa(k) // beside istio/multiCluster, which istiod selects on
			_, err := secrets.Update(ctx, s, metav1.UpdateOptions{})
			require.NoError(t, err)
		case mode == rotateRecreate:
			require.NoError(t, iso.Remove(s))
			_, err := iso.Sampler().WaitRemoteGone(ctx, remote.Name, 50*time.Millisecond)
			require.NoError(t, err)
			_, err = secrets.Create(ctx, s, metav1.CreateOptions{})
			require.NoError(t, err)
		default:
			_, err := secrets.Update(ctx, s, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
		if ctl.is(FaultRemotePerRotation) {
			// One more copy of the remote, under a cluster ID of its own, stays joined.
			id := fmt.Sprintf("%s-copy-%d", remote.Name, k)
			iso.Add(t, iso.Direct(t, remote, id))
			_, _, err := join.WaitStatus(ctx, iso.Istiod, id, measure.StatusSynced, r.Flags.Join.Timeout)
			require.NoError(t, err)
		}
		require.NoError(t, join.WaitUntil(ctx, r.Flags.Join.Timeout, func() bool { return secretEvents(t, ctx, iso.Istiod) > events }),
			"istiod %s never saw the rotated secret", iso.Cluster())
		wctx, cancel := context.WithTimeout(ctx, window.Duration())
		defer cancel()
		if err := iso.Sampler().WaitClusterzSynced(wctx, remote.Name, 50*time.Millisecond); err != nil {
			r.verdict(t, ctl, report.IstiodCheck{Name: RotationNoLeak, Status: sw.Stop(), Evidence: []string{EvidenceRotationIncomplete}, Detail: fmt.Sprintf(
				"%s rotation %d of %s's secret never completed: istiod did not serve the remote synced again within %s (/debug/clusterz: %s); %s",
				mode, k, remote.Name, window, clusterzStatus(ctx, iso.Istiod, remote.Name), heapCheckNote)}, false)
			return false
		}
		// istiod stops the replaced cluster once its successor synced: only after that has settled
		// does the client hold what istiod keeps serving.
		r.waitQuiet(t, ctx, iso.Istiod)
		hctx, hcancel := context.WithTimeout(ctx, time.Second) // after the quiet wait: pushes are done
		defer hcancel()
		if err := w.WaitFor(hctx, iso.expect.Covers(remote)); err != nil {
			lost = append(lost, fmt.Sprintf("%s rotation %d: %s", mode, k, iso.expect.HeldOf(w, remote)))
		}
		sw.Expect("the remote is listed again", measure.StatusSynced)
		return true
	}
	// The rotations: in place, then deleted and recreated; the must-pass control's keep the
	// kubeconfig, all of them in place.
	modes := []string{rotateInPlace, rotateRecreate}
	if ctl.is(FaultUnchangedKubeconfig) {
		modes = []string{rotateUnchanged, rotateUnchanged}
	}
	// One-off state of a first rotation is not a leak.
	if !rotate(modes[0], 0) {
		return
	}
	fig := &report.RotationFigures{}
	read := func(rotations int, mode string) {
		heap, _ := liveHeap(t, ctx, iso.Istiod, rotationReadings)
		fig.Points = append(fig.Points, report.RotationPoint{Rotations: rotations, Mode: mode, LiveHeapBytes: heap, Goroutines: goroutines(t, ctx, iso.Istiod)})
	}
	read(0, "start")
	profiles := r.Profile(iso.Istiod, "rotation-start")
	done := 0
	for _, mode := range modes {
		for range n {
			done++
			if !rotate(mode, done) { // ends once istiod is quiet again
				return
			}
			read(done, mode)
		}
	}
	profiles = append(profiles, r.Profile(iso.Istiod, "rotation-end")...)
	status := sw.Stop()

	xs := make([]float64, len(fig.Points))
	heaps, grs := make([]float64, len(fig.Points)), make([]float64, len(fig.Points))
	for k, p := range fig.Points {
		xs[k], heaps[k], grs[k] = float64(p.Rotations), p.LiveHeapBytes, p.Goroutines
	}
	heapFit, err := stats.LinearFit(xs, heaps)
	require.NoError(t, err)
	grFit, err := stats.LinearFit(xs, grs)
	require.NoError(t, err)
	cost := fig.Points[0].LiveHeapBytes - empty
	fig.RemoteClusterLiveHeap = report.F(cost)
	fig.LiveHeapSlopeBytes, fig.LiveHeapSlopeStdErr = report.F(heapFit.Slope), report.F(heapFit.SlopeStdErr)
	fig.GoroutineSlope, fig.GoroutineSlopeStdErr = report.F(grFit.Slope), report.F(grFit.SlopeStdErr)
	heapBound := max(leakSlopeFactor*heapFit.SlopeStdErr, leakPerClusterFrac*max(cost, 0))
	grBound := max(leakSlopeFactor*grFit.SlopeStdErr, goroutineFloor)
	fig.LiveHeapBoundBytes, fig.GoroutineBound = report.F(heapBound), report.F(grBound)

	// The verdict is the leak's; a remote the client lost is traffic holds while a remote secret
	// rotates's verdict, and said here too.
	heapGrew, goroutinesGrew := heapFit.Slope > heapBound, grFit.Slope > grBound
	passed := !heapGrew && !goroutinesGrew
	var evidence []string
	if heapGrew {
		evidence = append(evidence, EvidenceHeapGrowsPerRotation)
	}
	if goroutinesGrew {
		evidence = append(evidence, EvidenceGoroutinesGrowPerRotation)
	}
	detail := fmt.Sprintf("%d rotations %s, then %d %s of %s's secret: live heap %+.1f ± %.1f KB per rotation (bound %.1f KB; the remote costs %.1f MB), goroutines %+.2f ± %.2f per rotation (bound %.2f)",
		n, modeText[modes[0]], n, modeText[modes[1]], remote.Name, heapFit.Slope/1e3, heapFit.SlopeStdErr/1e3, heapBound/1e3, cost/1e6, grFit.Slope, grFit.SlopeStdErr, grBound)
	if len(lost) > 0 {
		detail += "; the client lost the remote: " + strings.Join(lost, "; ")
	} else {
		detail += "; the client held the remote after every rotation"
	}
	detail += fmt.Sprintf(" (each rotation's window to serve it synced again: %s)", window)
	if ctl.is(FaultRemotePerRotation) {
		detail += "; " + string(FaultRemotePerRotation)
	}
	r.verdict(t, ctl, report.IstiodCheck{Name: RotationNoLeak, Detail: detail + "; " + join.StatusText(status) + "; " + heapCheckNote,
		Rotation: fig, Status: status, Profiles: profiles, Evidence: evidence}, passed)
}

// Rotation modes, as the rotation check's report rows name them.
const (
	rotateInPlace  = "in-place"
	rotateRecreate = "recreate"
	// rotateUnchanged rewrites the secret in place with the kubeconfig it holds (a control's).
	rotateUnchanged = "unchanged"
)

// modeText says what a mode's rotations are, for the check's detail.
var modeText = map[string]string{rotateInPlace: "in place", rotateRecreate: "deletions and recreations", rotateUnchanged: "in place with the kubeconfig unchanged"}
