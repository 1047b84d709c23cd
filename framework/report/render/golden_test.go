package render

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/ambientmc/ambientmc/framework/report/reporttest"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from what Write writes now")

// goldenDir holds what Write wrote for reporttest.Every: a change to any output shows up as a diff.
const goldenDir = "testdata/golden"

// The bench header's goos and goarch are the machine's.
var hostHeader = regexp.MustCompile(`(?m)^(goos|goarch): .*$`)

// Every file Write writes for a report that fills every section is byte for byte the golden copy.
func TestWriteMatchesGolden(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, reporttest.Every()); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 7 {
		t.Errorf("Write wrote %d files, want report.json, report.md, bench.txt and four charts", len(entries))
	}
	for _, e := range entries {
		got, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got = hostHeader.ReplaceAll(got, []byte("$1: HOST"))
		golden := filepath.Join(goldenDir, e.Name())
		if *update {
			if err := os.MkdirAll(goldenDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (go test -run TestWriteMatchesGolden -update writes it)", err)
		}
		if string(got) != string(want) {
			t.Errorf("%s differs from %s:\n%s", e.Name(), golden, firstDiff(string(got), string(want)))
		}
	}
}

// firstDiff shows where two texts first differ, with a little context.
func firstDiff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-80)
	return "got:  ..." + got[from:min(len(got), i+80)] + "\nwant: ..." + want[from:min(len(want), i+80)]
}
