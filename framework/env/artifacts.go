package env

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ambientmc/ambientmc/framework/report"
)

// collectArtifacts runs after teardown. On failure it puts every component's log where CI looks:
// with $ARTIFACTS, a copy of the run directory in $ARTIFACTS/logs (it holds the providers' cluster
// dumps too: keepLogs had kind export them there before the clusters went); without, the kept run
// directory. The report says where.
func (e *Env) collectArtifacts(code int) {
	e.mu.Lock()
	failed := code != 0 || e.keepRunDir
	e.mu.Unlock()
	if !failed || e.RunDir == "" {
		return
	}
	logs := e.RunDir
	if os.Getenv(ArtifactsEnv) != "" && e.ReportDir != "" {
		dst := filepath.Join(e.ReportDir, LogsDir)
		if err := copyLogs(e.RunDir, dst); err != nil {
			e.Logf("artifacts: copying %s: %v", e.RunDir, err)
		}
		logs = LogsDir
		e.Logf("artifacts: component logs copied to %s", dst)
	}
	if e.Report == nil {
		return
	}
	if e.Report.Artifacts == nil {
		e.Report.Artifacts = &report.Artifacts{}
	}
	e.Report.Artifacts.Logs = logs
	if err := e.writeReport(); err != nil {
		e.Logf("writing the report: %v", err)
	}
}

// copyLogs copies the readable files of src into dst: logs, configs and certificates, but no
// credential (files only their owner may read: keys, tokens, kubeconfigs) and no etcd data,
// since CI artifacts are often public.
func copyLogs(src, dst string) error {
	var errs []error
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			if d.Name() == "data" && rel != "." { // etcd's data directory: the database, not a log
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		info, err := d.Info()
		if err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o044 == 0 {
			return nil
		}
		if err := copyFile(path, filepath.Join(dst, rel)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", rel, err))
		}
		return nil
	})
	return errors.Join(append(errs, err)...)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
