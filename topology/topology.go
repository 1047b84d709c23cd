package topology

import (
	"fmt"
	"slices"
)

// Cluster is one cluster of a topology.
type Cluster struct {
	// Name is the cluster ID; a DNS-1123 label because it becomes an Istio cluster ID and a Secret data key.
	Name string
	// Network is the network name; "network-<Index>" when a file leaves it empty.
	Network string
	// Primary names the primary whose istiod serves this cluster; equals Name for a primary.
	Primary string
	// Config names the config cluster (Istio's configClusterName); equals Primary when empty.
	Config string
	// Index is the 1-based position in the topology; it drives the address plan.
	Index int
	// Kubeconfig is the path to the cluster's kubeconfig; only the kube provider reads it.
	Kubeconfig string
}

// IsPrimary reports whether the cluster runs its own istiod.
func (c Cluster) IsPrimary() bool { return c.Primary == "" || c.Primary == c.Name }

// IsRemote reports whether another cluster's istiod serves this cluster.
func (c Cluster) IsRemote() bool { return !c.IsPrimary() }

// isExternalControlPlane mirrors Istio: a primary whose config lives in another cluster.
func (c Cluster) isExternalControlPlane() bool {
	return c.IsPrimary() && c.Config != "" && c.Config != c.Name
}

// primary and config return the effective values, so hand-built clusters need no defaults.
func (c Cluster) primary() string {
	if c.Primary == "" {
		return c.Name
	}
	return c.Primary
}

func (c Cluster) config() string {
	if c.Config == "" {
		return c.primary()
	}
	return c.Config
}

func (c Cluster) network() string {
	if c.Network == "" {
		return defaultNetwork(c.Index)
	}
	return c.Network
}

func defaultNetwork(index int) string { return fmt.Sprintf("network-%d", index) }

// Topology is an ordered list of clusters and where it came from.
type Topology struct {
	Source   string // file path, or "generated"
	Clusters []Cluster

	format format // decides how errors spell field paths
}

// SourceGenerated is the Source of a topology made by Generate.
const SourceGenerated = "generated"

// Generate returns n primaries cluster-1..cluster-n on networks network-1..network-n
// (multi-primary, multi-network).
func Generate(n int) (*Topology, error) { return GenerateNetworks(n, n) }

// GenerateNetworks returns n primaries cluster-1..cluster-n spread round robin over k networks
// network-1..network-k: cluster i is on network ((i-1) mod k) + 1, so with k < n some clusters
// share a network (k = 1: single network; k = n: one network each).
func GenerateNetworks(n, k int) (*Topology, error) {
	// How many clusters a provider can build is its own capability (topology.Check), not the
	// generator's.
	if n < 1 {
		return nil, &Error{
			Source:  SourceGenerated,
			Field:   "-clusters",
			Problem: fmt.Sprintf("%d clusters asked for, want at least 1", n),
			Fix:     "pass -clusters=N with N of 1 or more",
		}
	}
	if k < 1 || k > n {
		return nil, &Error{
			Source:  SourceGenerated,
			Field:   "-networks",
			Problem: fmt.Sprintf("%d networks for %d clusters", k, n),
			Fix:     fmt.Sprintf("pass -networks=K with K from 1 (one network) to %d (one per cluster, the default)", n),
		}
	}
	t := &Topology{Source: SourceGenerated}
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("cluster-%d", i)
		t.Clusters = append(t.Clusters, Cluster{
			Name: name, Network: defaultNetwork((i-1)%k + 1), Primary: name, Config: name, Index: i,
		})
	}
	return t, nil
}

// Relation is how two clusters of a topology reach each other's workloads.
type Relation string

const (
	// SameCluster: the same cluster.
	SameCluster Relation = "same-cluster"
	// SameNetwork: another cluster on the same network; its pods are reached directly (single
	// HBONE to the pod's node), and istiod sends them as workloads with their own addresses.
	SameNetwork Relation = "same-network"
	// OtherNetwork: another network; its pods are reached through its east-west gateway (double
	// HBONE), and istiod sends one split-horizon workload per service instead.
	OtherNetwork Relation = "other-network"
)

// RelationOf says how a reaches b.
func RelationOf(a, b Cluster) Relation {
	switch {
	case a.Name == b.Name:
		return SameCluster
	case a.network() == b.network():
		return SameNetwork
	}
	return OtherNetwork
}

// normalize fills the defaults a file may leave out.
func (t *Topology) normalize() {
	for i := range t.Clusters {
		c := &t.Clusters[i]
		c.Index = i + 1
		c.Network = c.network()
		c.Primary = c.primary()
		c.Config = c.config()
	}
}

// Get returns the cluster with the given name.
func (t *Topology) Get(name string) (Cluster, bool) {
	for _, c := range t.Clusters {
		if c.Name == name {
			return c, true
		}
	}
	return Cluster{}, false
}

// Primaries returns the clusters that run their own istiod, in topology order.
func (t *Topology) Primaries() []Cluster {
	var out []Cluster
	for _, c := range t.Clusters {
		if c.IsPrimary() {
			out = append(out, c)
		}
	}
	return out
}

// Networks returns the distinct network names in order of first appearance.
func (t *Topology) Networks() []string {
	var out []string
	for _, c := range t.Clusters {
		if n := c.network(); !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// HasKubeconfigs reports whether every cluster carries a kubeconfig path (what the kube provider needs).
func (t *Topology) HasKubeconfigs() bool {
	if len(t.Clusters) == 0 {
		return false
	}
	for _, c := range t.Clusters {
		if c.Kubeconfig == "" {
			return false
		}
	}
	return true
}
