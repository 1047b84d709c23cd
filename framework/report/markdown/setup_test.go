package markdown

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/reporttest"
)

func TestSetupMarkdown(t *testing.T) {
	for _, tc := range []struct {
		name   string
		report *report.Report
		want   []string
	}{
		// A shared etcd is listed once with its database size, each cluster carries its share, and
		// the setup time breakdown is stated.
		{"shared processes and breakdown", reporttest.SharedEtcd(), []string{
			"every API server ready in 12.5 s, every CRD Established in every cluster in 21.2 s",
			"Cluster processes per cluster: 230.0 MB RSS (shared processes counted by their share), 160.0 MB with each binary's shared pages counted once.",
			"| etcd | 3 | 150.0 | 50.0 | 30.0 |",
			"etcd-share 50.0, kube-apiserver 180.0",
		}},
		// Start waves, CPU per process and the published EndpointSlices reach report.md.
		{"waves, CPU and EndpointSlices", reporttest.StartWaves(), []string{
			"| 1 | cluster-1, cluster-2 | 0.0 | 4.5 |",
			"| 2 | cluster-3 | 4.5 | 7.2 |",
			"kube-apiserver 24.5, kube-controller-manager 3.8 |",
			"| 300 | 4000 |",
		}},
		// The certificate step's cost and each istiod's own CSR counter reach report.md.
		{"certificates", reporttest.Every(), []string{
			"each of the 3 fake nodes of the clusters with an istiod (1) asked its cluster's istiod for the 60 certificates of 100 scale pods",
			"86400 s lifetimes, renewed at half) in 0.5 s; the istiods used 0.05 CPU-s, the test process 0.60 cores; failed requests, each retried: 1.",
			"No certificates in cluster-2, which run no istiod",
			"| Endpoints | istiod CSRs (signed) |",
			"| 300 | 4000 | 61 (60) |",
			"| restored | 300 | 4000 | - |",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md := string(Render(tc.report))
			assert.Empty(t, reporttest.Lacking(md, tc.want...), "report.md lacks these:\n%s", md)
		})
	}
}
