package multicluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/report"
)

// Membership is the state every test shares, so it is stated, never assumed: a test asks for the
// members it needs and gets the membership it found back at its end.

// needMembers makes the mesh's members exactly names (the observed cluster first among them, so
// that joining it forms a mesh of one), joining and leaving what differs and waiting until the
// observed istiod has taken each change up. t.Cleanup puts back the members the test found.
func needMembers(t *testing.T, ctx context.Context, names ...string) {
	t.Helper()
	before := mc.mesh.Joined()
	require.NoError(t, setMembers(ctx, names), "membership for %s", t.Name())
	t.Cleanup(func() {
		// A run cut short tears everything down anyway.
		if err := mc.RunContext().Err(); err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(mc.RunContext(), 2*mc.opts.Join.Timeout)
		defer cancel()
		if err := setMembers(ctx, before); err != nil {
			t.Errorf("putting back the mesh's members %v after %s: %v", before, t.Name(), err)
		}
	})
}

// everyCluster is every cluster's name, the observed one first.
func everyCluster() []string {
	obs := mc.observed().Name
	names := []string{obs}
	for _, c := range mc.Clusters {
		if c.Name != obs {
			names = append(names, c.Name)
		}
	}
	return names
}

// setMembers leaves, newest first, the members not in want, then joins what want lacks in its
// order, waiting on the observed istiod (when it runs) after each change.
func setMembers(ctx context.Context, want []string) error {
	obs := mc.observed()
	i := mc.mesh.Istiods[obs.Name]
	joined := mc.mesh.Joined()
	for k := len(joined) - 1; k >= 0; k-- {
		name := joined[k]
		if slices.Contains(want, name) {
			continue
		}
		if err := mc.mesh.Leave(ctx, name); err != nil {
			return err
		}
		if i != nil && name != obs.Name && slices.Contains(mc.mesh.Joined(), obs.Name) {
			if err := waitLeft(ctx, i, nil, mc.Cluster(name), mc.opts.Join.Timeout); err != nil {
				return err
			}
		}
	}
	// The observed cluster first: joining it alone forms a mesh of one.
	order := slices.Clone(want)
	if k := slices.Index(order, obs.Name); k > 0 {
		order = append([]string{obs.Name}, slices.Delete(order, k, k+1)...)
	}
	for _, name := range order {
		if slices.Contains(mc.mesh.Joined(), name) {
			continue
		}
		start := time.Now()
		if err := mc.mesh.Join(ctx, name); err != nil {
			return err
		}
		if i != nil && name != obs.Name && slices.Contains(mc.mesh.Joined(), obs.Name) {
			if _, err := waitJoined(ctx, i, nil, mc.Cluster(name), start, mc.opts.Join.Timeout); err != nil {
				return err
			}
		}
	}
	return nil
}

// freshIstiod makes sure the observed istiod has held no remote cluster since it started, for a
// measurement "from nothing" (istiod keeps part of a cluster's memory after it leaves,
// istio/istio#61263): if it has, it is restarted in place, with no member but itself. It returns
// the istiod and what the report says of it.
func freshIstiod(t *testing.T, ctx context.Context) (cluster.Istiod, *report.MeasuredIstiod) {
	t.Helper()
	obs := mc.observed()
	i := mc.mesh.Istiods[obs.Name]
	require.NotNil(t, i, "no istiod runs for %s", obs.Name)
	held := mc.mesh.Held(obs.Name)
	m := &report.MeasuredIstiod{Cluster: obs.Name, HeldBefore: len(held)}
	if len(held) == 0 {
		return i, m
	}
	needMembers(t, ctx) // nothing joined while it restarts
	start := time.Now()
	err := mc.mesh.RestartIstiod(ctx, obs.Name)
	if errors.Is(err, cluster.ErrUnsupported) {
		m.Note = fmt.Sprintf("not fresh: it had held %d remote clusters and provider %s cannot restart it", len(held), mc.Provider.Name())
		mc.Logf("istiod %s: %s", obs.Name, m.Note)
		return i, m
	}
	require.NoError(t, err)
	m.Restarted = true
	mc.Logf("istiod %s: restarted fresh in %.1fs (it had held %d remote clusters)", obs.Name, time.Since(start).Seconds(), len(held))
	return i, m
}

// observedIstiod returns the measured cluster and its istiod, whatever it held before.
func observedIstiod(t *testing.T) (*cluster.Cluster, cluster.Istiod) {
	t.Helper()
	c := mc.observed()
	i := mc.mesh.Istiods[c.Name]
	require.NotNil(t, i, "no istiod runs for %s", c.Name)
	return c, i
}
