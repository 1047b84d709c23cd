// Package layout checks the house's import rules (docs/layout.md) on every go test ./...: the
// contract imports nothing of the machinery behind it, the method knows no provider and nothing
// of the experiment above it, the lifecycle knows neither the method nor CI, and nothing below
// suites/ reaches up.
package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/ambientmc/ambientmc/"

// imports maps every package of the module (by its path inside the module) to what its non-test
// files import from the module.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != ".." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(strings.TrimPrefix(path, "../")))
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, module) {
				out[pkg] = append(out[pkg], strings.TrimPrefix(p, module))
			}
		}
		if _, ok := out[pkg]; !ok {
			out[pkg] = nil
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

func under(pkg string, prefixes ...string) bool {
	for _, p := range prefixes {
		if pkg == p || strings.HasPrefix(pkg, p+"/") {
			return true
		}
	}
	return false
}

// method are the packages that hold how the experiment is done.
var method = []string{"framework/join", "framework/istiodcheck", "framework/churn", "framework/traffic",
	"framework/latency", "framework/measure", "framework/xdswatch", "framework/envoyxds", "framework/xdscount", "framework/xdsstream", "framework/proxies", "framework/faults", "framework/subtest", "framework/clustercheck"}

// emulatorMay is what the emulator may import of the framework: the contract's types and what a
// ztunnel itself has (certificates, istiod's xDS clients, the workloads' names).
var emulatorMay = []string{"framework/cluster", "framework/pki", "framework/workload", "framework/xdswatch", "framework/xdsstream", "framework/xdscount"}

// providers are the provider implementations (not the registry, framework/provider itself).
func isProvider(pkg string) bool {
	return strings.HasPrefix(pkg, "framework/provider/")
}

func TestImportRules(t *testing.T) {
	all := imports(t)
	require.Contains(t, all, "framework/cluster", "the walk found the module's packages")
	for pkg, deps := range all {
		for _, dep := range deps {
			switch {
			case pkg == "framework/cluster" && dep != "topology":
				t.Errorf("the contract %s imports %s: it may import only topology of this module", pkg, dep)
			case under(pkg, "framework", "topology", "emulator") && under(dep, "suites", "scripts"):
				t.Errorf("%s imports %s: nothing below suites/ and scripts/ reaches up", pkg, dep)
			case under(pkg, "emulator") && under(dep, "framework") && !under(dep, emulatorMay...):
				t.Errorf("the emulator's %s imports %s: of the framework it may import only %v", pkg, dep, emulatorMay)
			case under(pkg, method...) && (isProvider(dep) || under(dep, "framework/env", "framework/ci", "framework/experiment")):
				t.Errorf("the method's %s imports %s: it may not know a provider, the lifecycle, the experiment above it or CI", pkg, dep)
			case pkg == "framework/expctx" && (isProvider(dep) || under(dep, append([]string{"framework/env", "framework/ci", "framework/experiment"}, method...)...)):
				t.Errorf("the experiment context %s imports %s: it sits below the method, which reads it", pkg, dep)
			case under(pkg, "framework/env") && under(dep, append([]string{"framework/ci", "framework/experiment"}, method[:5]...)...):
				t.Errorf("the lifecycle's %s imports %s: CI plugs in as an env.Extension, the method is the suites'", pkg, dep)
			case isProvider(dep) && under(pkg, "framework") && !under(pkg, "framework/env", "framework/provider"):
				t.Errorf("%s imports the provider %s: only framework/env/providers.go registers providers", pkg, dep)
			case under(dep, "framework/ci") && under(pkg, "framework") && !under(pkg, "framework/ci"):
				t.Errorf("%s imports CI's %s: CI's parts are the suites' and scripts' to use", pkg, dep)
			}
		}
	}
}

// The rules above can fail: a walk that found no import would pass them all.
func TestTheWalkSeesImports(t *testing.T) {
	all := imports(t)
	assert.Contains(t, all["framework/env"], "framework/cluster")
	assert.Contains(t, all["framework/join"], "framework/expctx", "the method reads the one experiment context")
	assert.Contains(t, all["framework/ci"], "framework/env")
	assert.Contains(t, all["framework/experiment"], "framework/join")
	assert.Contains(t, all["emulator/dataplane"], "framework/xdswatch")
}

// The suites are the experiment's script, its method in framework/experiment: no test file under
// suites/ over 200 lines, no helper there (a function that is not a test) over 40.
func TestSuitesAreScripts(t *testing.T) {
	files, err := filepath.Glob("../suites/*/*_test.go")
	require.NoError(t, err)
	require.NotEmpty(t, files, "the walk found the suites")
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		name := strings.TrimPrefix(f, "../")
		assert.LessOrEqual(t, fset.File(af.Pos()).LineCount(), 200, "%s: a suite's test file over 200 lines holds method: move it to framework/experiment", name)
		for _, d := range af.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || strings.HasPrefix(fn.Name.Name, "Test") {
				continue
			}
			lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			assert.LessOrEqual(t, lines, 40, "%s: helper %s is %d lines: move it to framework/experiment", name, fn.Name.Name, lines)
		}
	}
}

// One istiod handle in the method's world, mesh.Istiod (the provider's cluster.Istiod and its
// sampler, measure.Sampler); a provider's own istiod types are named for what they are.
func TestOneIstiodType(t *testing.T) {
	var declared []string
	err := filepath.WalkDir("../framework", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				for _, spec := range g.Specs {
					if spec.(*ast.TypeSpec).Name.Name == "Istiod" {
						declared = append(declared, filepath.ToSlash(filepath.Dir(strings.TrimPrefix(path, "../"))))
					}
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"framework/cluster", "framework/mesh"}, declared, "packages declaring a type Istiod")
}

// The contract is narrow: at most 12 interfaces in framework/cluster (what only describes a run is
// cluster.Facts, the probes' vocabulary is framework/probe's), and provider/kind builds on
// framework/incluster, not on another provider.
func TestNarrowSeam(t *testing.T) {
	interfaces := contractInterfaces(t)
	assert.LessOrEqual(t, len(interfaces), 12, "the contract's interfaces: %v", interfaces)
	assert.Contains(t, interfaces, "Provider", "the walk found the contract")
	all := imports(t)
	for pkg, deps := range all {
		for _, dep := range deps {
			if isProvider(pkg) && isProvider(dep) && !under(pkg, "framework/provider/wrapped") && providerOf(pkg) != providerOf(dep) {
				t.Errorf("the provider %s imports the provider %s: shared work above the nodes belongs in a package of its own (framework/incluster)", pkg, dep)
			}
		}
	}
}

// contractInterfaces are the interface types framework/cluster declares.
func contractInterfaces(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../framework/cluster/*.go")
	require.NoError(t, err)
	var out []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				for _, spec := range g.Specs {
					if _, ok := spec.(*ast.TypeSpec).Type.(*ast.InterfaceType); ok {
						out = append(out, spec.(*ast.TypeSpec).Name.Name)
					}
				}
			}
		}
	}
	return out
}

// providerOf is the provider folder pkg is in (framework/provider/<name>).
func providerOf(pkg string) string {
	return strings.Join(strings.SplitN(pkg, "/", 4)[:3], "/")
}

// Providers stay small: what a provider repeats above its nodes, or a job another could use,
// belongs in a package of its own. Each provider is held under 2,000 non-test lines.
func TestProvidersStaySmall(t *testing.T) {
	entries, err := os.ReadDir("../framework/provider")
	require.NoError(t, err)
	seen := 0
	for _, en := range entries {
		if !en.IsDir() {
			continue
		}
		seen++
		name, dir := en.Name(), filepath.Join("../framework/provider", en.Name())
		lines := 0
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			data, err := os.ReadFile(path)
			lines += strings.Count(string(data), "\n")
			return err
		})
		require.NoError(t, err)
		assert.LessOrEqual(t, lines, 1999, "framework/provider/%s has %d non-test lines", name, lines)
	}
	assert.GreaterOrEqual(t, seen, 4, "the walk found the providers")
}

// The method and the experiment context below it register no flag on the default flag set: a
// program that uses the method alone (scripts/bins imports istiodcheck) keeps its own flags, and
// two registrations of one name panic at start. The experiment registers them (experiment.Flags).
func TestTheMethodRegistersNoFlags(t *testing.T) {
	checked := 0
	for _, dir := range append([]string{"framework/expctx"}, method...) {
		files, err := filepath.Glob(filepath.Join("..", dir, "*.go"))
		require.NoError(t, err)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			checked++
			assert.NotContains(t, string(data), "flag.CommandLine", "%s registers flags on the default flag set", f)
		}
	}
	assert.Greater(t, checked, 20, "the walk found the method's files")
}
