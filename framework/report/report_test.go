package report_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/reporttest"
)

func TestJSONRoundTrip(t *testing.T) {
	want := reporttest.Full()
	js, err := report.JSON(want)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), report.JSONFile)
	if err := os.WriteFile(p, js, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := report.Read(p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		t.Errorf("round trip differs:\n got %s\nwant %s", gj, wj)
	}
}

func keys(t *testing.T, v any, path string) []string {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s is %T, want an object", path, v)
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func wantKeys(t *testing.T, v any, path string, want ...string) {
	t.Helper()
	got := keys(t, v, path)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s keys:\n got %v\nwant %v", path, got, want)
	}
}

// The names below are the base schema's (docs/report.md#the-json-schema); extras are marked.
func TestJSONKeysMatchDesign(t *testing.T) {
	b, err := json.Marshal(reporttest.Full())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	wantKeys(t, m, "report", "schemaVersion", "provider", "dataPlane", "istio", "istiod", "kubernetes", "host", "topology",
		"scale", "controlPlane", "latency", "reference",
		"warnings", "setup") // extras
	if m["schemaVersion"] != 2.0 {
		t.Errorf("schemaVersion = %v, want 2", m["schemaVersion"])
	}
	wantKeys(t, m["host"], "host", "cpus", "memoryBytes")
	wantKeys(t, m["istiod"], "istiod", "version", "binary", "sha256", // the base schema
		"versionOutput", "replacedPins", "goVersion") // extras
	wantKeys(t, m["topology"], "topology", "clusters")
	wantKeys(t, m["topology"].(map[string]any)["clusters"].([]any)[0], "topology.clusters[0]", "name", "network", "primary")
	wantKeys(t, m["scale"], "scale", "servicesPerCluster", "podsPerCluster")

	cp := m["controlPlane"].(map[string]any)
	wantKeys(t, cp, "controlPlane", "observedIstiod", "istiods", "baseline", "joins", "perRemoteCluster",
		"leaves", "cpuSource", "cpuResolutionSeconds", "settleSeconds", "steadyWindowSeconds") // extras
	sample := []string{"cpuCores", "steadyCPUCores", "rssBytes", "heapInuseBytes", "liveHeapBytes",
		"cpuCoresResolution", "steadyCPUCoresResolution", "workingSetBytes"} // extras
	wantKeys(t, cp["baseline"], "controlPlane.baseline", sample...)
	wantKeys(t, cp["joins"].([]any)[0], "controlPlane.joins[0]", append([]string{
		"cluster", "remoteClusters", "syncSeconds", "xdsSeconds", "convergenceSeconds", "joinCPUSeconds",
		"deltaCPUCores", "deltaRSSBytes", "deltaHeapInuseBytes", "deltaLiveHeapBytes",
		"joinCPUSecondsResolution"}, sample...)...) // the last an extra
	perRemote := cp["perRemoteCluster"].(map[string]any)
	wantKeys(t, perRemote, "controlPlane.perRemoteCluster", "cpuCores", "steadyCPUCores", "joinCPUSeconds", "rssBytes", "heapInuseBytes", "liveHeapBytes", "workingSetBytes",
		"stdErrOf") // an extra
	wantKeys(t, perRemote["rssBytes"], "controlPlane.perRemoteCluster.rssBytes", "value", "stdErr")
	wantKeys(t, perRemote["cpuCores"], "controlPlane.perRemoteCluster.cpuCores", "value", "stdErr", "resolution")
	wantKeys(t, cp["leaves"].([]any)[0], "controlPlane.leaves[0]",
		"cluster", "remoteClusters", "seconds", "rssBytes", "liveHeapBytes", "managedRemoteClusters")

	lat := m["latency"].(map[string]any)
	wantKeys(t, lat, "latency", "runs", "overhead",
		"harnessFloor", "hostCPUSaturated") // extras
	run := []string{"path", "connections", "qps", "durationSeconds", "requests", "errors", "avgMs", "p50Ms", "p90Ms", "p99Ms",
		"hostCPUBusy"} // extra
	wantKeys(t, lat["runs"].([]any)[0], "latency.runs[0]", run...)
	wantKeys(t, lat["harnessFloor"].([]any)[0], "latency.harnessFloor[0]", run...)
	wantKeys(t, lat["overhead"], "latency.overhead", "new", "reused")
	wantKeys(t, lat["overhead"].(map[string]any)["new"], "latency.overhead.new", "deltaMs", "percent")

	wantKeys(t, m["reference"], "reference", "perRemoteClusterCPUCores", "perRemoteClusterMemoryBytes",
		"newConnOverheadMs", "newConnOverheadPercent", "reusedConnOverheadMs", "reusedConnOverheadPercent",
		"scale") // extra
	wantKeys(t, m["setup"], "setup", "clusters", "totalSeconds")
	wantKeys(t, m["setup"].(map[string]any)["clusters"].([]any)[0], "setup.clusters[0]", "name", "readySeconds", "rssBytes")
}

func TestAbsentSectionsAreAbsent(t *testing.T) {
	r := report.New(report.ProviderKind)
	r.Topology = report.Topology{Clusters: []report.TopologyCluster{{Name: "c1", Network: "n1", Primary: true}}}
	r.ControlPlane = &report.ControlPlane{
		ObservedIstiod: "c1", Istiods: report.IstiodsObserved,
		Baseline: report.Sample{RSSBytes: report.F(100e6), CPUCores: report.F(0)}, // a zero reading is real and must stay
		Joins:    []report.Join{{Cluster: "c2", RemoteClusters: 1, SyncSeconds: report.F(0.5), Sample: report.Sample{RSSBytes: report.F(200e6)}}},
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	wantKeys(t, m, "report", "schemaVersion", "provider", "host", "topology", "controlPlane", "reference")
	cp := m["controlPlane"].(map[string]any)
	wantKeys(t, cp, "controlPlane", "observedIstiod", "istiods", "baseline", "joins")
	wantKeys(t, cp["baseline"], "baseline", "rssBytes", "cpuCores")
	wantKeys(t, cp["joins"].([]any)[0], "joins[0]", "cluster", "remoteClusters", "syncSeconds", "rssBytes")
	for _, absent := range []string{"null", `"latency"`, `"liveHeapBytes"`, `"dataPlane"`} {
		if strings.Contains(string(b), absent) {
			t.Errorf("JSON contains %s: %s", absent, b)
		}
	}
}

func TestPublished(t *testing.T) {
	want := report.Reference{PerRemoteClusterCPUCores: 0.01, PerRemoteClusterMemoryBytes: 180000000,
		NewConnOverheadMs: 2.2, NewConnOverheadPercent: 346, ReusedConnOverheadMs: 0.13, ReusedConnOverheadPercent: 72,
		Scale: report.Scale{ServicesPerCluster: 300, PodsPerCluster: 4000}}
	if report.Published() != want {
		t.Errorf("Published() = %+v", report.Published())
	}
	if report.New(report.ProviderLocal).Reference != want {
		t.Error("New does not fill the reference")
	}
}

func TestValidate(t *testing.T) {
	if err := reporttest.Full().Validate(); err != nil {
		t.Fatalf("full report: %v", err)
	}
	// Every holds each optional section, a same-network latency run among them (a mixed topology).
	if err := reporttest.Every().Validate(); err != nil {
		t.Fatalf("report with every section: %v", err)
	}
	for name, mutate := range map[string]func(*report.Report){
		"latency without dataPlane": func(r *report.Report) { r.DataPlane = "" },
		"no provider":               func(r *report.Report) { r.Provider = "" },
		"unknown dataPlane":         func(r *report.Report) { r.DataPlane = "sidecar" },
		"schema version":            func(r *report.Report) { r.SchemaVersion = 1 },
		"istiods":                   func(r *report.Report) { r.ControlPlane.Istiods = "some" },
		"run path":                  func(r *report.Report) { r.Latency.Runs[0].Path = report.PathDirect },
		"run connections":           func(r *report.Report) { r.Latency.Runs[0].Connections = "pooled" },
		"floor path":                func(r *report.Report) { r.Latency.HarnessFloor[0].Path = report.PathLocal },
	} {
		r := reporttest.Full()
		mutate(r)
		if err := r.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
	// Any provider name with the data plane it declares is fine, and so is a report without one.
	for _, dp := range []string{report.DataPlaneEmulated, report.DataPlaneZtunnel} {
		r := reporttest.Full()
		r.Provider, r.DataPlane = "k3d", dp
		if err := r.Validate(); err != nil {
			t.Errorf("k3d with %s: %v", dp, err)
		}
	}
	if err := report.New(report.ProviderKube).Validate(); err != nil {
		t.Errorf("kube without data plane: %v", err)
	}
}

func TestReadRejectsOtherSchema(t *testing.T) {
	p := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(p, []byte(`{"schemaVersion": 1, "provider": "local"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := report.Read(p); err == nil {
		t.Error("Read accepted schemaVersion 1 (per-remote figures without their errors beside them)")
	}
	if err := os.WriteFile(p, []byte(`{`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := report.Read(p); err == nil {
		t.Error("Read accepted broken JSON")
	}
}
