package local

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ambientmc/ambientmc/framework/mesh/crds"
	"github.com/ambientmc/ambientmc/topology"
)

// BenchmarkClusterScale measures what the suites' setup costs for N clusters on one host: seconds
// until every API server is ready and until every Istio and Gateway API CRD is Established and
// served in every cluster, and memory per cluster (API server RSS, its anonymous part, and the
// shared etcd's share), plus the etcd database size. AMBIENTMC_BENCH_CLUSTERS picks the sizes
// (default 1,10,25,50); sizes the host cannot hold fail in preflight with the memory they need.
// The CRD seed is captured by the first size if it was missing, and used from then on.
func BenchmarkClusterScale(b *testing.B) {
	sizes := []int{1, 10, 25, 50}
	if s := os.Getenv("AMBIENTMC_BENCH_CLUSTERS"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			require.NoError(b, err, "AMBIENTMC_BENCH_CLUSTERS=%q", s)
			sizes = append(sizes, n)
		}
	}
	set := pinnedCRDs(b, context.Background())
	for _, n := range sizes {
		b.Run(fmt.Sprintf("clusters=%d", n), func(b *testing.B) {
			for range b.N {
				benchSetup(b, n, set)
			}
		})
	}
}

func benchSetup(b *testing.B, n int, set []*unstructured.Unstructured) {
	p := cachedProvider(b)
	p.noIstiod = true
	topo, err := topology.Generate(n)
	require.NoError(b, err)
	ctx := context.Background()
	require.NoError(b, p.Preflight(ctx, topo))
	slim, err := p.PreloadCRDs(set)
	require.NoError(b, err)
	seeded := p.SeededCRDs()
	start := time.Now()
	cs, err := p.Create(ctx, topo)
	require.NoError(b, err)
	defer func() { require.NoError(b, p.Destroy(ctx)) }()
	ready := time.Since(start)
	var g errgroup.Group
	for _, c := range cs {
		g.Go(func() error { return crds.Apply(ctx, c.Dynamic, slim) })
	}
	require.NoError(b, g.Wait())
	established := time.Since(start)
	require.NoError(b, p.SaveCRDSeed(ctx, cs[0]))
	// Let the API servers finish what the CRDs started before reading memory.
	time.Sleep(10 * time.Second)
	var api, anon, files, fileMax float64
	for _, procs := range p.Processes() {
		for _, pr := range procs {
			rss, err := pr.RSSBytes()
			require.NoError(b, err)
			api += float64(rss)
			a, err := rssAnon(pr.Pid())
			require.NoError(b, err)
			anon += float64(a)
			f, err := pr.RSSFileBytes()
			require.NoError(b, err)
			files += float64(f)
			fileMax = max(fileMax, float64(f))
		}
	}
	etcdRSS, err := p.SharedProcesses()[0].RSSBytes()
	require.NoError(b, err)
	st, err := p.etcd.ReadStatus(ctx)
	require.NoError(b, err)
	db := st.DBSize
	seed := 0.0
	if seeded {
		seed = 1
	}
	perN := func(v float64) float64 { return v / float64(n) / 1e6 }
	b.ReportMetric(ready.Seconds(), "apiservers-ready-s")
	b.ReportMetric(established.Seconds(), "crds-established-s")
	b.ReportMetric(perN(api)+perN(float64(etcdRSS)), "MB/cluster")
	// As the setup section's unique figure: the API server binary's pages counted once.
	b.ReportMetric(perN(api-files+fileMax+float64(etcdRSS)), "unique-MB/cluster")
	b.ReportMetric(perN(api), "apiserver-MB/cluster")
	b.ReportMetric(perN(anon), "apiserver-anon-MB/cluster")
	b.ReportMetric(perN(float64(etcdRSS)), "etcd-share-MB/cluster")
	b.ReportMetric(float64(db)/1e6, "etcd-db-MB")
	b.ReportMetric(seed, "crd-seeded")
}

// rssAnon is the anonymous part of a process's RSS: its own memory, without the binary's pages,
// which every API server shares through the page cache.
func rssAnon(pid int) (uint64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "RssAnon:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no RssAnon in /proc/%d/status", pid)
}
