package env

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ambientmc/ambientmc/framework/cluster"
)

// KeptFile, in the report directory, says what -keep left, for a script: go test shows nothing of
// a package's output before it ends, and the run waits for Ctrl-C.
const KeptFile = "kept.json"

// Kept is KeptFile's content.
type Kept struct {
	Provider string `json:"provider"`
	// OutlivesRun: the clusters stay after the run ends (kind's containers); else they end with it.
	OutlivesRun bool          `json:"outlivesRun"`
	Clusters    []KeptCluster `json:"clusters"`
	// Dir holds the kubeconfigs: outside the run directory where the clusters outlive the run.
	Dir string `json:"dir"`
	// Remove is the one command that removes what the run made and puts back what it changed:
	// the provider's removal step, or the signal that ends the waiting run.
	Remove string `json:"remove"`
	// PID is the test process, waiting for Ctrl-C (SIGINT) or SIGTERM.
	PID int `json:"pid"`
}

// KeptCluster is one kept cluster and its kubeconfig (0600).
type KeptCluster struct {
	Name       string `json:"name"`
	Kubeconfig string `json:"kubeconfig"`
}

// keep, for -keep once the tests ended: it says how to reach every cluster, how to remove them
// and truthfully what Ctrl-C will do, writes KeptFile, and blocks until Ctrl-C or SIGTERM.
func (e *Env) keep() {
	k := e.announceKept()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	if k.OutlivesRun {
		e.Statusf("-keep: ending this run; the clusters stay (remove them with %s)", k.Remove)
	} else {
		e.Statusf("-keep: stopping the clusters")
	}
	e.Flags.Keep = false // let the run directory go now
}

// announceKept records what -keep leaves and says it, also to the terminal go test would hide it
// from: how to reach each cluster, how to remove them, and what Ctrl-C does.
func (e *Env) announceKept() Kept {
	k, err := e.recordKept()
	if err != nil {
		e.Statusf("-keep: %v", err)
	}
	if k.OutlivesRun {
		e.Statusf("-keep: %s outlive this run; their kubeconfigs (0600) are in %s:\n%s", clusterCount(len(k.Clusters)), k.Dir, kubectlLines(k))
		e.Statusf("-keep: remove them and all else the run made, and put back what it changed on the host, with:\n  %s", k.Remove)
		e.Statusf("-keep: the same in %s; waiting for Ctrl-C, which ends this run and leaves the clusters running", e.keptPath())
	} else {
		e.Statusf("-keep: %s run in this process and stay up until Ctrl-C (or %s), which stops and removes them; kubeconfigs:\n%s", clusterCount(len(k.Clusters)), k.Remove, kubectlLines(k))
		e.Statusf("-keep: the same in %s; waiting for Ctrl-C", e.keptPath())
	}
	return k
}

// recordKept works out what -keep leaves and writes it to KeptFile (once; it also runs as a
// cleanup, so that a run cut short with -keep says what it left).
func (e *Env) recordKept() (Kept, error) {
	e.mu.Lock()
	if e.kept != nil {
		defer e.mu.Unlock()
		return *e.kept, nil
	}
	e.mu.Unlock()
	k := Kept{Provider: e.Provider.Name(), PID: os.Getpid(), Dir: e.RunDir,
		Remove: fmt.Sprintf("kill -INT %d", os.Getpid())}
	if kp, ok := e.Provider.(cluster.Keeper); ok {
		pk, err := kp.Keep()
		if err != nil {
			return k, err
		}
		k.OutlivesRun, k.Dir, k.Remove = true, pk.Dir, pk.Remove
		for _, c := range pk.Clusters {
			k.Clusters = append(k.Clusters, KeptCluster{Name: c.Name, Kubeconfig: c.Kubeconfig})
		}
	} else {
		for _, c := range e.Clusters {
			k.Clusters = append(k.Clusters, KeptCluster{Name: c.Name, Kubeconfig: c.Kubeconfig})
		}
	}
	e.mu.Lock()
	e.kept = &k
	e.mu.Unlock()
	if e.ReportDir == "" {
		return k, nil
	}
	data, err := json.MarshalIndent(k, "", "  ")
	if err != nil {
		return k, err
	}
	return k, os.WriteFile(e.keptPath(), append(data, '\n'), 0o644)
}

// recordKeptAtTeardown is the cleanup that records what a run cut short with -keep left (a
// failed setup, a signal, the deadline): only a provider whose clusters outlive the run leaves
// anything then.
func (e *Env) recordKeptAtTeardown() error {
	if _, ok := e.Provider.(cluster.Keeper); !ok {
		return nil
	}
	e.mu.Lock()
	done := e.kept != nil
	e.mu.Unlock()
	if done {
		return nil
	}
	k, err := e.recordKept()
	if err != nil || k.Dir == "" {
		return err
	}
	e.Statusf("-keep: the run left %s (kubeconfigs in %s, the list in %s); remove them and put the host back with:\n  %s", clusterCount(len(k.Clusters)), k.Dir, e.keptPath(), k.Remove)
	return nil
}

func (e *Env) keptPath() string { return filepath.Join(e.ReportDir, KeptFile) }

// kubectlLines is one kubectl command per kept cluster.
func kubectlLines(k Kept) string {
	var b strings.Builder
	for _, c := range k.Clusters {
		if c.Kubeconfig == "" {
			fmt.Fprintf(&b, "  %-12s (its create did not get as far as a kubeconfig)\n", c.Name)
			continue
		}
		fmt.Fprintf(&b, "  %-12s kubectl --kubeconfig=%s get namespaces\n", c.Name, c.Kubeconfig)
	}
	return strings.TrimRight(b.String(), "\n")
}

// clusterCount is "1 cluster" or "n clusters".
func clusterCount(n int) string {
	if n == 1 {
		return "1 cluster"
	}
	return fmt.Sprintf("%d clusters", n)
}
