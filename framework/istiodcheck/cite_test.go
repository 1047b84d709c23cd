package istiodcheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A citation of istiod's source, as docs/findings.md defines it: one code span holding the version
// when it is not the pinned one, the file's path from the istio.io/istio module root, a line or a
// range, and text that appears on one of those lines:
//
//	`pkg/kube/multicluster/cluster.go:194-196 swap.Complete()`
//	`April pilot/pkg/serviceregistry/kube/controller/multicluster.go:223-231 <-cluster.SyncedCh`
//
// A reference into client-go carries the label client-go and the path from that module's root:
//
//	`client-go tools/cache/reflector.go:605 r.listerWatcher.WatchWithContext(ctx, options)`
type citation struct {
	where    string // document:line of the citation
	version  string // "" for the pinned istio.io/istio, else a key of citedSources
	path     string
	from, to int
	anchor   string
}

func (c citation) String() string {
	v := ""
	if c.version != "" {
		v = c.version + " "
	}
	return fmt.Sprintf("%s: `%s%s:%d-%d %s`", c.where, v, c.path, c.from, c.to, c.anchor)
}

// citedModule is a module version whose source a citation may cite.
type citedModule struct{ path, version string }

// citedSources are the labels a citation may carry, and the module versions they name: the other
// istio.io/istio versions of docs/findings.md, and the client-go that the pinned istio.io/istio's
// go.mod requires, written out because the documents name that version.
var citedSources = map[string]citedModule{
	"1.30":      {"istio.io/istio", istioRelease130Aug},
	"April":     {"istio.io/istio", istioApril},
	"client-go": {"k8s.io/client-go", "v0.36.1"},
}

// The documents whose citations TestCiteDocuments checks, besides the Go strings of known.go: the
// findings and the checks page, and the reproducers' READMEs and the issue texts they propose.
var (
	citingDocuments = []string{"docs/findings.md", "docs/checks.md", "repro/README.md"}
	citingGlobs     = []string{"repro/*/README.md", "repro/*/ISSUE.md"}
)

// maxCitedLines keeps a range to the lines that do the thing cited, not the function around them.
const maxCitedLines = 25

// citationForm is how a problem message spells the format.
const citationForm = "[1.30 |April |client-go ]path/from/module/root.go:N[-M] anchor"

var (
	codeSpan = regexp.MustCompile("`([^`\n]+)`")
	// cited is a well-formed citation: [label ]dir/.../file.go:N[-M] anchor.
	cited = regexp.MustCompile(`^(?:(` + citedLabels() + `) )?((?:[\w.-]+/)+[\w.-]+\.go):(\d+)(?:-(\d+))? (\S.*)$`)
	// lineRef is any reference to a line of a Go file, cited or not.
	lineRef = regexp.MustCompile(`[\w./-]*\w\.go:\d+`)
	// lineOnly is a line without its file (":470", "(:200-212)"), which cites nothing on its own.
	lineOnly = regexp.MustCompile(`(?:^|[\s(\[,;` + "`" + `])(:\d+(?:-\d+)?)\b`)
	// fence opens or closes a fenced code block, indented or not.
	fence = regexp.MustCompile("^[ \t]*```")
)

// citedLabels is the alternation of citedSources' labels, for cited.
func citedLabels() string {
	var labels []string
	for label := range citedSources {
		labels = append(labels, regexp.QuoteMeta(label))
	}
	slices.Sort(labels)
	return strings.Join(labels, "|")
}

// scanCitations finds the citations in text (which starts on line first of document name) and
// reports every line reference that is not one: a code span naming a line of a Go file that does
// not parse as a citation, a reference outside a code span, or a line without its file.
//
// A fenced code block is quoted output (a goroutine profile, a test's failure message), whose
// references the program printed and cannot carry an anchor: each must name the path from the
// module root and a line that a citation of the pinned version in the same text covers.
func scanCitations(name string, first int, text string) (cites []citation, problems []string) {
	at := func(offset int) string {
		return fmt.Sprintf("%s:%d", name, first+strings.Count(text[:offset], "\n"))
	}
	// rest is text with the fenced blocks, then the citations, blanked out (newlines kept).
	rest := []byte(text)
	blank := func(from, to int) {
		for i := from; i < to; i++ {
			if rest[i] != '\n' {
				rest[i] = ' '
			}
		}
	}
	type quotedRef struct {
		offset int
		ref    string
	}
	var quoted []quotedRef
	inFence, fenceLine, fenceStart := false, 0, 0
	for offset := 0; offset < len(text); {
		end := strings.IndexByte(text[offset:], '\n')
		if end < 0 {
			end = len(text)
		} else {
			end += offset + 1
		}
		if fence.MatchString(text[offset:end]) {
			if inFence {
				for _, m := range lineRef.FindAllStringIndex(text[fenceStart:offset], -1) {
					quoted = append(quoted, quotedRef{fenceStart + m[0], text[fenceStart+m[0] : fenceStart+m[1]]})
				}
				blank(fenceStart, offset)
			}
			inFence, fenceLine, fenceStart = !inFence, offset, end
		}
		offset = end
	}
	if inFence {
		problems = append(problems, fmt.Sprintf("%s: a fenced code block that is not closed", at(fenceLine)))
	}
	for _, m := range codeSpan.FindAllSubmatchIndex(rest, -1) {
		span := text[m[2]:m[3]]
		if !lineRef.MatchString(span) {
			continue
		}
		// Blank the span out, so that only references outside code spans remain in rest.
		blank(m[0], m[1])
		p := cited.FindStringSubmatch(span)
		if p == nil {
			problems = append(problems, fmt.Sprintf("%s: `%s` is not a citation (%s)", at(m[0]), span, citationForm))
			continue
		}
		c := citation{where: at(m[0]), version: p[1], path: p[2], anchor: p[5]}
		c.from, _ = strconv.Atoi(p[3])
		c.to = c.from
		if p[4] != "" {
			c.to, _ = strconv.Atoi(p[4])
		}
		cites = append(cites, c)
	}
	for _, m := range lineRef.FindAllIndex(rest, -1) {
		problems = append(problems, fmt.Sprintf("%s: bare line reference %q, not a citation (%s in a code span)", at(m[0]), text[m[0]:m[1]], citationForm))
	}
	for _, m := range lineOnly.FindAllSubmatchIndex(rest, -1) {
		problems = append(problems, fmt.Sprintf("%s: line reference %q without its file, not a citation (%s in a code span)", at(m[2]), text[m[2]:m[3]], citationForm))
	}
	for _, q := range quoted {
		path, n, _ := strings.Cut(q.ref, ":")
		line, _ := strconv.Atoi(n)
		covered := false
		for _, c := range cites {
			covered = covered || c.version == "" && c.path == path && c.from <= line && line <= c.to
		}
		if !covered {
			problems = append(problems, fmt.Sprintf("%s: %q in a fenced block (quoted output) is not within a citation of the pinned %s in this text", at(q.offset), q.ref, path))
		}
	}
	return cites, problems
}

// checkCitation reads the cited lines from the module directory of the citation's label (dirs,
// keyed by label, "" for the pinned istio.io/istio) and says what is wrong with the citation, if
// anything.
func checkCitation(c citation, dirs map[string]string) error {
	dir, ok := dirs[c.version]
	if !ok {
		return fmt.Errorf("no source for the label %q", c.version)
	}
	switch {
	case c.from < 1:
		return errors.New("lines start at 1")
	case c.to < c.from:
		return fmt.Errorf("the range ends (%d) before it starts (%d)", c.to, c.from)
	case c.to-c.from+1 > maxCitedLines:
		return fmt.Errorf("a range of %d lines, more than %d: cite the lines that do the thing", c.to-c.from+1, maxCitedLines)
	}
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(c.path)))
	if err != nil {
		return fmt.Errorf("no such file in the cited module: %w", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if c.to > len(lines) {
		return fmt.Errorf("lines %d-%d are past the end of %s (%d lines)", c.from, c.to, c.path, len(lines))
	}
	for _, l := range lines[c.from-1 : c.to] {
		if strings.Contains(l, c.anchor) {
			return nil
		}
	}
	return fmt.Errorf("%q is not on %s:%d-%d", c.anchor, c.path, c.from, c.to)
}

// goTexts are the string literals and comments of a Go file, each with the line it starts on.
func goTexts(t *testing.T, path string) (texts []string, lines []int) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	require.NoError(t, err)
	for _, g := range f.Comments {
		for _, c := range g.List {
			texts, lines = append(texts, c.Text), append(lines, fset.Position(c.Pos()).Line)
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if l, ok := n.(*ast.BasicLit); ok && l.Kind == token.STRING {
			s, err := strconv.Unquote(l.Value)
			require.NoError(t, err)
			texts, lines = append(texts, s), append(lines, fset.Position(l.Pos()).Line)
		}
		return true
	})
	return texts, lines
}

// citedDirs resolves the module directory of every cited source in the module cache, downloading
// what is missing: the pinned istio.io/istio (go.mod's), keyed "", and each of citedSources.
func citedDirs(t *testing.T) map[string]string {
	t.Helper()
	type module struct{ Path, Version, Dir, Error string }
	run := func(needDir bool, args ...string) []module {
		cmd := exec.Command("go", args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		fail := func(why string, a ...any) {
			require.FailNowf(t, "no module source", "go %s: %s; the citations cannot be checked without the "+
				"cited modules' source (is the module proxy reachable?)", strings.Join(args, " "), fmt.Sprintf(why, a...))
		}
		var mods []module
		for d := json.NewDecoder(bytes.NewReader(out)); ; {
			var m module
			if derr := d.Decode(&m); derr == io.EOF {
				break
			} else if derr != nil {
				fail("%v (exit: %v) %s", derr, err, stderr.String())
			}
			if m.Error != "" || needDir && m.Dir == "" {
				fail("%s@%s has no source directory: %s", m.Path, m.Version, m.Error)
			}
			mods = append(mods, m)
		}
		if err != nil {
			fail("%v: %s", err, stderr.String())
		}
		return mods
	}
	pinned := run(false, "list", "-m", "-json", "istio.io/istio")
	require.Len(t, pinned, 1)
	sources := map[string]citedModule{"": {"istio.io/istio", pinned[0].Version}}
	args := []string{"mod", "download", "-json", "istio.io/istio@" + pinned[0].Version}
	for label, m := range citedSources {
		sources[label] = m
		args = append(args, m.path+"@"+m.version)
	}
	dirs := map[string]string{}
	for _, m := range run(true, args...) {
		for label, s := range sources {
			if s.path == m.Path && s.version == m.Version {
				dirs[label] = m.Dir
			}
		}
	}
	require.Len(t, dirs, len(sources), "a source directory for each of %v", sources)
	t.Logf("cited sources: pinned istio.io/istio %s, %v", pinned[0].Version, dirs)
	return dirs
}

// Every citation of istiod's source in the findings, the checks page, the reproducers' READMEs and
// issue texts and the known-issue table is exact: its file exists in the cited version, its lines
// are in the file, and its anchor is on them; and no line reference is written any other way.
func TestCiteDocuments(t *testing.T) {
	dirs := citedDirs(t)
	root := filepath.Join("..", "..")
	docs := slices.Clone(citingDocuments)
	for _, glob := range citingGlobs {
		matches, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(glob)))
		require.NoError(t, err)
		require.NotEmpty(t, matches, "documents matching %s", glob)
		for _, m := range matches {
			rel, err := filepath.Rel(root, m)
			require.NoError(t, err)
			docs = append(docs, filepath.ToSlash(rel))
		}
	}
	found := map[string]int{}
	var problems []string
	check := func(doc string, cites []citation, p []string) {
		problems = append(problems, p...)
		for _, c := range cites {
			found[doc]++
			if err := checkCitation(c, dirs); err != nil {
				problems = append(problems, fmt.Sprintf("%v: %v", c, err))
			}
		}
	}
	for _, doc := range docs {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(doc)))
		require.NoError(t, err)
		cites, p := scanCitations(doc, 1, string(b))
		check(doc, cites, p)
	}
	const known = "framework/istiodcheck/known.go"
	texts, lines := goTexts(t, "known.go")
	for i, text := range texts {
		cites, p := scanCitations(known, lines[i], text)
		check(known, cites, p)
	}
	assert.Empty(t, problems, "citations of istiod's source that are not exact:\n%s", strings.Join(problems, "\n"))
	// A scanner that finds nothing passes vacuously. Every document but the checks page cites.
	for _, doc := range append(docs, known) {
		if doc != "docs/checks.md" {
			assert.Positive(t, found[doc], "citations found in %s", doc)
		}
	}
	t.Logf("citations checked: %v", found)
}

// issueInFindings is how docs/findings.md holds an issue text (repro/<folder>/ISSUE.md) under its
// "Issue text" heading: the title in bold, the body as it stands with its headings one level down
// (a "#" line in a fenced block is no heading).
func issueInFindings(issue string) (string, error) {
	title, body, ok := strings.Cut(strings.TrimSpace(issue), "\n")
	title, isTitle := strings.CutPrefix(title, "# ")
	if !ok || !isTitle {
		return "", errors.New("an issue text starts with its title, a \"# \" heading, then its body")
	}
	lines := strings.Split(strings.TrimSpace(body), "\n")
	inFence := false
	for i, l := range lines {
		switch {
		case fence.MatchString(l):
			inFence = !inFence
		case !inFence && strings.HasPrefix(l, "#"):
			lines[i] = "#" + l
		}
	}
	return "**" + title + "**\n\n" + strings.Join(lines, "\n") + "\n", nil
}

// docs/findings.md holds every reproducer's issue text as it stands in repro/<folder>/ISSUE.md, each
// under a heading "### Issue text", so that the page and the text to file cannot drift apart.
func TestCiteFindingsHoldTheIssueTexts(t *testing.T) {
	root := filepath.Join("..", "..")
	b, err := os.ReadFile(filepath.Join(root, "docs", "findings.md"))
	require.NoError(t, err)
	findings := string(b)
	issues, err := filepath.Glob(filepath.Join(root, "repro", "*", "ISSUE.md"))
	require.NoError(t, err)
	require.NotEmpty(t, issues)
	for _, path := range issues {
		rel, err := filepath.Rel(root, path)
		require.NoError(t, err)
		rel = filepath.ToSlash(rel)
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		want, err := issueInFindings(string(b))
		require.NoError(t, err, rel)
		at := strings.Index(findings, "\n"+want)
		if !assert.GreaterOrEqual(t, at, 0, "docs/findings.md holds %s as it stands (the title in bold, headings one "+
			"level down):\n%s", rel, want) {
			continue
		}
		before := findings[:at]
		heading := before[strings.LastIndex(before, "\n#")+1:]
		heading, _, _ = strings.Cut(heading, "\n")
		assert.Equal(t, "### Issue text", heading, "the heading above %s's text in docs/findings.md", rel)
	}
}

// The checker fails on what it is there to catch.
func TestCiteChecker(t *testing.T) {
	pinned, april, clientGo := t.TempDir(), t.TempDir(), t.TempDir()
	for _, dir := range []string{pinned, april} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "pkg", "a"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "pkg", "a", "b.go"), []byte("one\ntwo\nthree\n"), 0o644))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(clientGo, "tools", "cache"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(clientGo, "tools", "cache", "r.go"), []byte("four\nfive\n"), 0o644))
	dirs := map[string]string{"": pinned, "April": april, "client-go": clientGo}
	for _, tc := range []struct {
		name, text string
		problem    string // "" when the text is fine
	}{
		{"a line", "as `pkg/a/b.go:2 two` says", ""},
		{"a range", "as `pkg/a/b.go:1-3 three` says", ""},
		{"another version", "as `April pkg/a/b.go:1 one` says", ""},
		{"a file reference without a line is no citation", "the `pkg/a/b.go` file", ""},
		{"missing file", "`pkg/a/c.go:1 one`", "no such file"},
		{"range past the end", "`pkg/a/b.go:3-4 three`", "past the end of pkg/a/b.go (3 lines)"},
		{"line past the end", "`pkg/a/b.go:396 three`", "past the end"},
		{"anchor absent", "`pkg/a/b.go:1-2 three`", `"three" is not on pkg/a/b.go:1-2`},
		{"anchor on a line next to the range", "`pkg/a/b.go:2 three`", "is not on"},
		{"range backwards", "`pkg/a/b.go:3-2 two`", "ends (2) before it starts (3)"},
		{"range too long", "`pkg/a/b.go:1-26 one`", "more than 25"},
		{"a version without a source", "`1.30 pkg/a/b.go:1 one`", `no source for the label "1.30"`},
		{"client-go", "as `client-go tools/cache/r.go:2 five` says", ""},
		{"client-go's file in istio", "`tools/cache/r.go:2 five`", "no such file"},
		{"istio's file in client-go", "`client-go pkg/a/b.go:1 one`", "no such file"},
		{"an unknown version label", "`1.29 pkg/a/b.go:1 one`", "is not a citation"},
		{"no directory", "`b.go:1 one`", "is not a citation"},
		{"no anchor", "`pkg/a/b.go:1`", "is not a citation"},
		{"a list of ranges", "`pkg/a/b.go:1, 2-3 two`", "is not a citation"},
		{"bare reference", "as cluster.go:12 says", `bare line reference "cluster.go:12"`},
		{"bare reference with a path", "(pkg/kube/multicluster/cluster.go:194-196)", `bare line reference "pkg/kube/multicluster/cluster.go:194"`},
		{"a citation broken across lines", "`pkg/a/\nb.go:1 one`", `bare line reference "b.go:1"`},
		{"a line without its file", "the swap (`:470`)", `line reference ":470" without its file`},
		{"a range without its file in prose", "the callback (:200-212) holds it", `line reference ":200-212" without its file`},
		{"a port is no line", "`localhost:8080` and http://127.0.0.1:15014/debug", ""},
		{"quoted output within a citation", "`pkg/a/b.go:1-3 two`:\n\n```\nf() at pkg/a/b.go:2\n```\n", ""},
		{"quoted output in an indented fence", "`pkg/a/b.go:2 two`:\n\n  ```\n  f()   pkg/a/b.go:2\n  ```\n", ""},
		{"quoted output no citation covers", "`pkg/a/b.go:1 one`\n```\nf() at pkg/a/b.go:2\n```\n", `"pkg/a/b.go:2" in a fenced block`},
		{"quoted output covered by another version only", "`April pkg/a/b.go:1-3 two`\n```\npkg/a/b.go:2\n```\n", "in a fenced block"},
		{"quoted output without its path", "`pkg/a/b.go:1-3 two`\n```\nb.go:2\n```\n", `"b.go:2" in a fenced block`},
		{"a code span in a fence is quoted output", "```\n`pkg/a/b.go:2 two`\n```\n", "in a fenced block"},
		{"an unclosed fence", "text\n```\noutput\n", "doc.md:2: a fenced code block that is not closed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cites, problems := scanCitations("doc.md", 1, tc.text)
			for _, c := range cites {
				if err := checkCitation(c, dirs); err != nil {
					problems = append(problems, err.Error())
				}
			}
			if tc.problem == "" {
				assert.Empty(t, problems)
				return
			}
			require.Len(t, problems, 1, "%v", problems)
			assert.Contains(t, problems[0], tc.problem)
		})
	}
}

// An issue text goes into docs/findings.md with its title in bold and its headings one level down.
func TestCiteIssueInFindings(t *testing.T) {
	got, err := issueInFindings("# A title\n\n### Bug description\n\ntext\n\n```\n# not a heading\n```\n\n### Version\n\n1.31\n")
	require.NoError(t, err)
	assert.Equal(t, "**A title**\n\n#### Bug description\n\ntext\n\n```\n# not a heading\n```\n\n#### Version\n\n1.31\n", got)
	_, err = issueInFindings("no title\n\ntext\n")
	assert.Error(t, err)
}
