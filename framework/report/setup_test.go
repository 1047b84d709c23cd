package report

import (
	"encoding/json"
	"strings"
	"testing"
)

// A shared etcd is listed once with its database size, each cluster carries its share, and the
// setup time breakdown reaches every output.
func TestSetupSharedProcessesAndBreakdown(t *testing.T) {
	r := fullReport()
	r.Setup = &Setup{TotalSeconds: 40, APIServersReadySeconds: F(12.5), CRDsEstablishedSeconds: F(21.25),
		PerClusterRSSBytes: F(230e6), PerClusterUniqueBytes: F(160e6),
		Shared:   []SharedProcess{{Name: "etcd", RSSBytes: 150e6, Clusters: 3, DatabaseBytes: F(30e6)}},
		Clusters: []ClusterSetup{{Name: "cluster-1", ReadySeconds: 10, RSSBytes: map[string]float64{"kube-apiserver": 180e6, "etcd-share": 50e6}}}}

	md := string(Markdown(r))
	for _, want := range []string{
		"every API server ready in 12.5 s, every CRD Established in every cluster in 21.2 s",
		"Cluster processes per cluster: 230.0 MB RSS (shared processes counted by their share), 160.0 MB with each binary's shared pages counted once.",
		"| etcd | 3 | 150.0 | 50.0 | 30.0 |",
		"etcd-share 50.0, kube-apiserver 180.0",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	bench := string(Bench(r))
	for _, want := range []string{
		"BenchmarkSetup/clusters=3/services=300/pods=4000 1 40 total-s 12.5 apiservers-ready-s 21.25 crds-established-s 2.3e+08 rss-per-cluster-B 1.6e+08 unique-per-cluster-B",
		"BenchmarkSetup/clusters=3/services=300/pods=4000/shared=etcd 1 1.5e+08 rss-B 3e+07 db-B",
	} {
		if !strings.Contains(bench, want) {
			t.Errorf("bench.txt lacks %q:\n%s", want, bench)
		}
	}
	raw, err := json.Marshal(r.Setup)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"apiServersReadySeconds":12.5`, `"crdsEstablishedSeconds":21.25`, `"shared":[{"name":"etcd"`, `"databaseBytes":30000000`, `"perClusterRSSBytes":230000000`, `"perClusterUniqueBytes":160000000`} {
		if !strings.Contains(string(raw), key) {
			t.Errorf("setup JSON lacks %s: %s", key, raw)
		}
	}
}

// Start waves, CPU per process and the published EndpointSlices reach the JSON and report.md, and
// are absent where a run did not measure them.
func TestSetupWavesCPUAndEndpointSlices(t *testing.T) {
	r := fullReport()
	r.Setup = &Setup{TotalSeconds: 40,
		StartWaves: []StartWave{{Clusters: []string{"cluster-1", "cluster-2"}, StartSeconds: 0, ReadySeconds: 4.5}, {Clusters: []string{"cluster-3"}, StartSeconds: 4.5, ReadySeconds: 7.25}},
		Clusters: []ClusterSetup{{Name: "cluster-1", ReadySeconds: 4, CPUSeconds: map[string]float64{"kube-apiserver": 24.5, "kube-controller-manager": 3.75},
			EndpointSlices: new(300), Endpoints: new(4000)}}}
	md := string(Markdown(r))
	for _, want := range []string{
		"| 1 | cluster-1, cluster-2 | 0.0 | 4.5 |",
		"| 2 | cluster-3 | 4.5 | 7.2 |",
		"kube-apiserver 24.5, kube-controller-manager 3.8 |",
		"| 300 | 4000 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	raw, err := json.Marshal(r.Setup)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"startWaves":[{"clusters":["cluster-1","cluster-2"],"startSeconds":0,"readySeconds":4.5}`,
		`"cpuSeconds":{"kube-apiserver":24.5,"kube-controller-manager":3.75}`, `"endpointSlices":300`, `"endpoints":4000`} {
		if !strings.Contains(string(raw), key) {
			t.Errorf("setup JSON lacks %s: %s", key, raw)
		}
	}
	raw, err = json.Marshal(&Setup{TotalSeconds: 1, Clusters: []ClusterSetup{{Name: "c"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"startWaves", "cpuSeconds", "endpointSlices", "endpoints"} {
		if strings.Contains(string(raw), `"`+key+`"`) {
			t.Errorf("setup JSON has %s although nothing was measured: %s", key, raw)
		}
	}
}
