package kind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/dockerhost"
	"github.com/ambientmc/ambientmc/framework/kindconfig"
)

// -keep: kind's clusters are containers, so they outlive the test process, and so do their
// network and what their kubelets changed on the host. Keep moves what a user needs out of the
// run directory (which the run removes) into a kept directory, with a record of everything the
// run made and changed; RemoveKept, behind one printed command (scripts/kept), removes it all and
// puts the host back.

// keptStateFile, in a kept directory, is what the removal reads.
const keptStateFile = "state.json"

// keptState is a kept run as its removal needs it.
type keptState struct {
	// Clusters are the kind names whose create was called (their containers carry the label).
	Clusters []string `json:"clusters"`
	// Network is the run's docker network; "" if it was not created.
	Network string `json:"network,omitempty"`
	// Kernel is the host before the first node started; nil if none did.
	Kernel *dockerhost.KeptKernel `json:"kernel,omitempty"`
	KeptAt time.Time              `json:"keptAt"`
}

// KeptRoot is where kept runs' directories are: <cache>/kept, one directory per run network.
func KeptRoot() (string, error) {
	dir, err := bins.CacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "kept"), nil
}

// RemoveCommand is the one command that removes the kept run in dir.
func RemoveCommand(dir string) string {
	if src, err := bins.SourceRoot(); err == nil {
		return fmt.Sprintf("go -C %s run ./scripts/kept -remove %s", src, dir)
	}
	return "go run ./scripts/kept -remove " + dir + " (in the ambientmc checkout)"
}

// Keep is keep for the framework (cluster.Keeper), which then says what was kept itself: Destroy
// prints nothing more.
func (p *Provider) Keep() (cluster.Kept, error) {
	kept, err := p.keep()
	p.mu.Lock()
	p.keptPrinted = true
	p.mu.Unlock()
	return kept, err
}

// keep writes the kept directory once: each created cluster's kubeconfig (0600) and the record of
// what the run made and changed.
func (p *Provider) keep() (cluster.Kept, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.kept != nil {
		return *p.kept, nil
	}
	if len(p.created) == 0 && !p.netCreated {
		return cluster.Kept{}, nil // nothing was made
	}
	root, err := KeptRoot()
	if err != nil {
		return cluster.Kept{}, err
	}
	dir := filepath.Join(root, p.netName)
	st := keptState{Clusters: slices.Clone(p.created), Kernel: p.kernel.Kept(), KeptAt: time.Now().UTC()}
	if p.netCreated {
		st.Network = p.netName
	}
	kept, err := p.writeKept(dir, st)
	if err != nil {
		return cluster.Kept{}, fmt.Errorf("-keep: writing %s: %w", dir, err)
	}
	p.kept = &kept
	return kept, nil
}

// writeKept copies the kubeconfigs the creates wrote and writes st into dir.
func (p *Provider) writeKept(dir string, st keptState) (cluster.Kept, error) {
	kept := cluster.Kept{Dir: dir, Remove: RemoveCommand(dir)}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return kept, err
	}
	for _, n := range st.Clusters {
		name := strings.TrimPrefix(n, kindconfig.NamePrefix)
		kc := cluster.KeptCluster{Name: name}
		if data, err := os.ReadFile(p.KubeconfigPath(name)); err == nil {
			kc.Kubeconfig = filepath.Join(dir, name, "kubeconfig")
			if err := os.MkdirAll(filepath.Dir(kc.Kubeconfig), 0o700); err != nil {
				return kept, err
			}
			if err := writePrivate(kc.Kubeconfig, data); err != nil {
				return kept, err
			}
		}
		kept.Clusters = append(kept.Clusters, kc)
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return kept, err
	}
	return kept, writePrivate(filepath.Join(dir, keptStateFile), append(data, '\n'))
}

// printKept says what -keep left and the one command that removes it, once.
func (p *Provider) printKept() {
	kept, err := p.keep()
	if err != nil {
		fmt.Fprintf(p.opts.Log, "ambientmc: kind: %v; the clusters are left running: remove their containers with `docker rm -f` by the label io.x-k8s.kind.cluster and the network %s\n", err, p.netName)
		return
	}
	p.mu.Lock()
	printed := p.keptPrinted
	p.keptPrinted = true
	p.mu.Unlock()
	if kept.Dir == "" || printed {
		return
	}
	fmt.Fprintf(p.opts.Log, "ambientmc: kind: -keep: left %d clusters and the docker network %s running (kubeconfigs in %s); remove them and put the host's kernel settings back with:\n  %s\n",
		len(kept.Clusters), p.netName, kept.Dir, kept.Remove)
}

// RemoveKept removes the kept run in dir: its clusters' containers (by kind's cluster label), its
// network, puts the host's kernel settings and /lib/modules back as they were before the run, and
// removes dir. Something already gone is fine; a failure keeps dir for another try.
func RemoveKept(ctx context.Context, dir string, log io.Writer) error {
	return removeKept(ctx, dir, Options{Log: log}, "/")
}

// removeKept is RemoveKept with o's Kind and Docker, and the host's files under root.
func removeKept(ctx context.Context, dir string, o Options, root string) error {
	data, err := os.ReadFile(filepath.Join(dir, keptStateFile))
	if err != nil {
		return fmt.Errorf("%s is not a kept run's directory (the -keep message and kept.json name it): %w", dir, err)
	}
	var st keptState
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, keptStateFile), err)
	}
	o.RunDir = dir // the kept kubeconfigs sit where Destroy looks for them
	p := New(o)
	p.created = slices.Clone(st.Clusters) // Destroy forgets each as it goes
	p.kernel = st.Kernel.State(root)
	if st.Network != "" {
		p.netName = st.Network
		_, err := p.docker.Network(ctx, st.Network)
		switch {
		case errors.Is(err, dockerhost.ErrNoNetwork):
		case err != nil:
			return fmt.Errorf("docker network inspect %s: %w", st.Network, err)
		default:
			p.netCreated = true
		}
	}
	if err := p.Destroy(ctx); err != nil {
		return fmt.Errorf("%w; %s is kept: run the removal again once that is fixed", err, dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	fmt.Fprintf(p.opts.Log, "ambientmc: kind: removed the kept run %s: clusters %s, network %s\n", dir, strings.Join(st.Clusters, ", "), orNone(st.Network))
	return nil
}

// keptBy returns the kept run directory whose record names kind cluster name, or "".
func keptBy(name string) string {
	root, err := KeptRoot()
	if err != nil {
		return ""
	}
	states, _ := filepath.Glob(filepath.Join(root, "*", keptStateFile))
	for _, path := range states {
		var st keptState
		if data, err := os.ReadFile(path); err == nil && json.Unmarshal(data, &st) == nil && slices.Contains(st.Clusters, name) {
			return filepath.Dir(path)
		}
	}
	return ""
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
