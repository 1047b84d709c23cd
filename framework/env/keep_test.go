package env

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
)

// namedProvider is a provider whose clusters end with the test process (local's processes).
type namedProvider struct {
	cluster.Provider
	name string
}

func (p namedProvider) Name() string         { return p.name }
func (p namedProvider) Facts() cluster.Facts { return cluster.Facts{} }

// keeperProvider is one whose clusters outlive it (kind's containers).
type keeperProvider struct {
	namedProvider
	kept  cluster.Kept
	calls int
}

func (p *keeperProvider) Keep() (cluster.Kept, error) { p.calls++; return p.kept, nil }
func (p *keeperProvider) CollectLogs() string         { return "" }

func keptEnv(t *testing.T, p cluster.Provider) (*Env, *bytes.Buffer) {
	t.Helper()
	var tty bytes.Buffer
	e := &Env{Log: &bytes.Buffer{}, terminal: &tty, start: time.Now(), Provider: p, ReportDir: t.TempDir(), RunDir: t.TempDir()}
	for _, c := range testClusters(2) {
		c.Kubeconfig = filepath.Join(e.RunDir, c.Name, "kubeconfig")
		e.Clusters = append(e.Clusters, c)
	}
	return e, &tty
}

func readKept(t *testing.T, e *Env) Kept {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e.ReportDir, KeptFile))
	require.NoError(t, err, "kept.json written before the wait")
	var k Kept
	require.NoError(t, json.Unmarshal(data, &k))
	return k
}

// Clusters that outlive the run: the terminal (go test without -v shows nothing before the
// package ends) and kept.json say where their kubeconfigs are, the one removal command, and that
// Ctrl-C ends the run and leaves them.
func TestKeepSaysWhatOutlivesTheRun(t *testing.T) {
	dir := t.TempDir()
	p := &keeperProvider{namedProvider: namedProvider{name: "kind"}, kept: cluster.Kept{Dir: dir, Remove: "go -C /src run ./scripts/kept -remove " + dir,
		Clusters: []cluster.KeptCluster{{Name: "cluster-1", Kubeconfig: dir + "/cluster-1/kubeconfig"}, {Name: "cluster-2"}}}}
	e, tty := keptEnv(t, p)
	e.announceKept()
	out := tty.String()
	assert.Contains(t, out, "-keep: 2 clusters outlive this run; their kubeconfigs (0600) are in "+dir)
	assert.Contains(t, out, "cluster-1    kubectl --kubeconfig="+dir+"/cluster-1/kubeconfig get namespaces")
	assert.Contains(t, out, "cluster-2    (its create did not get as far as a kubeconfig)")
	assert.Contains(t, out, "  go -C /src run ./scripts/kept -remove "+dir+"\n")
	assert.Contains(t, out, "waiting for Ctrl-C, which ends this run and leaves the clusters running")
	assert.NotContains(t, out, "until Ctrl-C")
	assert.Equal(t, Kept{Provider: "kind", OutlivesRun: true, Dir: dir, Remove: p.kept.Remove, PID: os.Getpid(),
		Clusters: []KeptCluster{{Name: "cluster-1", Kubeconfig: dir + "/cluster-1/kubeconfig"}, {Name: "cluster-2"}}}, readKept(t, e))

	require.NoError(t, e.recordKeptAtTeardown())
	assert.Equal(t, 1, p.calls, "recorded once")
}

// Clusters that end with the run (local's processes): they stay up until Ctrl-C, which stops them.
func TestKeepSaysCtrlCStopsClustersOfThisProcess(t *testing.T) {
	e, tty := keptEnv(t, namedProvider{name: "local"})
	e.announceKept()
	kill := fmt.Sprintf("kill -INT %d", os.Getpid())
	assert.Contains(t, tty.String(), "-keep: 2 clusters run in this process and stay up until Ctrl-C (or "+kill+"), which stops and removes them")
	k := readKept(t, e)
	assert.False(t, k.OutlivesRun)
	assert.Equal(t, kill, k.Remove)
	assert.Equal(t, e.Clusters[0].Kubeconfig, k.Clusters[0].Kubeconfig)
	require.NoError(t, e.recordKeptAtTeardown())
}

// A run cut short with -keep (a failed setup, a signal, the deadline) says what it left at teardown.
func TestKeepRecordedAtTeardownOfARunCutShort(t *testing.T) {
	dir := t.TempDir()
	p := &keeperProvider{namedProvider: namedProvider{name: "kind"}, kept: cluster.Kept{Dir: dir, Remove: "remove " + dir,
		Clusters: []cluster.KeptCluster{{Name: "cluster-1"}}}}
	e, tty := keptEnv(t, p)
	require.NoError(t, e.recordKeptAtTeardown())
	assert.Contains(t, tty.String(), "-keep: the run left 1 cluster (kubeconfigs in "+dir)
	assert.Contains(t, tty.String(), "remove "+dir)
	assert.True(t, readKept(t, e).OutlivesRun)

	local, tty := keptEnv(t, namedProvider{name: "local"})
	require.NoError(t, local.recordKeptAtTeardown())
	assert.Empty(t, tty.String(), "the local provider's teardown removes its clusters: nothing kept")
	assert.NoFileExists(t, filepath.Join(local.ReportDir, KeptFile))
}
