package render

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/bench"
	"github.com/ambientmc/ambientmc/framework/report/markdown"
	"github.com/ambientmc/ambientmc/framework/report/reporttest"
	"github.com/ambientmc/ambientmc/framework/report/svg"
)

var charts = []string{svg.ControlPlaneFile, svg.LatencyFile, svg.ChurnFile, svg.RotationFile}

func TestWriteProducesAllFiles(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, reporttest.Every()); err != nil {
		t.Fatal(err)
	}
	for _, f := range append([]string{report.JSONFile, markdown.File, bench.File}, charts...) {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v (size %v)", f, err, st)
		}
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
	if len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
}

func TestWriteOmitsChartsForAbsentSections(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, reporttest.Every()); err != nil {
		t.Fatal(err)
	}
	// Same directory, a run without control plane, latency, churn or checks: old charts must not survive.
	r := report.New(report.ProviderLocal)
	if err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	for _, f := range charts {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still present (err %v)", f, err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, markdown.File))
	if strings.Contains(string(md), ".svg") || strings.Contains(string(md), "## Latency") {
		t.Errorf("report.md mentions absent sections:\n%s", md)
	}
}

func TestWriteRejectsInvalid(t *testing.T) {
	r := reporttest.Full()
	r.DataPlane = "sidecar" // no provider declares it
	dir := t.TempDir()
	if err := Write(dir, r); err == nil {
		t.Fatal("Write accepted dataPlane sidecar")
	}
	if _, err := os.Stat(filepath.Join(dir, report.JSONFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("report.json written for an invalid report (err %v)", err)
	}
}

// What Write wrote reads back as the report it was given.
func TestWriteReadsBack(t *testing.T) {
	want := reporttest.Full()
	dir := t.TempDir()
	if err := Write(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := report.Read(filepath.Join(dir, report.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	gj, _ := report.JSON(got)
	wj, _ := report.JSON(want)
	if string(gj) != string(wj) {
		t.Errorf("read back differs:\n got %s\nwant %s", gj, wj)
	}
}
