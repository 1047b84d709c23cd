package baseline

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/perf/benchfmt"

	"github.com/ambientmc/ambientmc/framework/report/bench"
)

// Key is one benchmark's full name (without "Benchmark") and one of its units.
type Key struct{ Name, Unit string }

// Samples holds every value of each key, one per run that wrote it.
type Samples map[Key][]float64

// Read loads bench lines from path: a file of bench lines, a report directory (its bench.txt),
// or a directory of report directories (each one's bench.txt: e.g. make compare's a-1, a-2, ...).
// It returns the files it read.
func Read(path string) (Samples, []string, error) {
	files, err := benchFiles(path)
	if err != nil {
		return nil, nil, err
	}
	s := Samples{}
	for _, f := range files {
		if err := s.readFile(f); err != nil {
			return nil, nil, err
		}
	}
	if len(s) == 0 {
		return nil, nil, fmt.Errorf("%s: no benchmark lines in %s", path, strings.Join(files, ", "))
	}
	return s, files, nil
}

func benchFiles(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	if own := filepath.Join(path, bench.File); exists(own) {
		return []string{own}, nil
	}
	subs, err := filepath.Glob(filepath.Join(path, "*", bench.File))
	if err != nil {
		return nil, err
	}
	if len(subs) == 0 {
		return nil, fmt.Errorf("%s has no %s, and no sub-directory has one: give a report directory, a directory of them, or a file of bench lines", path, bench.File)
	}
	slices.Sort(subs)
	return subs, nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func (s Samples) readFile(name string) error {
	b, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	return s.ReadBench(name, b)
}

// ReadBench adds the bench lines in data (read from name) to s.
func (s Samples) ReadBench(name string, data []byte) error {
	r := benchfmt.NewReader(bytes.NewReader(data), name)
	for r.Scan() {
		switch rec := r.Result().(type) {
		case *benchfmt.Result:
			for _, v := range rec.Values {
				unit, val := v.Unit, v.Value
				if v.OrigUnit != "" { // benchfmt tidies some units; selectors name them as written
					unit, val = v.OrigUnit, v.OrigValue
				}
				k := Key{Name: string(rec.Name.Full()), Unit: unit}
				s[k] = append(s[k], val)
			}
		case *benchfmt.SyntaxError:
			return rec
		}
	}
	return r.Err()
}

// Match returns the keys sel picks, sorted.
func (s Samples) Match(sel Selector) []Key {
	var out []Key
	for k := range s {
		if k.Unit == sel.Unit && sel.matches(k.Name) {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b Key) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (sel Selector) matches(full string) bool {
	base, parts := benchfmt.Name(full).Parts()
	if string(base) != sel.Base {
		return false
	}
	for _, want := range sel.Parts {
		if !slices.ContainsFunc(parts, func(p []byte) bool { return string(p) == "/"+want }) {
			return false
		}
	}
	return true
}

// names lists the distinct benchmark names with base, for error messages.
func (s Samples) names(base string) []string {
	var out []string
	for k := range s {
		if b, _ := benchfmt.Name(k.Name).Parts(); string(b) == base && !slices.Contains(out, k.Name) {
			out = append(out, k.Name)
		}
	}
	slices.Sort(out)
	return out
}
