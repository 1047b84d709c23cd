package baseline

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// The benchmath this package links is the one inside the benchstat make compare runs.
func TestBenchstatPinMatchesGoMod(t *testing.T) {
	data, err := os.ReadFile("../../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	mf, err := modfile.Parse("go.mod", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, pin, _ := strings.Cut(Benchstat, "@")
	for _, r := range mf.Require {
		if r.Mod.Path == "golang.org/x/perf" {
			if r.Mod.Version != pin {
				t.Fatalf("go.mod pins golang.org/x/perf %s, Benchstat runs %s: make them one version", r.Mod.Version, pin)
			}
			return
		}
	}
	t.Fatal("go.mod does not require golang.org/x/perf")
}

// Judge calls a difference significant exactly where the real benchstat prints a percentage
// rather than "~", on the same files.
func TestVerdictsAgreeWithBenchstat(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command to run benchstat")
	}
	dir := t.TempDir()
	var base, up30, up30few []string
	for i := range 5 {
		d := float64(i) * 0.01e6
		base = append(base, benchLines(3e6+d, 0.07))
		up30 = append(up30, benchLines(3.9e6+d, 0.07+float64(i%2)*0.001))
	}
	up30few = up30[:3]
	write := func(name string, runs []string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(runs, "")), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("base.txt", base)
	write("up.txt", up30)
	write("few.txt", up30few)
	run := func(a, b string) string {
		cmd := exec.Command("go", "run", Benchstat, "-format=csv", a, b)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("benchstat: %v\n%s", err, out)
		}
		return string(out)
	}
	sel := Selector{Base: "Join", Parts: []string{"perRemote"}, Unit: "live-heap-B"}
	for _, c := range []struct {
		file        string
		runs        []string
		significant bool
	}{{"up.txt", up30, true}, {"few.txt", up30few, true}, {"base.txt", base, false}} {
		out := run("base.txt", c.file)
		row := csvRow(t, out, "live-heap-B", "perRemote")
		tilde := strings.Contains(row, ",~,")
		gs := Judge(samples(t, base...), samples(t, c.runs...), []Bound{{Selector: sel, MaxIncrease: ptr(0)}}, 0.05)
		ours := gs[0].Verdict == "fail"
		if ours == tilde {
			t.Errorf("%s: benchstat row %q, our verdict %s (%s)", c.file, row, gs[0].Verdict, gs[0].Message)
		}
		if p := fmt.Sprintf("p=%.3f", gs[0].Baseline.P); !strings.Contains(row, p) {
			t.Errorf("%s: benchstat row %q, our %s", c.file, row, p)
		}
	}
}

// csvRow finds the row of benchstat's CSV for the unit's table whose name contains part.
func csvRow(t *testing.T, out, unit, part string) string {
	t.Helper()
	inUnit := false
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, unit) && !strings.Contains(line, part) {
			inUnit = true
			continue
		}
		if inUnit && strings.Contains(line, part) {
			return line
		}
	}
	t.Fatalf("no %s row for %s in benchstat's output:\n%s", unit, part, out)
	return ""
}
