package istiodcheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var table = []Known{
	{Check: "leaks", Reference: "istio/istio#1", Affected: []string{"v1.2.3", "v0.0.0-2026*"}},
	{Check: "wedges", Reference: "istio/istio#2", Affected: []string{"v9"}},
	{Check: "races", Reference: "docs/findings.md#a-race", Affected: []string{"v1.2.3"}, Intermittent: true, HitRate: "3 of 10 runs", Signature: "race-seen"},
	{Check: "grows", Reference: "istio/istio#3", Affected: []string{"v1.2.3"}, Signature: "heap-grows"},
	{Check: "grows", Reference: "istio/istio#4", Affected: []string{"v1.2.3"}, Signature: "goroutines-grow", Intermittent: true, HitRate: "2 of 10 runs"},
}

func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		name, check, version string
		passed               bool
		evidence             []string
		want                 Result
		ref, msg             string
	}{
		{"pass on an unlisted version", "leaks", "v2.0.0", true, nil, Pass, "", "fine"},
		{"fail on an unlisted version", "leaks", "v2.0.0", false, nil, Fail, "", "leaks on istiod v2.0.0: fine"},
		{"fail on a listed version", "leaks", "v1.2.3", false, nil, KnownIssue, "istio/istio#1", "known istiod issue reproduced: istio/istio#1"},
		{"fail on a listed prefix", "leaks", "v0.0.0-20260827124520-eed52ebb66ad", false, nil, KnownIssue, "istio/istio#1", "known istiod issue reproduced: istio/istio#1"},
		{"pass on a listed version", "leaks", "v1.2.3", true, nil, Fail, "istio/istio#1", "known-issue table out of date"},
		{"another check's entry does not apply", "wedges", "v1.2.3", false, nil, Fail, "", "wedges on istiod v1.2.3"},
		{"a prefix needs its star", "wedges", "v9.1", false, nil, Fail, "", "wedges on istiod v9.1"},
		{"an unknown version fails, saying so", "leaks", "", false, nil, Fail, "", "leaks on istiod of unknown build (-istio.build names"},
		{"a race hit on a listed version", "races", "v1.2.3", false, []string{"race-seen"}, KnownIssue, "docs/findings.md#a-race", "known istiod issue reproduced"},
		{"a race missed on a listed version passes", "races", "v1.2.3", true, nil, Pass, "docs/findings.md#a-race", "(hit in 3 of 10 runs), was not hit this time"},
		// A failure without the entry's signature is another fault: it fails even on a listed version.
		{"a failure without the race's signature fails", "races", "v1.2.3", false, []string{"something-else"}, Fail, "", "not as a known issue shows itself (the signatures listed for it: race-seen; the check saw something-else, which no listed issue explains): another fault"},
		{"a failure with no evidence at all fails", "races", "v1.2.3", false, nil, Fail, "", "the check saw nothing that tells faults apart"},
		// Every fault a failure shows must be a listed one: two known ones name both references, a
		// known one beside an unknown one fails.
		{"two known faults at once", "grows", "v1.2.3", false, []string{"heap-grows", "goroutines-grow"}, KnownIssue, "istio/istio#3, istio/istio#4", "known istiod issue reproduced: istio/istio#3, istio/istio#4"},
		{"one known fault", "grows", "v1.2.3", false, []string{"heap-grows"}, KnownIssue, "istio/istio#3", "known istiod issue reproduced"},
		{"a known fault beside an unknown one fails", "grows", "v1.2.3", false, []string{"heap-grows", "fds-grow"}, Fail, "", "the check saw fds-grow, which no listed issue explains"},
		{"a pass where a listed fault is not a race", "grows", "v1.2.3", true, nil, Fail, "istio/istio#3", "known-issue table out of date"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(table, tc.check, tc.version, tc.passed, tc.evidence, "fine")
			assert.Equal(t, tc.want, v.Result)
			assert.Equal(t, tc.ref, v.Reference)
			assert.Contains(t, v.Message, tc.msg)
			assert.Contains(t, v.Message, "fine", "the check's detail is kept")
		})
	}
}

// Every entry names a check, and a reference that exists: an upstream issue, or a section of
// docs/findings.md for a fault not reported upstream yet.
func TestTableNamesChecksAndReferences(t *testing.T) {
	findings, err := os.ReadFile(filepath.Join("..", "..", "docs", "findings.md"))
	require.NoError(t, err)
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(findings), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			anchors[anchor(h)] = true
		}
	}
	for _, k := range Table {
		assert.Contains(t, Checks, k.Check)
		assert.Regexp(t, `^(istio/istio#\d+|docs/findings\.md#[a-z0-9-]+)$`, k.Reference)
		if a, ok := strings.CutPrefix(k.Reference, "docs/findings.md#"); ok {
			assert.True(t, anchors[a], "docs/findings.md has a section for %s (headings: %v)", k.Reference, anchors)
		}
		assert.NotEmpty(t, k.Affected)
		assert.NotEmpty(t, k.Why)
		if k.Intermittent {
			assert.Regexp(t, `^\d+ of \d+ runs`, k.HitRate, "an intermittent entry says how often it was hit (%s, %s)", k.Check, k.Reference)
			assert.NotEmpty(t, k.Signature, "an intermittent entry has a signature, so that a failure of another kind still fails (%s, %s)", k.Check, k.Reference)
		}
	}
}

// anchor is the fragment GitHub gives a Markdown heading.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}
