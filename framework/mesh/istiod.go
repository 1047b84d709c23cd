package mesh

import (
	"fmt"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/pki"
)

// Istiod is an istiod of the run as the framework reaches it: the provider's handle and the one
// sampler that reads it, so that what hooks into its scrapes (the run's metrics timeline) sees
// every reading.
type Istiod struct {
	cluster.Istiod
	sampler *measure.Sampler
}

// Observe gives the provider's istiod i its sampler.
func Observe(i cluster.Istiod) *Istiod {
	return &Istiod{Istiod: i, sampler: SamplerOf(i.Endpoints())}
}

// SamplerOf is a sampler of the istiod at e: CPU from the scheduler's counters where istiod runs
// on this host, else from process_cpu_seconds_total.
func SamplerOf(e cluster.IstiodEndpoints) *measure.Sampler {
	i := &measure.Sampler{Name: e.Name, MetricsURL: e.MetricsURL, CtrlzURL: e.CtrlzURL, DebugURL: e.DebugURL, MemoryCgroup: e.MemoryCgroup}
	if e.PID != nil {
		i.CPU = measure.ProcessCPU(e.PID)
	}
	return i
}

// Sampler reads istiod's metrics, ControlZ, debug handlers and CPU.
func (i *Istiod) Sampler() *measure.Sampler { return i.sampler }

// Handles are the providers' handles of the mesh's istiods, by cluster (for the contract's
// ProbeSetup).
func (m *Mesh) Handles() map[string]cluster.Istiod {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]cluster.Istiod, len(m.Istiods))
	for name, i := range m.Istiods {
		out[name] = i.Istiod
	}
	return out
}

// CACertsOf is an intermediate as the contract carries it.
func CACertsOf(i *pki.Intermediate) cluster.CACerts {
	return cluster.CACerts{CertPEM: i.CertPEM, KeyPEM: i.KeyPEM, ChainPEM: i.ChainPEM, RootPEM: i.RootPEM}
}

// CAs are every cluster's intermediate as the contract carries it.
func (m *Mesh) CAs() map[string]cluster.CACerts {
	out := make(map[string]cluster.CACerts, len(m.Intermediates))
	for name, i := range m.Intermediates {
		out[name] = CACertsOf(i)
	}
	return out
}

// IntermediateOf is cluster's intermediate from the CA the contract carries, to sign with.
func IntermediateOf(clusterName string, c cluster.CACerts) (*pki.Intermediate, error) {
	if c.Empty() {
		return nil, fmt.Errorf("cluster %s: no CA given", clusterName)
	}
	return pki.LoadIntermediate(clusterName, c.CertPEM, c.KeyPEM, c.ChainPEM, c.RootPEM)
}
