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
type citation struct {
	where    string // document:line of the citation
	version  string // "" for the pinned istio.io/istio, else a key of citedVersions
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

// citedVersions are the labels a citation may carry, and the istio.io/istio versions they name.
var citedVersions = map[string]string{
	"1.30":  istioRelease130Aug,
	"April": istioApril,
}

// maxCitedLines keeps a range to the lines that do the thing cited, not the function around them.
const maxCitedLines = 25

var (
	codeSpan = regexp.MustCompile("`([^`\n]+)`")
	// cited is a well-formed citation: [1.30 |April ]dir/.../file.go:N[-M] anchor.
	cited = regexp.MustCompile(`^(?:(1\.30|April) )?((?:[\w.-]+/)+[\w.-]+\.go):(\d+)(?:-(\d+))? (\S.*)$`)
	// lineRef is any reference to a line of a Go file, cited or not.
	lineRef = regexp.MustCompile(`[\w./-]*\w\.go:\d+`)
)

// scanCitations finds the citations in text (which starts on line first of document name) and
// reports every line reference that is not one: a code span naming a line of a Go file that does
// not parse as a citation, or a reference outside a code span.
func scanCitations(name string, first int, text string) (cites []citation, problems []string) {
	at := func(offset int) string {
		return fmt.Sprintf("%s:%d", name, first+strings.Count(text[:offset], "\n"))
	}
	rest := []byte(text)
	for _, m := range codeSpan.FindAllStringSubmatchIndex(text, -1) {
		span := text[m[2]:m[3]]
		if !lineRef.MatchString(span) {
			continue
		}
		// Blank the span out, so that only references outside code spans remain in rest.
		copy(rest[m[0]:m[1]], bytes.Repeat([]byte{' '}, m[1]-m[0]))
		p := cited.FindStringSubmatch(span)
		if p == nil {
			problems = append(problems, fmt.Sprintf("%s: `%s` is not a citation ([1.30 |April ]path/from/module/root.go:N[-M] anchor)", at(m[0]), span))
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
		problems = append(problems, fmt.Sprintf("%s: bare line reference %q, not a citation ([1.30 |April ]path/from/module/root.go:N[-M] anchor in a code span)", at(m[0]), text[m[0]:m[1]]))
	}
	return cites, problems
}

// checkCitation reads the cited lines from the module directory of the citation's version (dirs,
// keyed by label, "" for the pinned one) and says what is wrong with the citation, if anything.
func checkCitation(c citation, dirs map[string]string) error {
	dir, ok := dirs[c.version]
	if !ok {
		return fmt.Errorf("no istio.io/istio source for version %q", c.version)
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
		return fmt.Errorf("no such file in istio.io/istio: %w", err)
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

// istioSources resolves the module directory of every cited istio.io/istio version (the pinned one
// is go.mod's) in the module cache, downloading what is missing.
func istioSources(t *testing.T) map[string]string {
	t.Helper()
	type module struct{ Version, Dir, Error string }
	run := func(needDir bool, args ...string) []module {
		cmd := exec.Command("go", args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		fail := func(why string, a ...any) {
			require.FailNowf(t, "no istio.io/istio source", "go %s: %s; the citations cannot be checked without the "+
				"istio.io/istio source (is the module proxy reachable?)", strings.Join(args, " "), fmt.Sprintf(why, a...))
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
				fail("istio.io/istio@%s has no source directory: %s", m.Version, m.Error)
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
	versions := map[string]string{"": pinned[0].Version}
	args := []string{"mod", "download", "-json", "istio.io/istio@" + pinned[0].Version}
	for label, v := range citedVersions {
		versions[label] = v
		args = append(args, "istio.io/istio@"+v)
	}
	dirs := map[string]string{}
	for _, m := range run(true, args...) {
		for label, v := range versions {
			if v == m.Version {
				dirs[label] = m.Dir
			}
		}
	}
	require.Len(t, dirs, len(versions), "a source directory for each of %v", versions)
	t.Logf("istio.io/istio sources: pinned %s, %v", pinned[0].Version, dirs)
	return dirs
}

// Every citation of istiod's source in the findings, the checks page and the known-issue table is
// exact: its file exists in the cited version, its lines are in the file, and its anchor is on them;
// and no line reference is written any other way.
func TestCiteDocuments(t *testing.T) {
	dirs := istioSources(t)
	root := filepath.Join("..", "..")
	found := map[string]int{}
	var problems []string
	for _, doc := range []string{"docs/findings.md", "docs/checks.md"} {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(doc)))
		require.NoError(t, err)
		cites, p := scanCitations(doc, 1, string(b))
		problems = append(problems, p...)
		for _, c := range cites {
			found[doc]++
			if err := checkCitation(c, dirs); err != nil {
				problems = append(problems, fmt.Sprintf("%v: %v", c, err))
			}
		}
	}
	const known = "framework/istiodcheck/known.go"
	texts, lines := goTexts(t, "known.go")
	for i, text := range texts {
		cites, p := scanCitations(known, lines[i], text)
		problems = append(problems, p...)
		for _, c := range cites {
			found[known]++
			if err := checkCitation(c, dirs); err != nil {
				problems = append(problems, fmt.Sprintf("%v: %v", c, err))
			}
		}
	}
	assert.Empty(t, problems, "citations of istiod's source that are not exact:\n%s", strings.Join(problems, "\n"))
	// A scanner that finds nothing passes vacuously.
	assert.Positive(t, found["docs/findings.md"], "citations found in docs/findings.md")
	assert.Positive(t, found[known], "citations found in known.go")
	t.Logf("citations checked: %v", found)
}

// The checker fails on what it is there to catch.
func TestCiteChecker(t *testing.T) {
	pinned, april := t.TempDir(), t.TempDir()
	for _, dir := range []string{pinned, april} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "pkg", "a"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "pkg", "a", "b.go"), []byte("one\ntwo\nthree\n"), 0o644))
	}
	dirs := map[string]string{"": pinned, "April": april}
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
		{"a version without a source", "`1.30 pkg/a/b.go:1 one`", `no istio.io/istio source for version "1.30"`},
		{"an unknown version label", "`1.29 pkg/a/b.go:1 one`", "is not a citation"},
		{"no directory", "`b.go:1 one`", "is not a citation"},
		{"no anchor", "`pkg/a/b.go:1`", "is not a citation"},
		{"a list of ranges", "`pkg/a/b.go:1, 2-3 two`", "is not a citation"},
		{"bare reference", "as cluster.go:12 says", `bare line reference "cluster.go:12"`},
		{"bare reference with a path", "(pkg/kube/multicluster/cluster.go:194-196)", `bare line reference "pkg/kube/multicluster/cluster.go:194"`},
		{"a citation broken across lines", "`pkg/a/\nb.go:1 one`", `bare line reference "b.go:1"`},
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
