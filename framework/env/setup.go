package env

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/provider"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/topology"
)

// checkInput validates every flag and the topology against the provider before anything starts,
// so bad input costs one clear error and no cluster.
func (e *Env) checkInput(s Suite) error {
	if err := e.Flags.validate(); err != nil {
		return err
	}
	if s.Check != nil {
		if err := s.Check(); err != nil {
			return err
		}
	}
	var err error
	if e.Scale, err = workload.Resolve(e.Flags.Scale, e.Flags.Services, e.Flags.Pods); err != nil {
		return err
	}
	if e.Flags.Topology != "" {
		e.Topology, err = topology.Load(e.Flags.Topology)
	} else {
		k := e.Flags.Networks
		if k == 0 {
			k = e.Flags.Clusters
		}
		e.Topology, err = topology.GenerateNetworks(e.Flags.Clusters, k)
	}
	if err != nil {
		return err
	}
	if _, err := e.Observed(); err != nil {
		return err
	}
	// The provider checks its own flags; building it starts nothing.
	p, err := provider.New(e.Flags.Provider, e.providerEnv(""))
	if err != nil {
		return err
	}
	if err := e.Flags.Istiod.validateFor(p); err != nil {
		return err
	}
	return provider.CheckTopology(e.Flags.Provider, e.Topology)
}

// providerEnv is what the provider gets from the environment, writing into runDir.
func (e *Env) providerEnv(runDir string) provider.Env {
	istiods := 0 // one per primary
	var istiodClusters []string
	if e.Flags.Istiods == report.IstiodsObserved {
		istiods = 1
		if obs, err := e.Observed(); err == nil {
			istiodClusters = []string{obs.Name}
		}
	}
	return provider.Env{RunDir: runDir, Log: e.Log, Istiods: istiods, IstiodClusters: istiodClusters,
		PodsPerCluster: e.Scale.Pods, Keep: e.Flags.Keep, Deadline: providerDeadline(), Topology: e.Topology, OnReady: e.clusterReady}
}

// clusterReady is what a provider whose Facts say ReadyEarly calls with each cluster as soon as it
// is ready: the setup steps' parts start there (parts.go) once they are set.
func (e *Env) clusterReady(c *cluster.Cluster) {
	if fn := e.onReady.Load(); fn != nil {
		(*fn)(c)
	}
}

func (e *Env) setup(ctx context.Context, suite Suite) error {
	if err := e.checkInput(suite); err != nil {
		return err
	}
	if e.ext != nil {
		if err := e.ext.Check(e); err != nil { // -gates, -baseline before anything starts
			return err
		}
	}
	if err := CheckIstiod(ctx, e.Flags.Istiod); err != nil {
		return err
	}
	var err error
	if e.RunDir, err = os.MkdirTemp("", "ambientmc-run-"); err != nil {
		return err
	}
	e.Cleanup("remove run directory", e.removeRunDir)
	if e.Provider, err = provider.New(e.Flags.Provider, e.providerEnv(filepath.Join(e.RunDir, "clusters"))); err != nil {
		return err
	}
	if e.ReportDir, err = ReportDir(e.Flags.ReportDir); err != nil { // -report-dir, $ARTIFACTS, or a new one
		return err
	}
	if e.Flags.ReportDir == "" && os.Getenv(ArtifactsEnv) == "" {
		e.Cleanup("remove the report directory if nothing was written", e.dropEmptyReportDir)
	}
	if err := e.planRun(suite); err != nil {
		return err
	}
	e.watchLoopback()
	// Setup counts against go test's kill, a minute after -timeout from the process start.
	setupDone := make(chan struct{})
	defer close(setupDone)
	defer e.armDeadline(e.plan, time.Time{}, setupDone)()
	e.Report = newReport(e.Provider, e.Topology)
	e.Report.Warnings = append(e.Report.Warnings, e.plan.Warnings...)
	if e.ext != nil {
		if err := e.ext.Started(e); err != nil { // metrics.csv, profiles
			return err
		}
	}
	e.Report.NodeImage = e.Provider.Facts().NodeImage
	all := append([]Step{
		{Name: "preflight", Run: func(ctx context.Context, e *Env) error { return e.Provider.Preflight(ctx, e.Topology) }},
		{Name: "istiod-binary", Run: resolveIstiod},
		{Name: "clusters", Run: createClusters},
		{Name: "crds", Run: installCRDs},
	}, suite.Steps...)
	e.parts = newClusterParts(ctx, suite.Steps)
	defer e.parts.stop()
	for _, s := range all {
		start := time.Now()
		e.Statusf("%s: starting", s.Name)
		err := s.run(ctx, e)
		e.setupTook[s.Name] = time.Since(start)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		e.Statusf("%s: done in %s", s.Name, time.Since(start).Round(10*time.Millisecond))
	}
	if e.Provider.Facts().IstioImages {
		imgs, err := mesh.Images(ctx, e.Clusters)
		if err != nil {
			e.Logf("reading the Istio images the clusters run: %v", err)
		}
		for _, im := range imgs {
			e.Report.IstioImages = append(e.Report.IstioImages, report.IstioImage{Cluster: im.Cluster, Component: im.Component, Image: im.Image, ImageID: im.ImageID})
		}
	}
	e.Report.Setup = setupReport(ctx, e, time.Since(e.start))
	e.Statusf("environment ready: %d clusters in %s", len(e.Clusters), time.Since(e.start).Round(100*time.Millisecond))
	return nil
}
