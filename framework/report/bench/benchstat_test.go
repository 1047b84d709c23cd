package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/analysis"
	"github.com/ambientmc/ambientmc/framework/report/reporttest"
)

// Benchstat is the benchstat that make compare runs (scripts/compare pins the same version).
const benchstatPkg = "golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da"

// benchFile writes five rounds of a report's bench lines, its live heap scaled by heap, as an
// A/B comparison would collect them for one istiod.
func benchFile(t *testing.T, dir, name, istiodVersion string, heap float64, extraHeader string) string {
	t.Helper()
	var all []byte
	for round := range 5 { // benchstat needs 4 or more samples to call a difference
		r := reporttest.Full()
		r.Istiod = &report.IstiodBuild{Version: istiodVersion, Binary: "/cache/" + istiodVersion + "/pilot-discovery", SHA256: strings.Repeat("ab", 32)}
		for i := range r.ControlPlane.Joins {
			*r.ControlPlane.Joins[i].LiveHeapBytes *= heap * (1 + 0.01*float64(round))
		}
		if err := analysis.FitPerRemote(r.ControlPlane); err != nil {
			t.Fatal(err)
		}
		all = append(all, extraHeader...)
		all = append(all, Render(r)...)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, all, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runBenchstat(t *testing.T, files ...string) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command to run benchstat")
	}
	args := []string{"run", benchstatPkg}
	for _, f := range files {
		args = append(args, filepath.Base(f))
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Dir(files[0])
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("benchstat: %v\n%s", err, out)
	}
	return string(out)
}

// sideBySide reports whether benchstat compared the two files in one table per unit: one
// configuration block, and every column header names both files.
func sideBySide(out string) (bool, string) {
	if n := strings.Count(out, "pkg: "); n != 1 {
		return false, "configuration blocks: " + strings.Repeat("x", n)
	}
	headers := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "a.txt") || strings.Contains(l, "b.txt") {
			headers++
			if !strings.Contains(l, "a.txt") || !strings.Contains(l, "b.txt") {
				return false, "a column header with one file only: " + l
			}
		}
	}
	if headers == 0 || !strings.Contains(out, "vs base") {
		return false, "no comparison columns"
	}
	return true, ""
}

// Two runs on different istiods must compare side by side under a plain benchstat a b.
func TestBenchstatComparesTwoIstiods(t *testing.T) {
	dir := t.TempDir()
	a := benchFile(t, dir, "a.txt", "v0.0.0-20260827124520-eed52ebb66ad", 1, "")
	b := benchFile(t, dir, "b.txt", "v0.0.0-20260826214018-9739e10eb9d7", 1.3, "")
	out := runBenchstat(t, a, b)
	if ok, why := sideBySide(out); !ok {
		t.Fatalf("benchstat did not compare side by side (%s):\n%s", why, out)
	}
	for _, want := range []string{"live-heap-B", "returned-live-heap-B", "convergence-s", "join-cpu-s", "leave-s", "avg-ms",
		"Join/clusters=3/services=300/pods=4000/istiods=all/perRemote"} {
		if !strings.Contains(out, want) {
			t.Errorf("benchstat output lacks %q", want)
		}
	}
	// The live heap of b is 30% larger: benchstat must show it as a change, not "~".
	if !strings.Contains(out, "+30") {
		t.Errorf("no +30%% live-heap change in:\n%s", out)
	}

	// Control: a header line that differs between the files (as "istiod: ..." or "scale: ..." did)
	// splits them into separate tables, which is what the check above would catch.
	a2 := benchFile(t, dir, "a.txt", "x", 1, "istiod: x\n")
	b2 := benchFile(t, dir, "b.txt", "y", 1.3, "istiod: y\n")
	if ok, _ := sideBySide(runBenchstat(t, a2, b2)); ok {
		t.Fatal("differing header lines did not split the tables: the side-by-side check proves nothing")
	}
}
