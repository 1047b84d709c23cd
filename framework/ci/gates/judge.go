package gates

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ambientmc/ambientmc/framework/report"
)

// Judge evaluates every bound of f on a report as report.JSON writes it, so that a value the
// report leaves out (not measured) is exactly what report.json leaves out.
func (f *File) Judge(reportJSON []byte) ([]report.Gate, error) {
	dec := json.NewDecoder(bytes.NewReader(reportJSON))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("gates: reading the report: %w", err)
	}
	out := make([]report.Gate, 0, len(f.Bounds))
	for _, b := range f.Bounds {
		out = append(out, b.judge(doc))
	}
	return out, nil
}

// reached is one concrete place a path led to; v is nil where the report has no value, and
// inParent says whether the object that would hold it is there.
type reached struct {
	at       string
	v        any
	inParent bool
}

// walk follows p through doc, expanding [*], and returns every place it reached.
func walk(doc any, p path) []reached {
	cur := []reached{{at: "", v: doc}}
	for i, s := range p {
		last := i == len(p)-1
		var next []reached
		for _, r := range cur {
			if r.v == nil { // name the outermost thing missing, not the path below it
				next = append(next, r)
				continue
			}
			at := s.key
			if r.at != "" {
				at = r.at + "." + s.key
			}
			obj, isObj := r.v.(map[string]any)
			v, ok := obj[s.key]
			if !ok || v == nil {
				next = append(next, reached{at: at, inParent: isObj && last})
				continue
			}
			switch s.index {
			case -1:
				next = append(next, reached{at: at, v: v})
			case anyIndex:
				list, _ := v.([]any)
				if len(list) == 0 {
					next = append(next, reached{at: at + "[*]"}) // no elements: nothing was measured
				}
				for i, e := range list {
					next = append(next, reached{at: fmt.Sprintf("%s[%d]", at, i), v: e})
				}
			default:
				list, _ := v.([]any)
				if s.index >= len(list) {
					next = append(next, reached{at: fmt.Sprintf("%s[%d]", at, s.index)})
				} else {
					next = append(next, reached{at: fmt.Sprintf("%s[%d]", at, s.index), v: list[s.index]})
				}
			}
		}
		cur = next
	}
	return cur
}

func (b Bound) judge(doc any) report.Gate {
	g := report.Gate{Path: b.Path, Bound: b.String(), Reason: b.Reason}
	var broken, missing []string
	for _, r := range walk(doc, b.path) {
		if r.v == nil && r.inParent && b.leaf == leafBool {
			r.v = false // report.json leaves false flags out (omitempty): the section is there, so it is false
		}
		if r.v == nil {
			missing = append(missing, r.at)
			continue
		}
		gv := report.GateValue{Path: r.at}
		var shown string
		switch v := r.v.(type) {
		case json.Number:
			x, _ := v.Float64()
			gv.Number, shown = &x, fmtNum(x)
			gv.Pass = (b.Min == nil || x >= *b.Min) && (b.Max == nil || x <= *b.Max)
		case string:
			gv.Text, shown = &v, v
			gv.Pass = slices.Contains(b.In, v)
		case bool:
			s := strconv.FormatBool(v)
			gv.Text, shown = &s, s
			gv.Pass = slices.Contains(b.In, s)
		default: // the schema check makes this unreachable for report.json written by this code
			missing = append(missing, r.at)
			continue
		}
		if !gv.Pass {
			broken = append(broken, r.at+" = "+shown)
		}
		g.Values = append(g.Values, gv)
	}
	switch {
	case len(broken) > 0:
		g.Verdict = report.GateFail
		g.Message = fmt.Sprintf("gate FAIL %s: %s breaks %s", b.Path, strings.Join(broken, ", "), b)
		if n := len(g.Values) + len(missing); n > 1 {
			g.Message += fmt.Sprintf(" (%d of %d values)", len(broken), n)
		}
	case len(missing) > 0:
		g.Verdict = report.GateNotMeasured
		g.Message = fmt.Sprintf("gate FAIL %s: not measured: this run's report has no %s (bound %s)", b.Path, strings.Join(missing, ", "), b)
	default:
		g.Verdict = report.GatePass
		var vals []string
		for _, v := range g.Values {
			if v.Number != nil {
				vals = append(vals, fmtNum(*v.Number))
			} else {
				vals = append(vals, *v.Text)
			}
		}
		g.Message = fmt.Sprintf("gate pass %s = %s, within %s", b.Path, strings.Join(vals, ", "), b)
	}
	if b.Reason != "" && g.Verdict != report.GatePass {
		g.Message += " (" + b.Reason + ")"
	}
	return g
}
