// Package render writes a report's files into a report directory: report.json (package report),
// report.md (markdown), bench.txt (bench) and the charts (svg).
package render

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/bench"
	"github.com/ambientmc/ambientmc/framework/report/markdown"
	"github.com/ambientmc/ambientmc/framework/report/svg"
)

// Write validates r and writes report.json, report.md and bench.txt to dir (created if needed),
// plus each chart the report has data for (controlplane.svg when the control plane has joins,
// latency.svg when latency has runs, churn.svg and rotation.svg likewise). A chart the run did
// not produce is removed, so a reused directory never shows a stale one. An invalid report is
// not written: a mislabelled data plane must not reach a reader. A NaN or Inf anywhere in r does
// not stop it: the value is left out (optional ones become nil in r) and r.Warnings says which
// field and why.
func Write(dir string, r *report.Report) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := report.JSON(r)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		report.JSONFile: append(js, '\n'),
		markdown.File:   markdown.Render(r),
		bench.File:      bench.Render(r),
	}
	stale := []string{}
	for name, chart := range map[string][]byte{
		svg.ControlPlaneFile: svg.ControlPlane(r.ControlPlane),
		svg.LatencyFile:      svg.Latency(r.Latency),
		svg.ChurnFile:        svg.Churn(r.Churn),
		svg.RotationFile:     svg.Rotation(r.IstiodChecks),
	} {
		if chart != nil {
			files[name] = chart
		} else {
			stale = append(stale, name)
		}
	}
	var errs []error
	for name, b := range files {
		errs = append(errs, writeFile(filepath.Join(dir, name), b))
	}
	for _, name := range stale {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// writeFile writes through a temporary file and a rename, so a reader never sees half a report.
func writeFile(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
