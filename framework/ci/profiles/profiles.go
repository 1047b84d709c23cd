// Package profiles keeps pprof profiles of the istiods a run measures in the report directory,
// under names that say whose and when (profiles/istiod-cluster-1-heap-baseline.pb.gz), and names
// the ones that bear on a failed gate or check.
package profiles

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/report"
)

// Dir is the profiles' directory inside the report directory.
const Dir = "profiles"

// Kinds of profile.
const (
	Heap      = "heap"
	Goroutine = "goroutine"
	CPU       = "cpu"
)

// Set is the run's profiles. A nil or disabled Set takes none.
type Set struct {
	reportDir string
	mu        sync.Mutex
	taken     []report.Profile
}

// New keeps profiles under reportDir/profiles; disabled (-profiles=false) returns nil.
func New(reportDir string, enabled bool) *Set {
	if !enabled {
		return nil
	}
	return &Set{reportDir: reportDir}
}

// Snapshot takes istiod's heap and goroutine profiles now and returns the files kept, relative to
// the report directory. The heap profile is as of istiod's last GC (no extra one is forced: the
// samplers just forced one).
func (s *Set) Snapshot(ctx context.Context, i *measure.Sampler, cluster, when string) ([]string, error) {
	if s == nil {
		return nil, nil
	}
	var errs, files []string
	for _, kind := range []string{Heap, Goroutine} {
		f, err := s.take(ctx, i, cluster, kind, when, 0)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		files = append(files, f)
	}
	if len(errs) > 0 {
		return files, fmt.Errorf("profiles: %s", strings.Join(errs, "; "))
	}
	return files, nil
}

// CPU starts a CPU profile of d in the background; wait returns when it is kept, and records how
// long it waited (the profile's cost in wall time).
func (s *Set) CPU(ctx context.Context, i *measure.Sampler, cluster, when string, d time.Duration) (wait func() error) {
	if s == nil {
		return func() error { return nil }
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.take(ctx, i, cluster, CPU, when, d)
		done <- err
	}()
	return func() error {
		start := time.Now()
		err := <-done
		waited := time.Since(start).Seconds()
		s.mu.Lock()
		defer s.mu.Unlock()
		for k := range s.taken {
			if p := &s.taken[k]; p.Kind == CPU && p.Istiod == cluster && p.When == when {
				p.WaitedSeconds = &waited
			}
		}
		return err
	}
}

func (s *Set) take(ctx context.Context, i *measure.Sampler, cluster, kind, when string, d time.Duration) (string, error) {
	name := kind
	if kind == CPU {
		name = "profile"
	}
	start := time.Now()
	data, err := i.Profile(ctx, name, int(d.Seconds()))
	if err != nil {
		return "", err
	}
	rel := filepath.Join(Dir, fmt.Sprintf("istiod-%s-%s-%s.pb.gz", cluster, kind, when))
	path := filepath.Join(s.reportDir, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.taken = append(s.taken, report.Profile{Istiod: cluster, Kind: kind, When: when, File: rel,
		Seconds: time.Since(start).Seconds(), Bytes: int64(len(data))})
	return rel, nil
}

// Taken lists the profiles kept so far, in the order they were taken.
func (s *Set) Taken() []report.Profile {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]report.Profile(nil), s.taken...)
}

// BearingOn names the kept profiles that bear on a report path or a benchmark selector: heap
// profiles for memory, CPU and goroutine profiles for CPU and timings, heap and goroutine
// profiles for the istiod property checks; none for what istiod's profiles cannot explain
// (latency through the data plane, setup).
func (s *Set) BearingOn(path string) []string {
	kinds := kindsFor(path)
	var out []string
	for _, p := range s.Taken() {
		for _, k := range kinds {
			if p.Kind == k {
				out = append(out, p.File)
			}
		}
	}
	return out
}

func kindsFor(path string) []string {
	lower := strings.ToLower(path)
	istiod := strings.HasPrefix(path, "controlPlane") || strings.HasPrefix(path, "Join") || strings.HasPrefix(path, "Leave")
	switch {
	case strings.HasPrefix(path, "istiodChecks"):
		return []string{Heap, Goroutine}
	case !istiod:
		return nil
	case strings.Contains(lower, "bytes") || strings.Contains(lower, "heap") || strings.Contains(lower, "rss") || strings.HasSuffix(path, "-B"):
		return []string{Heap}
	case strings.Contains(lower, "cpu") || strings.Contains(lower, "seconds") || strings.HasSuffix(path, "-s"):
		return []string{CPU, Goroutine}
	}
	return []string{Heap, Goroutine, CPU}
}
