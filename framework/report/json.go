package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// dropNonFinite makes every NaN or ±Inf in r absent and adds a warning naming each one:
// encoding/json refuses to write them, and no figure of a run may stop its report from being
// written. Optional (*float64) values, and estimates whose value is not finite, become nil; the
// paths of plain float64 fields, which cannot be nil, are zeroed and returned, so that
// marshalReport can leave their keys out of the JSON and put the values back for the renderers
// (report.md prints a non-finite number as "-").
func dropNonFinite(r *Report) (plain []plainField) {
	var warnings []string
	var walk func(v reflect.Value, path []string)
	note := func(path []string, f float64) {
		warnings = append(warnings, fmt.Sprintf("report: %s was %v, which is no measurement (a zero-length window, "+
			"an empty sample set or a division by zero upstream); it is left out", joinPath(path), f))
	}
	walk = func(v reflect.Value, path []string) {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				return
			}
			if e := v.Elem(); e.Kind() == reflect.Float64 {
				if !finiteValue(e.Float()) {
					note(path, e.Float())
					v.Set(reflect.Zero(v.Type()))
				}
				return
			}
			// An estimate without a finite value is no estimate: absent, its error with it.
			if e, ok := v.Interface().(*Estimate); ok && !finiteValue(e.Value) {
				note(path, e.Value)
				v.Set(reflect.Zero(v.Type()))
				return
			}
			walk(v.Elem(), path)
		case reflect.Float64:
			if !finiteValue(v.Float()) {
				note(path, v.Float())
				plain = append(plain, plainField{path: slices.Clone(path), v: v, orig: v.Float()})
				v.SetFloat(0)
			}
		case reflect.Struct:
			t := v.Type()
			for i := range t.NumField() {
				f := t.Field(i)
				if !f.IsExported() {
					continue
				}
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				switch {
				case name == "-":
					continue
				case name == "" && f.Anonymous:
					walk(v.Field(i), path) // embedded: its fields are promoted
					continue
				case name == "":
					name = f.Name
				}
				walk(v.Field(i), append(slices.Clone(path), name))
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i), append(slices.Clone(path), "["+strconv.Itoa(i)+"]"))
			}
		case reflect.Map:
			if v.Type().Key().Kind() != reflect.String {
				return
			}
			keys := v.MapKeys()
			slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
			for _, k := range keys {
				e := v.MapIndex(k)
				p := append(slices.Clone(path), k.String())
				if e.Kind() == reflect.Float64 {
					if !finiteValue(e.Float()) {
						note(p, e.Float())
						v.SetMapIndex(k, reflect.Value{}) // delete: absent
					}
					continue
				}
				// Map values are not addressable: walk a copy and store it back.
				c := reflect.New(e.Type()).Elem()
				c.Set(e)
				walk(c, p)
				v.SetMapIndex(k, c)
			}
		}
	}
	walk(reflect.ValueOf(r).Elem(), nil)
	// A report written twice (partial, then final) names a plain field once.
	for _, w := range warnings {
		if !slices.Contains(r.Warnings, w) {
			r.Warnings = append(r.Warnings, w)
		}
	}
	return plain
}

// plainField is a float64 field that held a non-finite value.
type plainField struct {
	path []string
	v    reflect.Value
	orig float64
}

func finiteValue(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

func joinPath(path []string) string {
	var b strings.Builder
	for i, p := range path {
		if i > 0 && !strings.HasPrefix(p, "[") {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

// JSONFile is the name of the report's JSON in a report directory.
const JSONFile = "report.json"

// JSON is report.json's content for r (non-finite values left out, with a warning in r).
func JSON(r *Report) ([]byte, error) { return marshalReport(r) }

// marshalReport is indented JSON of r with non-finite values left out (see dropNonFinite).
func marshalReport(r *Report) ([]byte, error) {
	plain := dropNonFinite(r)
	js, err := json.MarshalIndent(r, "", "  ")
	for _, p := range plain {
		p.v.SetFloat(p.orig)
	}
	if err != nil || len(plain) == 0 {
		return js, err
	}
	// Plain fields were zeroed; take their keys out, keeping every other key in its order.
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	tree, err := decodeOrdered(dec)
	if err != nil {
		return nil, err
	}
	for _, p := range plain {
		tree = removePath(tree, p.path)
	}
	var compact bytes.Buffer
	if err := encodeOrdered(&compact, tree); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// object is a JSON object that keeps its keys' order.
type object struct {
	keys []string
	vals []any
}

func decodeOrdered(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := &object{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			o.keys, o.vals = append(o.keys, k.(string)), append(o.vals, v)
		}
		_, err := dec.Token()
		return o, err
	case json.Delim('['):
		a := []any{}
		for dec.More() {
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token()
		return a, err
	}
	return tok, nil
}

func encodeOrdered(b *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case *object:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteByte(':')
			if err := encodeOrdered(b, v.vals[i]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := encodeOrdered(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	default:
		vb, err := json.Marshal(v)
		if err != nil {
			return err
		}
		b.Write(vb)
	}
	return nil
}

// removePath deletes the object key at path; an array element there becomes null, so that the
// other elements keep their positions.
func removePath(v any, path []string) any {
	if len(path) == 0 {
		return nil
	}
	head, rest := path[0], path[1:]
	switch v := v.(type) {
	case *object:
		for i, k := range v.keys {
			if k != head {
				continue
			}
			if len(rest) == 0 {
				v.keys, v.vals = slices.Delete(v.keys, i, i+1), slices.Delete(v.vals, i, i+1)
			} else {
				v.vals[i] = removePath(v.vals[i], rest)
			}
			break
		}
	case []any:
		i, err := strconv.Atoi(strings.Trim(head, "[]"))
		if err == nil && i >= 0 && i < len(v) {
			v[i] = removePath(v[i], rest)
		}
	}
	return v
}
