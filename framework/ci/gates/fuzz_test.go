package gates

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/ambientmc/ambientmc/framework/ci/baseline"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/reporttest"
)

// parseError is how Parse's errors begin: the YAML parser's own, a line and the part of the file
// it is in, or one of the two whole-file refusals.
var parseError = regexp.MustCompile(`^(yaml: |line (\d+): (the file|gates|baseline)|empty: |no bounds: )`)

// FuzzParse feeds Parse arbitrary gates files. What it accepts holds bounds whose paths are in
// the report schema, spelled as they render, of the form their values take, and judges a full
// report into one verdict per bound; what it refuses gets an error that says where and what.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob("../../../gates/*.yaml")
	if err != nil || len(files) < 3 {
		f.Fatalf("gates files: %v %v", files, err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(schemaPathsFile))
	for _, c := range badGatesFiles {
		f.Add([]byte(c.file))
	}
	full, err := report.JSON(reporttest.Every())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("fuzz.yaml", data)
		if err != nil {
			if file != nil {
				t.Fatalf("Parse returned a file with its error %v", err)
			}
			m := parseError.FindStringSubmatch(err.Error())
			if m == nil {
				t.Fatalf("error %q says neither where nor what", err)
			}
			if m[2] != "" {
				if n, _ := strconv.Atoi(m[2]); n < 1 || n > lines(data) {
					t.Fatalf("error %q names line %d of a %d-line file", err, n, lines(data))
				}
			}
			return
		}
		checkFile(t, file, data)
		gs, err := file.Judge(full)
		if err != nil {
			t.Fatal(err)
		}
		if len(gs) != len(file.Bounds) {
			t.Fatalf("%d gates for %d bounds", len(gs), len(file.Bounds))
		}
		for i, g := range gs {
			if g.Path != file.Bounds[i].Path || g.Message == "" {
				t.Errorf("gate %d: %+v", i, g)
			}
		}
		r := report.New(report.ProviderLocal)
		r.Gates = gs
		if err := r.Validate(); err != nil {
			t.Error(err)
		}
	})
}

// checkFile holds an accepted file to what Judge and the baseline comparison rely on.
func checkFile(t *testing.T, f *File, data []byte) {
	t.Helper()
	if f.Name != "fuzz.yaml" || len(f.Bounds)+len(f.Baseline) == 0 || !(f.Alpha > 0 && f.Alpha < 1) {
		t.Fatalf("file %q with %d bounds, %d baseline bounds, alpha %v", f.Name, len(f.Bounds), len(f.Baseline), f.Alpha)
	}
	finite := func(x *float64) bool { return x == nil || !math.IsNaN(*x) && !math.IsInf(*x, 0) }
	for _, b := range f.Bounds {
		p, err := parsePath(b.Path)
		if err != nil || !reflect.DeepEqual(p, b.path) {
			t.Fatalf("%s: parses again as %v, %v; was %v", b.Path, p, err, b.path)
		}
		// One spelling per path, so that "appears twice" catches every repeat.
		if p.String() != b.Path {
			t.Errorf("%q renders as %q", b.Path, p.String())
		}
		if l, err := resolve(p); err != nil || l != b.leaf {
			t.Errorf("%s: resolves as %v, %v; was %v", b.Path, l, err, b.leaf)
		}
		switch {
		case b.Min == nil && b.Max == nil && b.In == nil:
			t.Errorf("%s: no bound", b.Path)
		case !finite(b.Min) || !finite(b.Max):
			t.Errorf("%s: %s", b.Path, b)
		case b.Min != nil && b.Max != nil && *b.Min > *b.Max:
			t.Errorf("%s: %s: nothing passes", b.Path, b)
		case b.leaf == leafNumber && b.In != nil:
			t.Errorf("%s: a number bounded by in", b.Path)
		case b.leaf != leafNumber && (b.Min != nil || b.Max != nil || len(b.In) == 0):
			t.Errorf("%s: %s bounded by %s", b.Path, b.leaf, b)
		}
	}
	for _, b := range f.Baseline {
		if s, err := baseline.ParseSelector(b.Selector.String()); err != nil || !reflect.DeepEqual(s, b.Selector) {
			t.Errorf("%s: parses again as %v, %v", b.Selector, s, err)
		}
		switch {
		case b.MaxIncrease == nil && b.MaxDecrease == nil:
			t.Errorf("%s: no bound", b.Selector)
		case !finite(b.MaxIncrease) || !finite(b.MaxDecrease) ||
			b.MaxIncrease != nil && *b.MaxIncrease < 0 || b.MaxDecrease != nil && *b.MaxDecrease < 0:
			t.Errorf("%s: %s", b.Selector, b)
		}
	}
	// A reason is text: one that is a list or a mapping is not what the author meant.
	var doc map[string]any
	if yaml.Unmarshal(data, &doc) != nil {
		return
	}
	for _, section := range []any{doc["gates"], dig(doc["baseline"], "bounds")} {
		bounds, _ := section.(map[string]any)
		for k, b := range bounds {
			switch r := dig(b, "reason").(type) {
			case map[string]any, []any:
				t.Errorf("%s: reason %v accepted", k, r)
			}
		}
	}
}

// lines counts the lines of data as YAML does: \r\n, \r, \n, NEL, LS and PS each end one.
func lines(data []byte) int {
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	return 1 + strings.Count(s, "\n") + strings.Count(s, "\r") + strings.Count(s, "\u0085") + strings.Count(s, "\u2028") + strings.Count(s, "\u2029")
}

// dig is v[key] where v is a mapping, else nil.
func dig(v any, key string) any {
	m, _ := v.(map[string]any)
	return m[key]
}
