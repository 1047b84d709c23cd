package report_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/reporttest"
)

// Start waves, CPU per process and the published EndpointSlices reach the JSON, and
// are absent where a run did not measure them.
// A shared etcd is listed once with its database size and the setup time breakdown is kept.
func TestSetupSharedProcessesAndBreakdown(t *testing.T) {
	raw, err := json.Marshal(reporttest.SharedEtcd().Setup)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"apiServersReadySeconds":12.5`, `"crdsEstablishedSeconds":21.25`, `"shared":[{"name":"etcd"`, `"databaseBytes":30000000`, `"perClusterRSSBytes":230000000`, `"perClusterUniqueBytes":160000000`} {
		if !strings.Contains(string(raw), key) {
			t.Errorf("setup JSON lacks %s: %s", key, raw)
		}
	}
}

func TestSetupWavesCPUAndEndpointSlices(t *testing.T) {
	r := reporttest.StartWaves()
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
	raw, err = json.Marshal(&report.Setup{TotalSeconds: 1, Clusters: []report.ClusterSetup{{Name: "c"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"startWaves", "cpuSeconds", "endpointSlices", "endpoints"} {
		if strings.Contains(string(raw), `"`+key+`"`) {
			t.Errorf("setup JSON has %s although nothing was measured: %s", key, raw)
		}
	}
}
