package join

import (
	"context"
	"slices"
	"time"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/expctx"
)

// SetMembers changes which clusters are in x's mesh and waits until the observed cluster's istiod
// has taken each change up. Membership is the state every test shares, so it is stated, never
// assumed: a test asks for the members it needs, and what it leaves behind is the next test's to
// change.
//
// It leaves, newest first, the members not in want, then joins what want lacks in its order (the
// observed cluster first: joining it alone forms a mesh of one), waiting on the observed istiod
// (when it runs and watch is set) for each change. Changes go out together and are waited on
// after: istiods take a batch of them up at once, where one at a time would wait for every
// istiod's work on each in turn.
func SetMembers(ctx context.Context, x *expctx.Context, want []string, watch bool) error {
	e, timeout := ExpectOf(x), x.Flags.Join.Timeout
	obs := x.Observed
	i := x.Mesh.Istiods[obs.Name]
	if !watch {
		i = nil
	}
	observing := func(name string) bool {
		return i != nil && name != obs.Name && slices.Contains(x.Mesh.Joined(), obs.Name)
	}
	gone := func(c *cluster.Cluster) error { return e.WaitLeft(ctx, i, nil, c, timeout) }
	var left []*cluster.Cluster
	joined := x.Mesh.Joined()
	for k := len(joined) - 1; k >= 0; k-- {
		name := joined[k]
		if slices.Contains(want, name) {
			continue
		}
		if name == obs.Name && len(left) > 0 { // its istiod must see the others go first
			if err := eachOf(left, gone); err != nil {
				return err
			}
			left = nil
		}
		observed := observing(name)
		if err := x.Mesh.Leave(ctx, name); err != nil {
			return err
		}
		if observed {
			left = append(left, x.Mesh.Cluster(name))
		}
	}
	if err := eachOf(left, gone); err != nil {
		return err
	}
	order := slices.Clone(want)
	if k := slices.Index(order, obs.Name); k > 0 {
		order = append([]string{obs.Name}, slices.Delete(order, k, k+1)...)
	}
	var added []*cluster.Cluster
	start := time.Now()
	for _, name := range order {
		if slices.Contains(x.Mesh.Joined(), name) {
			continue
		}
		if err := x.Mesh.Join(ctx, name); err != nil {
			return err
		}
		if observing(name) {
			added = append(added, x.Mesh.Cluster(name))
		}
	}
	return eachOf(added, func(c *cluster.Cluster) error {
		_, err := e.WaitJoined(ctx, i, nil, c, start, timeout)
		return err
	})
}

// eachOf runs wait for each cluster in turn, stopping at the first error.
func eachOf(cs []*cluster.Cluster, wait func(*cluster.Cluster) error) error {
	for _, c := range cs {
		if err := wait(c); err != nil {
			return err
		}
	}
	return nil
}
