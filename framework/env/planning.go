package env

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/framework/report"
)

// planRun works out the run's time plan before anything starts: the provider's setup, the suite's
// steps and every test that -run and -skip select, against go test's -timeout. It prints the plan,
// trims what the suite allows when it does not fit, and refuses a run that still does not fit,
// naming the -timeout it needs.
func (e *Env) planRun(s Suite) error {
	timeout := plan.TestTimeout()
	p := &plan.Plan{Timeout: timeout, Margin: plan.MarginFor(timeout)}
	sel, err := plan.Select(FlagValue("test.run"), FlagValue("test.skip"))
	if err != nil {
		return err
	}
	p.Setup = append(e.binariesItems(), plan.Scale(e.clusterItems(), e.Flags.PlanFactor)...)
	if s.Plan != nil {
		steps, tests := s.Plan(PlanInput{Topology: e.Topology, Scale: e.Scale, Flags: e.Flags, Provider: e.Provider.Name(), DataPlane: e.Provider.Facts().DataPlane, Istiods: e.istiodCount()})
		p.Setup = append(p.Setup, plan.Scale(steps, e.Flags.PlanFactor)...)
		for _, it := range plan.Scale(tests, e.Flags.PlanFactor) {
			if sel.Runs(it.Name) {
				p.Tests = append(p.Tests, it)
			}
		}
	}
	fitErr := p.Fit()
	e.plan = p
	if fitErr != nil {
		return fmt.Errorf("plan: %w", fitErr)
	}
	factor := ""
	if e.Flags.PlanFactor != 1 {
		factor = fmt.Sprintf(", estimates x%g by -plan.factor", e.Flags.PlanFactor)
	}
	e.Statusf("plan (%d clusters, scale %s%s):\n%s", len(e.Topology.Clusters), e.Scale.Name, factor, strings.TrimRight(p.Table(), "\n"))
	for _, w := range p.Warnings {
		e.Logf("plan: %s", w)
	}
	return nil
}

// istiodCount is how many istiods the run starts.
func (e *Env) istiodCount() int {
	if e.Flags.Istiods == report.IstiodsObserved {
		return 1
	}
	return len(e.Topology.Primaries())
}

// binariesItems plans the cold build of whatever a provider that runs pilot-discovery as a process
// still lacks.
func (e *Env) binariesItems() []plan.Item {
	f := e.Provider.Facts()
	if !f.IstiodProcess {
		return nil
	}
	cache, err := bins.Default()
	if err != nil {
		return nil // preflight says so
	}
	var need []bins.Binary
	for _, name := range f.ClusterBinaries {
		need = append(need, bins.Binary(name))
	}
	missing, err := cache.Missing(need...)
	if err != nil {
		return nil
	}
	if e.Flags.Istiod.Binary == "" && cache.IstiodMissing(e.Flags.Istiod.Spec()) {
		missing = append(missing, bins.PilotDiscovery)
	}
	if len(missing) == 0 {
		return nil
	}
	names := make([]string, len(missing))
	for i, b := range missing {
		names[i] = string(b)
	}
	return []plan.Item{{Name: "binaries", Expected: bins.ColdBuildTime(missing),
		Detail: strings.Join(names, ", ") + " not built yet: a cold build on 2 cores (`make bins` builds them beforehand)"}}
}

// clusterItems plans Create and the CRDs: the provider's own estimate where it offers one.
func (e *Env) clusterItems() []plan.Item {
	if est := e.Provider.Facts().SetupEstimates; est != nil {
		var items []plan.Item
		for _, s := range est {
			items = append(items, plan.Item{Name: s.Step, Expected: s.Expected, Detail: s.Detail})
		}
		return items
	}
	return []plan.Item{{Name: "clusters", Expected: 2 * time.Minute, Detail: "no estimate from the provider"}}
}

// FlagValue is the value of a registered flag (go test's own among them), "" when none is.
func FlagValue(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}
