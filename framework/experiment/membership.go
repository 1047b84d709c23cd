package experiment

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/join"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/report"
)

// Membership is the state every test shares (join.SetMembers). Nothing is put back at a test's end:
// a full-mesh rejoin of every cluster costs each istiod every other cluster's join, and the next
// test would as likely change it again.

// NeedMembers makes the mesh's members exactly names (the observed cluster first among them, so
// that joining it forms a mesh of one), joining and leaving what differs and waiting until the
// observed istiod has taken each change up.
func (r *Run) NeedMembers(t testing.TB, ctx context.Context, names ...string) {
	t.Helper()
	require.NoError(t, r.setMembers(ctx, names, true), "membership for %s", t.Name())
}

// LeaveAtEnd takes name out of the mesh when the test ends: for a test that may leave istiod's
// view of it broken (a known istiod fault), so the next test to need it joins it afresh.
func (r *Run) LeaveAtEnd(t testing.TB, name string) {
	t.Cleanup(func() {
		if r.RunContext().Err() != nil {
			return // a run cut short tears everything down anyway
		}
		ctx, cancel := context.WithTimeout(r.RunContext(), 2*r.Opts.Join.Timeout)
		defer cancel()
		rest := slices.DeleteFunc(r.Mesh.Joined(), func(n string) bool { return n == name })
		if err := r.setMembers(ctx, rest, true); err != nil {
			t.Errorf("taking %s out of the mesh after %s: %v", name, t.Name(), err)
		}
	})
}

// setMembers makes the mesh's members exactly want (join.SetMembers).
func (r *Run) setMembers(ctx context.Context, want []string, watch bool) error {
	return join.SetMembers(ctx, r.Experiment(), want, watch)
}

// IstiodFor gives a test that measures the observed istiod one whose whole history is joining
// members, and makes them the mesh's members. istiod keeps part of a cluster's memory after it
// leaves (istio/istio#61263), so an istiod that had held a cluster outside members, or had let one
// go or rebuilt it since (a leave, a rotated secret), is restarted in place first with nothing
// joined; one that held only members and dropped none is kept: it is in the state a fresh istiod
// joined to them would be. It returns the istiod and what the report says of it.
func (r *Run) IstiodFor(t testing.TB, ctx context.Context, members ...string) (*mesh.Istiod, *report.MeasuredIstiod) {
	t.Helper()
	obs := r.ObservedCluster()
	i := r.Mesh.Istiods[obs.Name]
	require.NotNil(t, i, "no istiod runs for %s", obs.Name)
	held := r.Mesh.Held(obs.Name)
	m := &report.MeasuredIstiod{Cluster: obs.Name, HeldBefore: len(held)}
	switch {
	case len(held) == 0:
	case len(r.Mesh.Dropped(obs.Name)) == 0 && allIn(held, members):
		// A held cluster it never dropped is still joined.
		m.Kept = true
		r.Logf("istiod %s: kept (it has held %d remote clusters, all still members)", obs.Name, len(held))
	default:
		m.Restarted = r.restartFresh(t, ctx, obs, len(held))
		if !m.Restarted {
			m.Note = fmt.Sprintf("not fresh: it had held %d remote clusters and provider %s cannot restart it", len(held), r.Provider.Name())
			r.Logf("istiod %s: %s", obs.Name, m.Note)
		}
	}
	r.NeedMembers(t, ctx, members...)
	return i, m
}

// allIn says every name in names is in set.
func allIn(names, set []string) bool {
	for _, n := range names {
		if !slices.Contains(set, n) {
			return false
		}
	}
	return true
}

// restartFresh restarts the observed istiod with no member joined, saying whether the provider
// could. Nothing waits on the leaves: the istiod that would take them up is restarted anyway.
func (r *Run) restartFresh(t testing.TB, ctx context.Context, obs *cluster.Cluster, held int) bool {
	t.Helper()
	require.NoError(t, r.setMembers(ctx, nil, false), "leaving every cluster before istiod %s restarts", obs.Name)
	start := time.Now()
	if !r.Mesh.Restartable(obs.Name) {
		return false
	}
	require.NoError(t, r.Mesh.RestartIstiod(ctx, obs.Name))
	r.Logf("istiod %s: restarted fresh in %.1fs (it had held %d remote clusters)", obs.Name, time.Since(start).Seconds(), held)
	return true
}

// ObservedIstiod returns the measured cluster and its istiod, whatever it held before.
func (r *Run) ObservedIstiod(t testing.TB) (*cluster.Cluster, *mesh.Istiod) {
	t.Helper()
	c := r.ObservedCluster()
	i := r.Mesh.Istiods[c.Name]
	require.NotNil(t, i, "no istiod runs for %s", c.Name)
	return c, i
}
