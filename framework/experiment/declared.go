package experiment

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// DeclaredTests checks the suite in the current directory, and returns its
// top-level tests: every one declares its plan item in its own file, beside itself
// (var _ = planned.Add("TestX", ...)), or it would run unplanned, and starts with mc.Begin(t),
// which skips it where its declared needs are unmet; the TestPlan tests, which check the plan
// itself and need no environment, declare none and are not returned.
func DeclaredTests(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob("*_test.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var tests []string
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		declared := map[string]bool{}
		ast.Inspect(af, func(n ast.Node) bool {
			if name, ok := plannedName(n); ok {
				declared[name] = true
			}
			return true
		})
		for _, d := range af.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
				continue
			}
			name := fn.Name.Name
			if strings.HasPrefix(name, "TestPlan") {
				assert.False(t, declared[name], "%s: %s checks the plan and needs no environment: it declares no item", f, name)
				continue
			}
			tests = append(tests, name)
			assert.True(t, declared[name], "%s: %s declares no plan item beside itself (var _ = planned.Add(%q, ...))", f, name, name)
			assert.True(t, callsBegin(fn.Body.List[0]), "%s: %s does not start with mc.Begin(t), which skips it where its declared needs are unmet", f, name)
		}
	}
	return tests
}

// callsBegin says stmt calls mc.Begin.
func callsBegin(stmt ast.Stmt) bool {
	found := false
	ast.Inspect(stmt, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Begin" {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "mc" {
				found = true
			}
		}
		return !found
	})
	return found
}

// plannedName is the test a planned.Add("TestX", ...) call declares.
func plannedName(n ast.Node) (string, bool) {
	call, ok := n.(*ast.CallExpr)
	if !ok || len(call.Args) == 0 {
		return "", false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Add" {
		return "", false
	}
	if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "planned" {
		return "", false
	}
	lit, ok := call.Args[0].(*ast.BasicLit)
	if !ok {
		return "", false
	}
	name, err := strconv.Unquote(lit.Value)
	return name, err == nil
}
