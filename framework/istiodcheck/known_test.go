package istiodcheck

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

var table = []Known{
	{Check: "leaks", Reference: "istio/istio#1", Affected: []string{"v1.2.3", "v0.0.0-2026*"}},
	{Check: "wedges", Reference: "istio/istio#2", Affected: []string{"v9"}},
}

func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		name, check, version string
		passed               bool
		want                 Result
		ref, msg             string
	}{
		{"pass on an unlisted version", "leaks", "v2.0.0", true, Pass, "", "fine"},
		{"fail on an unlisted version", "leaks", "v2.0.0", false, Fail, "", "leaks on istiod v2.0.0: fine"},
		{"fail on a listed version", "leaks", "v1.2.3", false, KnownIssue, "istio/istio#1", "known istiod issue reproduced: istio/istio#1"},
		{"fail on a listed prefix", "leaks", "v0.0.0-20260827124520-eed52ebb66ad", false, KnownIssue, "istio/istio#1", "known istiod issue reproduced: istio/istio#1"},
		{"pass on a listed version", "leaks", "v1.2.3", true, Fail, "istio/istio#1", "known-issue table out of date"},
		{"another check's entry does not apply", "wedges", "v1.2.3", false, Fail, "", "wedges on istiod v1.2.3"},
		{"a prefix needs its star", "wedges", "v9.1", false, Fail, "", "wedges on istiod v9.1"},
		{"an unknown version fails", "leaks", "", false, Fail, "", "leaks on istiod "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(table, tc.check, tc.version, tc.passed, "fine")
			assert.Equal(t, tc.want, v.Result)
			assert.Equal(t, tc.ref, v.Reference)
			assert.Contains(t, v.Message, tc.msg)
			assert.Contains(t, v.Message, "fine", "the check's detail is kept")
		})
	}
}

func TestTableNamesChecksAndReferences(t *testing.T) {
	for _, k := range Table {
		assert.Contains(t, []string{MemoryComesBack, MidSyncDeletion, RejoinLongLived}, k.Check)
		assert.Regexp(t, `^istio/istio#\d+$`, k.Reference)
		assert.NotEmpty(t, k.Affected)
		assert.NotEmpty(t, k.Why)
	}
}
