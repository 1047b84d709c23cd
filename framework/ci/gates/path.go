package gates

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/ambientmc/ambientmc/framework/report"
)

// A path names report values the way report.json spells them: keys joined by dots, a list
// followed by [*] (every element) or [N] (one), a map followed by one of its keys, e.g.
// "churn.runs[*].lost" or "setup.clusters[0].rssBytes.kube-apiserver".
type path []segment

type segment struct {
	key string
	// index is -1 for none, anyIndex for [*], else the element.
	index int
}

const anyIndex = -2

func (p path) String() string {
	var b strings.Builder
	for i, s := range p {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.key)
		switch {
		case s.index == anyIndex:
			b.WriteString("[*]")
		case s.index >= 0:
			fmt.Fprintf(&b, "[%d]", s.index)
		}
	}
	return b.String()
}

func parsePath(s string) (path, error) {
	if s == "" {
		return nil, fmt.Errorf("empty path")
	}
	var p path
	for part := range strings.SplitSeq(s, ".") {
		seg := segment{key: part, index: -1}
		if i := strings.IndexByte(part, '['); i >= 0 {
			idx, ok := strings.CutSuffix(part[i+1:], "]")
			if !ok {
				return nil, fmt.Errorf("%q: an index is [*] or [N] at the end of a key", part)
			}
			seg.key = part[:i]
			// Digits alone, without a sign or a leading 0: Atoi reads [-0], [+1] and [01] as
			// [0] and [1], and two spellings of one path would escape "appears twice".
			if idx == "*" {
				seg.index = anyIndex
			} else if n, err := strconv.Atoi(idx); err == nil && idx == strconv.Itoa(n) && n >= 0 {
				seg.index = n
			} else {
				return nil, fmt.Errorf("%q: the index must be * or a number from 0", part)
			}
		}
		if seg.key == "" || strings.ContainsAny(seg.key, "[] \t") {
			return nil, fmt.Errorf("%q: empty or malformed key", part)
		}
		p = append(p, seg)
	}
	return p, nil
}

// leaf is what a path ends on.
type leaf int

const (
	leafNumber leaf = iota
	leafText
	leafBool
)

func (l leaf) String() string {
	return [...]string{"a number", "text", "true or false"}[l]
}

// reportType is the schema paths are checked against: report.json is report.Report marshalled.
var reportType = reflect.TypeFor[report.Report]()

// resolve checks p against the report's Go types by their json tags and says what its values are.
func resolve(p path) (leaf, error) {
	t := reportType
	for i, s := range p {
		here := p[:i+1].String()
		t = deref(t)
		switch t.Kind() {
		case reflect.Struct:
			f, ok := field(t, s.key)
			if !ok {
				where := "at the top"
				if i > 0 {
					where = "under " + p[:i].String()
				}
				return 0, fmt.Errorf("no key %q %s in the report schema (framework/report); known keys: %s", s.key, where, strings.Join(keys(t), ", "))
			}
			if i == 0 && s.key == "gates" {
				return 0, fmt.Errorf("a gate cannot bound the gates")
			}
			t = f.Type
		case reflect.Map:
			if t.Key().Kind() != reflect.String {
				return 0, fmt.Errorf("%s: this map is not keyed by text", here)
			}
			t = t.Elem() // any key: which keys a run has is data, not schema
		default:
			return 0, fmt.Errorf("%s is a value, it has no key %q", p[:i], s.key)
		}
		t = deref(t)
		isList := t.Kind() == reflect.Slice || t.Kind() == reflect.Array
		switch {
		case isList && s.index == -1:
			return 0, fmt.Errorf("%s is a list: write %s[*] (every element) or %s[0] (the first)", here, here, here)
		case !isList && s.index != -1:
			return 0, fmt.Errorf("%s is not a list, so it takes no index", append(p[:i:i], segment{key: s.key, index: -1}))
		case isList:
			t = t.Elem()
		}
	}
	t = deref(t)
	switch t.Kind() {
	case reflect.Float32, reflect.Float64, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return leafNumber, nil
	case reflect.String:
		return leafText, nil
	case reflect.Bool:
		return leafBool, nil
	case reflect.Struct:
		return 0, fmt.Errorf("a section, not a value: name one of its keys (%s)", strings.Join(keys(t), ", "))
	}
	return 0, fmt.Errorf("a %s, not a number, text or true/false", t.Kind())
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// jsonName is a field's key in report.json; "" for fields that are not written, or embedded
// structs whose fields are promoted.
func jsonName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch {
	case name == "-":
		return ""
	case name == "" && f.Anonymous:
		return ""
	case name == "":
		return f.Name
	}
	return name
}

// field finds the field whose json key is key, looking into embedded structs as encoding/json does.
func field(t reflect.Type, key string) (reflect.StructField, bool) {
	for f := range t.Fields() {
		if f.Anonymous && jsonName(f) == "" && deref(f.Type).Kind() == reflect.Struct && f.IsExported() {
			if g, ok := field(deref(f.Type), key); ok {
				return g, true
			}
			continue
		}
		if n := jsonName(f); n != "" && n == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// keys lists the json keys of a struct, embedded fields included, sorted.
func keys(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		if f.Anonymous && jsonName(f) == "" && deref(f.Type).Kind() == reflect.Struct && f.IsExported() {
			out = append(out, keys(deref(f.Type))...)
			continue
		}
		if n := jsonName(f); n != "" {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
