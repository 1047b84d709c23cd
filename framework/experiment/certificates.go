package experiment

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/env"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/workload"
)

// certificatesWait bounds how long one cluster's scale pods may take to get their certificates.
const certificatesWait = 5 * time.Minute

// serveFakeNodes has every scale pod of a cluster with an istiod get its certificate from that
// istiod's CA, as a ztunnel on the pod's node would ask for it, where the provider stands in for
// those ztunnels (cluster.FakeNodeProxies); they keep doing so for the pods churn brings, until
// the run ends. The setup section says what it cost and what each istiod counted.
func (r *Run) serveFakeNodes(ctx context.Context, e *env.Env) error {
	fp, ok := e.Provider.(cluster.FakeNodeProxies)
	if !ok {
		e.Logf("certificates: the %s provider runs no ztunnel on the fake nodes: the scale pods get no certificate", e.Provider.Name())
		return nil
	}
	nodes := make([]string, e.Scale.Nodes)
	for k := range nodes {
		nodes[k] = workload.NodeName(k)
	}
	cas := r.Mesh.CAs()
	out := &report.CertificateSetup{}
	var served []*cluster.Cluster
	for _, c := range e.Clusters {
		if r.Mesh.Istiods[c.Name] == nil {
			out.WithoutIstiod = append(out.WithoutIstiod, c.Name)
			continue
		}
		served = append(served, c)
	}
	start, cpu := time.Now(), processCPU()
	before, err := r.istiodCPU(ctx, served)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	all := map[string]cluster.NodeCertificates{}
	g, gctx := errgroup.WithContext(ctx)
	for _, c := range served {
		g.Go(func() error {
			n, err := fp.ServeFakeNodes(gctx, c, r.Mesh.Istiods[c.Name], cas[c.Name], nodes)
			if err != nil {
				return fmt.Errorf("cluster %s: %w", c.Name, err)
			}
			mu.Lock()
			all[c.Name] = n
			mu.Unlock()
			e.Cleanup("stop the fake nodes' certificate clients in "+c.Name, n.Close)
			wctx, cancel := context.WithTimeout(gctx, certificatesWait)
			defer cancel()
			if err := n.Wait(wctx); err != nil {
				return fmt.Errorf("cluster %s: the scale pods' certificates: %w (istiod's log: %s)", c.Name, err, r.Mesh.Istiods[c.Name].LogFile())
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	out.Seconds = time.Since(start).Seconds()
	if used := processCPU() - cpu; used >= 0 && out.Seconds > 0 {
		out.TestProcessCPUCores = report.F(used.Seconds() / out.Seconds)
	}
	after, err := r.istiodCPU(ctx, served)
	if err != nil {
		return err
	}
	var istiodSeconds float64
	for name, a := range before {
		span, err := measure.SpanBetween(a, after[name])
		if err != nil {
			return fmt.Errorf("istiod %s CPU over the certificate step: %w", name, err)
		}
		istiodSeconds += span.CPUSeconds
	}
	out.IstiodCPUSeconds = report.F(istiodSeconds)
	csrs := map[string]*report.IstiodCSRs{}
	for _, c := range served {
		n := all[c.Name]
		counts := n.Counts()
		out.Clusters++
		out.Nodes += counts.Nodes
		out.Pods += counts.Pods
		out.Certificates += counts.Certificates
		out.FailedRequests += counts.Failed
		out.TTLSeconds = n.TTL().Seconds()
		m, err := r.Mesh.Istiods[c.Name].Sampler().Scrape(ctx)
		if err != nil {
			return err
		}
		csrs[c.Name] = &report.IstiodCSRs{Received: m.CSRs, Issued: m.CertsIssued}
	}
	if e.Report.Setup == nil {
		e.Report.Setup = &report.Setup{}
	}
	e.Report.Setup.Certificates = out
	for i := range e.Report.Setup.Clusters {
		e.Report.Setup.Clusters[i].CSRs = csrs[e.Report.Setup.Clusters[i].Name]
	}
	for _, c := range served {
		if !hasCluster(e.Report.Setup.Clusters, c.Name) {
			e.Report.Setup.Clusters = append(e.Report.Setup.Clusters, report.ClusterSetup{Name: c.Name, CSRs: csrs[c.Name]})
		}
	}
	e.Logf("certificates: %d scale pods on %d fake nodes in %d clusters hold %d certificates from their istiods in %.1fs (istiods %.2f CPU-s, %d failed requests)",
		out.Pods, out.Nodes, out.Clusters, out.Certificates, out.Seconds, istiodSeconds, out.FailedRequests)
	return nil
}

// istiodCPU reads the CPU of the istiod of each of clusters.
func (r *Run) istiodCPU(ctx context.Context, clusters []*cluster.Cluster) (map[string]measure.CPUReading, error) {
	out := map[string]measure.CPUReading{}
	for _, c := range clusters {
		cpu, err := r.Mesh.Istiods[c.Name].Sampler().ReadCPU(ctx)
		if err != nil {
			return nil, fmt.Errorf("istiod %s CPU: %w", c.Name, err)
		}
		out[c.Name] = cpu
	}
	return out, nil
}

func hasCluster(cs []report.ClusterSetup, name string) bool {
	for _, c := range cs {
		if c.Name == name {
			return true
		}
	}
	return false
}
