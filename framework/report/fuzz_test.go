package report_test

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/reporttest"
)

// FuzzDecode feeds Decode (Read's reading of report.json) arbitrary bytes. What it accepts is
// valid JSON of this schema's version, is left as it was by writing it, and reads back the same
// from what JSON writes (a fixed point after one pass: an empty list written as [] reads back as
// absent); what it refuses gets an error saying why.
func FuzzDecode(f *testing.F) {
	for _, r := range []*report.Report{reporttest.Full(), reporttest.Every(), reporttest.Churn(), reporttest.SharedEtcd(), reporttest.StartWaves()} {
		js, err := report.JSON(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(js)
	}
	golden, err := os.ReadFile("render/testdata/golden/report.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	for _, s := range []string{
		`{"schemaVersion": 1, "provider": "local"}`,
		`{`,
		`null`,
		`[]`,
		`{"schemaVersion": 2, "provider": "local"}`,
		`{"schemaVersion": 2, "warnings": [], "setup": {"clusters": [{"name": "a", "rssBytes": {}}]}, "topology": {"clusters": []}}`,
		`{"schemaVersion": 2, "controlPlane": {"joins": [{"cluster": "c", "liveHeapBytes": null}]}, "latency": {"runs": [{"path": "x"}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := report.Decode(data)
		if err != nil {
			if r != nil || err.Error() == "" {
				t.Fatalf("Decode returned %v with the error %q", r, err)
			}
			if strings.HasPrefix(err.Error(), "schemaVersion ") {
				var v struct{ SchemaVersion int }
				if json.Unmarshal(data, &v) != nil || v.SchemaVersion == report.SchemaVersion {
					t.Fatalf("refused %q for its schemaVersion", data)
				}
			}
			return
		}
		if r.SchemaVersion != report.SchemaVersion || !json.Valid(data) {
			t.Fatalf("accepted schemaVersion %d from %q", r.SchemaVersion, data)
		}
		again, _ := report.Decode(data)
		js, err := report.JSON(r)
		if err != nil {
			t.Fatalf("a read report does not write: %v", err)
		}
		if !reflect.DeepEqual(r, again) {
			t.Fatalf("writing changed the report:\n%+v\n%+v", r, again)
		}
		back, err := report.Decode(js)
		if err != nil {
			t.Fatalf("what JSON wrote does not read:\n%s\n%v", js, err)
		}
		js2, err := report.JSON(back)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(js, js2) {
			t.Fatalf("written twice, the JSON differs:\n%s\n%s", js, js2)
		}
		emptyToNil(reflect.ValueOf(r))
		emptyToNil(reflect.ValueOf(back))
		if !reflect.DeepEqual(r, back) {
			t.Fatalf("reads back differently:\n%s", js)
		}
		if e1, e2 := r.Validate(), back.Validate(); (e1 == nil) != (e2 == nil) || e1 != nil && e1.Error() != e2.Error() {
			t.Fatalf("validates as %v, read back as %v", e1, e2)
		}
	})
}

// emptyToNil makes every empty slice and map under v nil, as omitempty writes them: absent.
func emptyToNil(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			emptyToNil(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				emptyToNil(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			emptyToNil(v.Index(i))
		}
		if v.Len() == 0 {
			v.SetZero()
		}
	case reflect.Map: // the schema's maps hold numbers
		if v.Len() == 0 {
			v.SetZero()
		}
	}
}
