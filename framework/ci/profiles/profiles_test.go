package profiles

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ambientmc/ambientmc/framework/measure"
)

// debugServer serves Go's own pprof handlers, as istiod registers them on its HTTP port.
func debugServer(t *testing.T) *measure.Sampler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	srv := httptest.NewServer(mux) // 127.0.0.1
	t.Cleanup(srv.Close)
	return &measure.Sampler{Name: "cluster-1/istiod", DebugURL: srv.URL}
}

func TestProfilesAreKeptUnderNamesThatSayWhen(t *testing.T) {
	dir := t.TempDir()
	s := New(dir, true)
	i := debugServer(t)
	ctx := context.Background()
	wait := s.CPU(ctx, i, "cluster-1", "join-cluster-3", time.Second)
	if _, err := s.Snapshot(ctx, i, "cluster-1", "baseline"); err != nil {
		t.Fatal(err)
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Snapshot(ctx, i, "cluster-1", "after-leave-cluster-3"); err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, p := range s.Taken() {
		files = append(files, p.File)
		if p.Bytes == 0 || p.Seconds <= 0 || p.Istiod != "cluster-1" {
			t.Errorf("%+v", p)
		}
	}
	want := []string{"profiles/istiod-cluster-1-heap-baseline.pb.gz", "profiles/istiod-cluster-1-goroutine-baseline.pb.gz",
		"profiles/istiod-cluster-1-cpu-join-cluster-3.pb.gz", "profiles/istiod-cluster-1-heap-after-leave-cluster-3.pb.gz",
		"profiles/istiod-cluster-1-goroutine-after-leave-cluster-3.pb.gz"}
	if !slices.Equal(files, want) {
		t.Fatalf("kept %v\nwant %v", files, want)
	}
	if cpu := s.Taken()[2]; cpu.Kind != CPU || cpu.Seconds < 1 || cpu.WaitedSeconds == nil || *cpu.WaitedSeconds > cpu.Seconds {
		t.Errorf("the CPU profile must run its second, and say how long it was waited for: %+v", cpu)
	}
	// The files are profiles pprof itself reads (one of each kind: each run of pprof costs seconds).
	if _, err := exec.LookPath("go"); err == nil {
		for _, f := range want[:3] {
			out, err := exec.Command("go", "tool", "pprof", "-raw", filepath.Join(dir, f)).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "PeriodType") {
				t.Errorf("go tool pprof -raw %s: %v\n%.300s", f, err, out)
			}
		}
	}
}

func TestBearingOn(t *testing.T) {
	s := New(t.TempDir(), true)
	i := debugServer(t)
	ctx := context.Background()
	if _, err := s.Snapshot(ctx, i, "cluster-1", "baseline"); err != nil {
		t.Fatal(err)
	}
	if err := s.CPU(ctx, i, "cluster-1", "join-cluster-2", time.Second)(); err != nil {
		t.Fatal(err)
	}
	heap := []string{"profiles/istiod-cluster-1-heap-baseline.pb.gz"}
	cpu := []string{"profiles/istiod-cluster-1-goroutine-baseline.pb.gz", "profiles/istiod-cluster-1-cpu-join-cluster-2.pb.gz"}
	for path, want := range map[string][]string{
		"controlPlane.perRemoteCluster.liveHeapBytes.value":  heap,
		"controlPlane.leaves[*].rssBytes":                    heap,
		"Join/perRemote:live-heap-B":                         heap,
		"controlPlane.joins[*].convergenceSeconds":           cpu,
		"controlPlane.perRemoteCluster.joinCPUSeconds.value": cpu,
		"Join/growth:join-cpu-s-first":                       cpu,
		"istiodChecks[*].result":                             {heap[0], cpu[0]},
		"latency.overhead.new.deltaMs":                       nil,
		"churn.runs[*].lost":                                 nil,
	} {
		got := s.BearingOn(path)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", path, got, want)
		}
	}
}

func TestDisabledAndUnreachable(t *testing.T) {
	var off *Set = New(t.TempDir(), false)
	if _, err := off.Snapshot(context.Background(), &measure.Sampler{}, "c", "w"); err != nil || off.Taken() != nil || off.BearingOn("controlPlane.x") != nil {
		t.Error("-profiles=false takes nothing")
	}
	s := New(t.TempDir(), true)
	_, err := s.Snapshot(context.Background(), &measure.Sampler{Name: "cluster-1/istiod"}, "cluster-1", "baseline")
	if err == nil || !strings.Contains(err.Error(), "istiod cluster-1/istiod: the provider does not reach its debug port, so it has no profiles") {
		t.Errorf("no debug URL: %v", err)
	}
	notPprof := httptest.NewServer(http.NotFoundHandler())
	defer notPprof.Close()
	_, err = s.Snapshot(context.Background(), &measure.Sampler{Name: "x", DebugURL: notPprof.URL}, "cluster-1", "baseline")
	if err == nil || !strings.Contains(err.Error(), "HTTP 404 Not Found") || len(s.Taken()) != 0 {
		t.Errorf("404: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(s.reportDir, Dir)); len(entries) != 0 {
		t.Errorf("a failed profile left files: %v", entries)
	}
}
