// Package gates turns a run's report into a CI verdict: a -gates file bounds report values by
// their JSON path (and, with -baseline, benchmarks against an earlier run), every path is
// checked against the report schema before anything starts, and after the tests each bound is
// judged into a pass/fail line that the report and junit.xml carry.
package gates

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ambientmc/ambientmc/framework/ci/baseline"
)

// File is a parsed -gates file.
//
//	gates:
//	  controlPlane.perRemoteCluster.liveHeapBytes.value: {max: 5e6, reason: "..."}
//	  istiodChecks[*].result: {in: [pass, known-issue]}
//	baseline:                    # judged only with -baseline=DIR
//	  alpha: 0.05                # benchstat's default
//	  bounds:
//	    Join/perRemote:live-heap-B: {maxIncrease: 10%, reason: "..."}
type File struct {
	Name     string
	Bounds   []Bound // in file order
	Baseline []baseline.Bound
	// Alpha is the significance level of the baseline comparison.
	Alpha float64
}

// Bound is one gate on a report path.
type Bound struct {
	Path     string
	path     path
	leaf     leaf
	Min, Max *float64
	In       []string
	Reason   string
}

// String is the bound as the gate lines print it.
func (b Bound) String() string {
	var parts []string
	if b.Min != nil {
		parts = append(parts, "min "+fmtNum(*b.Min))
	}
	if b.Max != nil {
		parts = append(parts, "max "+fmtNum(*b.Max))
	}
	if b.In != nil {
		parts = append(parts, "in ["+strings.Join(b.In, " ")+"]")
	}
	return strings.Join(parts, ", ")
}

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// Load reads and checks a gates file: every path against the report schema, every bound's
// form. Errors name the file, line, field and fix.
func Load(name string) (*File, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("-gates=%s: %w", name, err)
	}
	f, err := Parse(name, data)
	if err != nil {
		return nil, fmt.Errorf("-gates=%s: %w", name, err)
	}
	return f, nil
}

// Parse is Load on data read from name.
func Parse(name string, data []byte) (*File, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	f := &File{Name: name, Alpha: 0.05}
	// A lone "---" is an empty document too; its null has the line after the file's last.
	if len(doc.Content) == 0 || doc.Content[0].Tag == "!!null" {
		return nil, errors.New("empty: give a gates: mapping of report paths to bounds")
	}
	top := doc.Content[0]
	err := eachPair(top, "the file", []string{"gates", "baseline"}, func(k string, v *yaml.Node) error {
		if k == "gates" {
			var err error
			f.Bounds, err = parseBounds(v, "gates", parseBound)
			return err
		}
		return parseBaseline(f, v)
	})
	if err != nil {
		return nil, err
	}
	if len(f.Bounds)+len(f.Baseline) == 0 {
		return nil, errors.New("no bounds: give a gates: mapping of report paths to bounds")
	}
	return f, nil
}

// parseBounds parses each entry of the bounds mapping n, in file order; an error names the
// entry's line and key under what.
func parseBounds[B any](n *yaml.Node, what string, parse func(string, *yaml.Node) (B, error)) ([]B, error) {
	var bounds []B
	err := eachPair(n, what, nil, func(k string, v *yaml.Node) error {
		b, err := parse(k, v)
		if err != nil {
			return fmt.Errorf("line %d: %s.%s: %w", v.Line, what, k, err)
		}
		bounds = append(bounds, b)
		return nil
	})
	return bounds, err
}

// eachPair walks a mapping node in order; known, when given, lists the keys allowed.
func eachPair(n *yaml.Node, what string, known []string, fn func(string, *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: %s must be a mapping", n.Line, what)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if known != nil && !slices.Contains(known, k.Value) {
			return fmt.Errorf("line %d: %s: unknown key %q; known: %s", k.Line, what, k.Value, strings.Join(known, ", "))
		}
		if seen[k.Value] {
			return fmt.Errorf("line %d: %s: %q appears twice; give it once", k.Line, what, k.Value)
		}
		seen[k.Value] = true
		if err := fn(k.Value, v); err != nil {
			return err
		}
	}
	return nil
}

func parseBound(p string, n *yaml.Node) (Bound, error) {
	b := Bound{Path: p}
	var err error
	if b.path, err = parsePath(p); err != nil {
		return b, err
	}
	if b.leaf, err = resolve(b.path); err != nil {
		return b, err
	}
	err = eachPair(n, "the bound", []string{"min", "max", "in", "reason"}, func(k string, v *yaml.Node) error {
		switch k {
		case "min", "max":
			if b.leaf != leafNumber {
				return fmt.Errorf("%s: the value is %s, so it takes in: [...], not %s", k, b.leaf, k)
			}
			x, err := number(v)
			if err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			if k == "min" {
				b.Min = &x
			} else {
				b.Max = &x
			}
		case "in":
			if b.leaf == leafNumber {
				return errors.New("in: the value is a number: bound it with min and max")
			}
			if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
				return errors.New("in: give a non-empty list, e.g. in: [pass, known-issue]")
			}
			b.In = []string{}
			for _, e := range v.Content {
				if e.Kind != yaml.ScalarNode {
					return fmt.Errorf("in: line %d: each allowed value is one word", e.Line)
				}
				b.In = append(b.In, e.Value)
			}
		case "reason":
			if v.Kind != yaml.ScalarNode { // a list's or a mapping's Value is "": the reason would be lost
				return errors.New(reasonIsText)
			}
			b.Reason = v.Value
		}
		return nil
	})
	switch {
	case err != nil:
		return b, err
	case b.Min == nil && b.Max == nil && b.In == nil:
		return b, fmt.Errorf("no bound: give min, max (numbers) or in (a list), e.g. {max: 5e6}")
	case b.Min != nil && b.Max != nil && *b.Min > *b.Max:
		return b, fmt.Errorf("min %s is above max %s: nothing can pass", fmtNum(*b.Min), fmtNum(*b.Max))
	}
	return b, nil
}

const reasonIsText = `reason: write it as one piece of text, e.g. reason: "istiod's memory per remote cluster"`

func number(n *yaml.Node) (float64, error) {
	x, err := strconv.ParseFloat(n.Value, 64)
	if n.Kind != yaml.ScalarNode || err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, fmt.Errorf("line %d: %q is not a number (write e.g. 5e6 or 0.05)", n.Line, n.Value)
	}
	return x, nil
}

func parseBaseline(f *File, n *yaml.Node) error {
	return eachPair(n, "baseline", []string{"alpha", "bounds"}, func(k string, v *yaml.Node) error {
		if k == "alpha" {
			a, err := number(v)
			if err != nil || a <= 0 || a >= 1 {
				return fmt.Errorf("line %d: baseline.alpha: %q must be between 0 and 1, e.g. 0.05 (benchstat's default)", v.Line, v.Value)
			}
			f.Alpha = a
			return nil
		}
		var err error
		f.Baseline, err = parseBounds(v, "baseline.bounds", parseBaselineBound)
		return err
	})
}

func parseBaselineBound(sel string, n *yaml.Node) (baseline.Bound, error) {
	s, err := baseline.ParseSelector(sel)
	if err != nil {
		return baseline.Bound{}, err
	}
	b := baseline.Bound{Selector: s}
	err = eachPair(n, "the bound", []string{"maxIncrease", "maxDecrease", "reason"}, func(k string, v *yaml.Node) error {
		if k == "reason" {
			if v.Kind != yaml.ScalarNode {
				return errors.New(reasonIsText)
			}
			b.Reason = v.Value
			return nil
		}
		x, err := baseline.ParseRelative(v.Value)
		if err != nil {
			return fmt.Errorf("line %d: %s: %w", v.Line, k, err)
		}
		if k == "maxIncrease" {
			b.MaxIncrease = &x
		} else {
			b.MaxDecrease = &x
		}
		return nil
	})
	if err == nil && b.MaxIncrease == nil && b.MaxDecrease == nil {
		err = errors.New("no bound: give maxIncrease or maxDecrease, e.g. {maxIncrease: 10%}")
	}
	return b, err
}
