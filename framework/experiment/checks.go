package experiment

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/env"
	"github.com/ambientmc/ambientmc/framework/istiodcheck"
	"github.com/ambientmc/ambientmc/framework/mesh"
)

// Checks is the run as the istiod checks reach it: the experiment context, and their verdicts.
func (r *Run) Checks() *istiodcheck.Run { return istiodcheck.New(r.Experiment()) }

// DataPath is the probes' path to the other probe cluster, for the traffic checks.
func (r *Run) DataPath(t *testing.T, ctx context.Context) istiodcheck.DataPath {
	p := r.DataPlane(t, ctx)
	target, app := p.Other()
	d := istiodcheck.DataPath{
		Probes: p, Local: p.Local, Istiod: r.Mesh.Istiods[p.Local.Name], Target: target, App: app,
		RotateSecret: func(ctx context.Context) error { return r.Mesh.RotateSecret(ctx, target.Name) },
		TouchSecret:  func(ctx context.Context) error { return r.Mesh.TouchSecret(ctx, target.Name) },
		RemoveRemote: func(ctx context.Context) error { return r.Mesh.Leave(ctx, target.Name) },
	}
	if r.Mesh.Restartable(p.Local.Name) {
		d.RestartIstiod = func(ctx context.Context) error { return r.Mesh.RestartIstiod(ctx, p.Local.Name) }
	}
	return d
}

// ExtraIstiod starts a second istiod for cluster c (the suite's own keeps running), built from
// istio.io/istio module version ("": the run's istiod), and stops it when the test ends; providers
// that cannot run one skip the test.
func (r *Run) ExtraIstiod(t *testing.T, ctx context.Context, c *cluster.Cluster, version string, vars ...string) *mesh.Istiod {
	t.Helper()
	extra, ok := r.Provider.ControlPlane().(cluster.ExtraIstiods)
	if !ok {
		t.Skipf("the %s provider cannot run a second istiod here (cluster.ExtraIstiods)", r.Provider.Name())
	}
	binary := r.IstiodPath()
	if version != "" {
		// make ci builds it beforehand (go run ./scripts/bins -istiod.version=...); else it is built now.
		b, err := env.ResolveIstiod(ctx, env.IstiodFlags{Version: version})
		require.NoError(t, err, "the istiod of version %s", version)
		binary = b.Path
	}
	i, err := extra.StartExtraIstiod(ctx, c, cluster.IstiodOptions{
		Name: "extra", Binary: binary, Dir: filepath.Join(t.TempDir(), "istiod"), CA: mesh.CACertsOf(r.Mesh.Intermediates[c.Name]), Env: vars,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = i.Stop() })
	return mesh.Observe(i)
}
