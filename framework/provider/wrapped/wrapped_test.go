package wrapped

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/provider"
	"github.com/ambientmc/ambientmc/framework/provider/local"
	"github.com/ambientmc/ambientmc/framework/report"
)

// The join suite passes through a provider that lives in this folder alone, and its report names
// the provider and the data plane it declares.
func TestJoinSuiteRunsThroughTheWrappedProvider(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the join suite in a child go test (minutes)")
	}
	if _, missing, err := local.NewIfBuilt(local.Options{}); err != nil {
		t.Fatal(err)
	} else if len(missing) > 0 {
		t.Skipf("binaries not built (%v): run `make bins`", missing)
	}
	ctx := context.Background()
	if d, ok := t.Deadline(); ok { // fail with the child's output before this test's own timeout
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-30*time.Second))
		defer cancel()
	}
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, "go", "test", "../../../suites/multicluster", "-v", "-count=1", "-timeout=15m",
		"-run", "^TestControlPlaneJoin$", "-provider="+Name, "-clusters=2", "-report-dir="+dir)
	cmd.Env = append(os.Environ(), "ARTIFACTS=") // the child leaves nothing in a CI's artifacts
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go test %s:\n%s", strings.Join(cmd.Args[2:], " "), tail(out, 60))
	require.Contains(t, string(out), "--- PASS: TestControlPlaneJoin", "the join test ran and passed, not skipped:\n%s", tail(out, 60))

	r, err := report.Read(filepath.Join(dir, report.JSONFile))
	require.NoError(t, err, "report.json validates with a provider name of its own")
	assert.Equal(t, Name, r.Provider)
	assert.Equal(t, report.DataPlaneEmulated, r.DataPlane, "the data plane the provider declares")
	require.NotNil(t, r.ControlPlane, "the join suite measured istiod")
	assert.Len(t, r.ControlPlane.Joins, 1, "one remote joined the observed istiod")
}

// tail is the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// The wrapped provider offers every optional capability the one it wraps offers, and no other: a
// wrapped run takes the code path it claims to prove. The list below is the contract's whole list
// (TestOptionalCapabilitiesAreTheContracts), so a capability added to the contract fails here until
// the wrapper forwards it or the list says why it need not.
func TestWrappedOffersWhatItWraps(t *testing.T) {
	e := provider.Env{RunDir: t.TempDir(), Log: io.Discard}
	in, err := provider.New(inner, e)
	require.NoError(t, err)
	w, err := provider.New(Name, e)
	require.NoError(t, err)
	for name, offers := range providerCapabilities {
		assert.Equal(t, offers(in), offers(w), "cluster.%s: the wrapped provider offers it exactly where %s does", name, inner)
	}
	assert.Equal(t, in.Facts().DataPlane, w.Facts().DataPlane)
	assert.Equal(t, in.ControlPlane(), w.ControlPlane(), "the control plane (and what it offers) is the inner one")
	assert.Equal(t, in.Gateways(), w.Gateways())
}

// providerCapabilities are the optional capabilities a provider value offers; the others are
// offered by values a provider returns (valueCapabilities), which the wrapper passes on as they are.
var providerCapabilities = map[string]func(cluster.Provider) bool{
	"FakeNodeProxies": func(p cluster.Provider) bool { _, ok := p.(cluster.FakeNodeProxies); return ok },
	"Snapshots":       func(p cluster.Provider) bool { _, ok := p.(cluster.Snapshots); return ok },
	"Keeper":          func(p cluster.Provider) bool { _, ok := p.(cluster.Keeper); return ok },
	"HostProcesses":   func(p cluster.Provider) bool { _, ok := p.(cluster.HostProcesses); return ok },
	"probe.Deployer":  func(p cluster.Provider) bool { _, ok := p.(probe.Deployer); return ok },
}

var (
	// valueCapabilities are offered by ControlPlane, Istiod and FakeNodeProxies values.
	valueCapabilities = []string{"ExtraIstiods", "IstiodRestarter", "NodeCertificates"}
	// coreInterfaces every provider implements (AddressPlan: a value in cluster.Addresses).
	coreInterfaces = []string{"Provider", "ControlPlane", "Istiod", "Gateways", "AddressPlan"}
)

func TestOptionalCapabilitiesAreTheContracts(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, "../../cluster", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	require.NoError(t, err)
	var declared []string
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, d := range f.Decls {
				if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
					for _, s := range g.Specs {
						if _, ok := s.(*ast.TypeSpec).Type.(*ast.InterfaceType); ok {
							declared = append(declared, s.(*ast.TypeSpec).Name.Name)
						}
					}
				}
			}
		}
	}
	listed := append(append([]string{}, coreInterfaces...), valueCapabilities...)
	for name := range providerCapabilities {
		if !strings.Contains(name, ".") {
			listed = append(listed, name)
		}
	}
	assert.ElementsMatch(t, declared, listed, "every interface of framework/cluster is listed here")
}
