// Package hostistiod runs istiod as a pilot-discovery process on this host, outside Kubernetes,
// for one cluster reached through its kubeconfig: the local provider's istiods, and the second
// istiods the property checks start beside a real cluster's in-cluster one.
package hostistiod

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/proc"
)

// meshConfig is the ambient profile's mesh config: services labelled istio.io/global=true are
// GLOBAL, without which no service crosses networks.
const meshConfig = `trustDomain: cluster.local
defaultConfig:
  proxyMetadata:
    ISTIO_META_ENABLE_HBONE: "true"
serviceScopeConfigs:
- servicesSelector:
    matchExpressions:
    - key: istio.io/global
      operator: In
      values: ["true"]
  scope: GLOBAL
`

// Process is one running pilot-discovery serving one primary cluster.
type Process struct {
	cluster string
	Dir     string
	Ports   IstiodPorts
	name    string // for errors: cluster/istiod-name

	mu     sync.Mutex
	proc   *proc.Process      // replaced by a restart in place
	cgroup *proc.MemoryCgroup // istiod's own memory cgroup; nil where none could be made
	// launch starts the process again on the same ports (Restart).
	launch   func(ctx context.Context, ports IstiodPorts) (*Process, error)
	restarts int
}

// IstiodPorts are istiod's listeners, all on 127.0.0.1.
type IstiodPorts struct {
	HTTP, Webhook, XDS, SecureXDS, Monitoring, Ctrlz int
}

var (
	_ cluster.Istiod          = (*Process)(nil)
	_ cluster.IstiodRestarter = (*Process)(nil)
)

func (i *Process) Cluster() string       { return i.cluster }
func (i *Process) LogFile() string       { return i.Proc().LogFile() }
func (i *Process) Tail(n int) string     { return i.Proc().Tail(n) }
func (i *Process) Done() <-chan struct{} { return i.Proc().Done() }
func (i *Process) ExitErr() error        { return i.Proc().ExitErr() }
func (i *Process) Kill() error           { return syscall.Kill(i.Proc().Pid(), syscall.SIGKILL) }
func (i *Process) Stop() error {
	err := i.Proc().Stop(10 * time.Second)
	i.removeCgroup()
	return err
}
func (i *Process) XDSAddress() string { return addr(i.Ports.SecureXDS) }

// removeCgroup deletes istiod's memory cgroup once its process has exited.
func (i *Process) removeCgroup() {
	i.mu.Lock()
	cg := i.cgroup
	i.cgroup = nil
	i.mu.Unlock()
	if cg != nil {
		_ = cg.Remove()
	}
}

// Proc is the running pilot-discovery process.
func (i *Process) Proc() *proc.Process {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.proc
}

// Endpoints are istiod's loopback ports and its process, whose scheduler counters are finer than
// process_cpu_seconds_total's 10 ms ticks.
func (i *Process) Endpoints() cluster.IstiodEndpoints {
	return cluster.IstiodEndpoints{
		Name:       i.name,
		MetricsURL: "http://" + addr(i.Ports.Monitoring) + "/metrics",
		CtrlzURL:   "http://" + addr(i.Ports.Ctrlz),
		DebugURL:   "http://" + addr(i.Ports.HTTP),
		PID:        func() int { return i.Proc().Pid() },
		MemoryCgroup: func() string {
			i.mu.Lock()
			defer i.mu.Unlock()
			if i.cgroup == nil {
				return ""
			}
			return i.cgroup.Dir
		},
	}
}

// cgroups numbers the memory cgroups this process makes for istiods.
var cgroups atomic.Int64

// addr is a loopback port's address.
func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// istiodReadyTimeout bounds a cold istiod start (it lists every object of its cluster first).
const istiodReadyTimeout = 3 * time.Minute

// Start runs pilot-discovery for cluster c as a plain process, configured as the ambient
// multi-network profile would configure it, and waits until /ready answers.
func Start(ctx context.Context, c *cluster.Cluster, o cluster.IstiodOptions) (*Process, error) {
	if o.Binary == "" {
		return nil, fmt.Errorf("istiod %s: no pilot-discovery binary given (the environment resolves -istiod.version / -istiod.binary)", c.Name)
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, err
	}
	caDir := filepath.Join(o.Dir, "cacerts")
	ca, err := mesh.IntermediateOf(c.Name, o.CA)
	if err != nil {
		return nil, fmt.Errorf("istiod %s: %w", c.Name, err)
	}
	if err := ca.WriteCACerts(caDir); err != nil {
		return nil, fmt.Errorf("istiod %s: writing cacerts: %w", c.Name, err)
	}
	meshFile := filepath.Join(o.Dir, "mesh.yaml")
	if err := os.WriteFile(meshFile, []byte(meshConfig), 0o644); err != nil {
		return nil, err
	}
	launch := func(ctx context.Context, ports IstiodPorts) (*Process, error) {
		return launchIstiod(ctx, c, o, caDir, meshFile, ports)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		free, err := proc.FreePorts(6)
		if err != nil {
			return nil, err
		}
		i, err := launch(ctx, IstiodPorts{HTTP: free[0], Webhook: free[1], XDS: free[2], SecureXDS: free[3], Monitoring: free[4], Ctrlz: free[5]})
		if err == nil {
			i.launch = launch
			return i, nil
		}
		lastErr = err
		// Another process may have taken one of the picked ports before istiod bound it.
		if i == nil || !i.Proc().LogContains("address already in use") {
			break
		}
	}
	return nil, lastErr
}

// Restart stops istiod and starts a fresh one with the same options on the same ports. The old
// process's log is kept beside the new one as istiod.log.<n>. The new process has held nothing yet.
func (i *Process) Restart(ctx context.Context) error {
	select {
	case <-i.Done(): // already gone (killed): nothing to stop
	default:
		if err := i.Stop(); err != nil {
			return fmt.Errorf("istiod %s: restart: stopping: %w", i.cluster, err)
		}
	}
	i.restarts++
	if err := os.Rename(i.LogFile(), fmt.Sprintf("%s.%d", i.LogFile(), i.restarts)); err != nil {
		return fmt.Errorf("istiod %s: restart: keeping the old log: %w", i.cluster, err)
	}
	fresh, err := i.launch(ctx, i.Ports)
	if err != nil {
		return fmt.Errorf("istiod %s: restart on the same ports: %w", i.cluster, err)
	}
	// The same ports: samplers (and what hooks into them) stay; the CPU is the new process's.
	i.removeCgroup()
	i.mu.Lock()
	i.proc, i.cgroup = fresh.proc, fresh.cgroup
	i.mu.Unlock()
	return nil
}

func launchIstiod(ctx context.Context, c *cluster.Cluster, o cluster.IstiodOptions, caDir, meshFile string, ports IstiodPorts) (*Process, error) {
	name := "istiod"
	if o.Name != "" {
		name = "istiod-" + o.Name
	}
	i := &Process{cluster: c.Name, Dir: o.Dir, Ports: ports, name: c.Name + "/" + name}
	env := append([]string{
		"POD_NAMESPACE=" + mesh.SystemNamespace,
		"POD_NAME=" + name + "-" + c.Name,
		"REVISION=default",
		"CLUSTER_ID=" + c.Name,
		"PILOT_ENABLE_AMBIENT=true",
		"AMBIENT_ENABLE_MULTI_NETWORK=true",
		"ROOT_CA_DIR=" + caDir,
		// Clients outside Kubernetes reach istiod as localhost; add it to the serving certificate.
		"ISTIOD_CUSTOM_HOST=localhost",
		// No webhooks: nothing would call them, and istiod must not patch webhook configurations.
		"INJECT_ENABLED=false",
		"INJECTION_WEBHOOK_CONFIG_NAME=",
		"VALIDATION_WEBHOOK_CONFIG_NAME=",
	}, o.Env...)
	args := []string{
		"discovery",
		"--kubeconfig=" + c.Kubeconfig,
		"--clusterID=" + c.Name,
		"--meshConfig=" + meshFile,
		"--domain=cluster.local",
		"--httpAddr=" + addr(i.Ports.HTTP),
		"--httpsAddr=" + addr(i.Ports.Webhook),
		"--grpcAddr=" + addr(i.Ports.XDS),
		"--secureGRPCAddr=" + addr(i.Ports.SecureXDS),
		"--monitoringAddr=" + addr(i.Ports.Monitoring),
		"--ctrlz_address=127.0.0.1",
		"--ctrlz_port=" + strconv.Itoa(i.Ports.Ctrlz),
	}
	// In a memory cgroup of its own from its first page, so its working set reads as kubelet reads
	// a container's; without one (not root, no memory controller to make cgroups under) none is read.
	path := o.Binary
	if cg, err := proc.NewMemoryCgroup(fmt.Sprintf("ambientmc-istiod-%d-%d", os.Getpid(), cgroups.Add(1))); err == nil {
		i.cgroup = cg
		path, args = cg.Command(path, args)
	}
	p, err := proc.Start(proc.Spec{Name: c.Name + "/" + name, Path: path, Dir: o.Dir, Env: env, Args: args, LogFile: filepath.Join(o.Dir, "istiod.log")})
	if err != nil {
		i.removeCgroup()
		return nil, fmt.Errorf("starting istiod for %s: %w", c.Name, err)
	}
	i.proc = p
	readyCtx, cancel := context.WithTimeout(ctx, istiodReadyTimeout)
	defer cancel()
	err = p.WaitReady(readyCtx, 200*time.Millisecond, proc.HTTPProbe("http://"+addr(i.Ports.HTTP)+"/ready", ""))
	if err != nil {
		_ = p.Stop(5 * time.Second)
		i.removeCgroup()
		return i, fmt.Errorf("istiod for %s: %w", c.Name, err)
	}
	return i, nil
}
