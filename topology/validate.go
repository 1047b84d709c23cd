package topology

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Error is one problem with a topology: where it is and how to fix it.
type Error struct {
	Source  string // file path, or "generated"
	Field   string // e.g. "clusters[2].name" or "[1].primaryClusterName"; empty for the whole file
	Problem string
	Fix     string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("topology")
	if e.Source != "" {
		b.WriteString(" " + e.Source)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Problem)
	if e.Fix != "" {
		b.WriteString("; " + e.Fix)
	}
	return b.String()
}

// format is the file format a topology was read from; errors use that format's field names.
type format int

const (
	formatAmbient format = iota // ambientmc YAML/JSON, also used for generated and hand-built topologies
	formatIstio                 // Istio's prow topology JSON array
)

// Model field names, mapped to each format's spelling.
const (
	fieldName       = "name"
	fieldNetwork    = "network"
	fieldPrimary    = "primary"
	fieldConfig     = "config"
	fieldKubeconfig = "kubeconfig"
)

var istioFields = map[string]string{
	fieldName:       "clusterName",
	fieldNetwork:    "network",
	fieldPrimary:    "primaryClusterName",
	fieldConfig:     "configClusterName",
	fieldKubeconfig: "meta.kubeconfig",
}

// key spells a model field the way the file does.
func (f format) key(field string) string {
	if f == formatIstio {
		if k, ok := istioFields[field]; ok {
			return k
		}
	}
	return field
}

// elem is the path of the i-th cluster (0-based, as in the file).
func (f format) elem(i int) string {
	if f == formatIstio {
		return fmt.Sprintf("[%d]", i)
	}
	return fmt.Sprintf("clusters[%d]", i)
}

// path is the path of one field of the i-th cluster; field "" means the cluster itself.
func (f format) path(i int, field string) string {
	if field == "" {
		return f.elem(i)
	}
	return f.elem(i) + "." + f.key(field)
}

func (t *Topology) errorf(field, fix, problem string, args ...any) *Error {
	return &Error{Source: t.Source, Field: field, Problem: fmt.Sprintf(problem, args...), Fix: fix}
}

// Validate checks names, roles and references; it returns every problem at once (errors.Join).
func (t *Topology) Validate() error {
	f := t.format
	if len(t.Clusters) == 0 {
		if f == formatIstio {
			return t.errorf("", "add at least one cluster object to the array", "no clusters")
		}
		return t.errorf("clusters", "list at least one cluster under clusters:, e.g. \"clusters: [{name: cluster-1}]\"", "no clusters")
	}
	var errs []error
	first := map[string]int{} // name -> first index, to point duplicates at the original
	for i, c := range t.Clusters {
		errs = append(errs, t.validateCluster(i, c, first)...)
	}
	for i, c := range t.Clusters {
		errs = append(errs, t.validateRefs(i, c, first)...)
	}
	return errors.Join(errs...)
}

func (t *Topology) validateCluster(i int, c Cluster, first map[string]int) []error {
	f := t.format
	var errs []error
	if c.Index != i+1 {
		errs = append(errs, t.errorf(f.elem(i), "build topologies with Generate, Load or Parse, which number clusters from 1",
			"index %d, want %d (its 1-based position; the address plan depends on it)", c.Index, i+1))
	}
	switch {
	case c.Name == "":
		errs = append(errs, t.errorf(f.path(i, fieldName), fmt.Sprintf("set %s to a DNS-1123 label such as \"cluster-%d\"", f.key(fieldName), i+1),
			"missing cluster name"))
	case len(validation.IsDNS1123Label(c.Name)) > 0:
		errs = append(errs, t.errorf(f.path(i, fieldName), "use at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit (it becomes an Istio cluster ID and a Secret key)",
			"cluster name %q is not a DNS-1123 label", c.Name))
	default:
		if j, dup := first[c.Name]; dup {
			errs = append(errs, t.errorf(f.path(i, fieldName), "give every cluster a unique name",
				"duplicate cluster name %q (also %s)", c.Name, f.elem(j)))
		} else {
			first[c.Name] = i
		}
	}
	if n := c.network(); len(validation.IsValidLabelValue(n)) > 0 {
		errs = append(errs, t.errorf(f.path(i, fieldNetwork), "use at most 63 letters, digits, '-', '_' and '.' (it becomes the topology.istio.io/network label)",
			"network %q is not a valid label value", n))
	}
	if strings.IndexFunc(c.Kubeconfig, unicode.IsControl) >= 0 {
		errs = append(errs, t.errorf(f.path(i, fieldKubeconfig), "set it to the kubeconfig file's path, without control characters",
			"kubeconfig path %q holds a control character", c.Kubeconfig))
	}
	return errs
}

// validateRefs checks that primary and config name clusters that can play those roles.
func (t *Topology) validateRefs(i int, c Cluster, byName map[string]int) []error {
	f := t.format
	var errs []error
	if c.IsRemote() {
		j, ok := byName[c.Primary]
		switch {
		case !ok:
			errs = append(errs, t.errorf(f.path(i, fieldPrimary),
				fmt.Sprintf("name a primary defined in this file, or remove %s to make %q a primary", f.key(fieldPrimary), c.Name),
				"primary cluster %q not found", c.Primary))
		case t.Clusters[j].IsRemote():
			errs = append(errs, t.errorf(f.path(i, fieldPrimary),
				fmt.Sprintf("point %s at a primary (%q itself, or a cluster that is its own primary)", f.key(fieldPrimary), c.Name),
				"primary %q is itself a remote (its primary is %q)", c.Primary, t.Clusters[j].Primary))
		}
	}
	if cfg := c.config(); cfg != c.Name && cfg != c.primary() {
		if _, ok := byName[cfg]; !ok {
			errs = append(errs, t.errorf(f.path(i, fieldConfig),
				fmt.Sprintf("name a cluster defined in this file, or remove %s to use the primary's config", f.key(fieldConfig)),
				"config cluster %q not found", cfg))
		}
	}
	return errs
}

// Capabilities says what topologies a provider can build.
type Capabilities struct {
	Provider             string // the -provider value, e.g. "local"
	MaxClusters          int    // 0 means no limit
	MaxClustersReason    string // why, e.g. "its loopback address plan has room for 50"
	Remotes              bool   // clusters served by another cluster's istiod
	ExternalControlPlane bool   // primaries whose config lives in another cluster
	NeedsKubeconfigs     bool   // every cluster must carry a kubeconfig path (existing clusters)
}

// Check reports every part of the topology the provider cannot build. Where one of the
// alternatives (the other providers' capabilities) can build that part, the fix names it.
func (t *Topology) Check(c Capabilities, alternatives ...Capabilities) error {
	f := t.format
	var errs []error
	if c.MaxClusters > 0 && len(t.Clusters) > c.MaxClusters {
		why := ""
		if c.MaxClustersReason != "" {
			why = " (" + c.MaxClustersReason + ")"
		}
		field := "clusters"
		if f == formatIstio {
			field = ""
		}
		more := orUse(alternatives, ", or ", " for more", func(a Capabilities) bool { return a.MaxClusters == 0 || a.MaxClusters >= len(t.Clusters) })
		errs = append(errs, t.errorf(field, fmt.Sprintf("use at most %d clusters with -provider=%s%s", c.MaxClusters, c.Provider, more),
			"%d clusters, but the %s provider builds at most %d%s", len(t.Clusters), c.Provider, c.MaxClusters, why))
	}
	orRemotes := orUse(alternatives, " or use ", "", func(a Capabilities) bool { return a.Remotes })
	orExternal := orUse(alternatives, " or use ", "", func(a Capabilities) bool { return a.ExternalControlPlane })
	for i, cl := range t.Clusters {
		if cl.IsRemote() && !c.Remotes {
			errs = append(errs, t.errorf(f.path(i, fieldPrimary),
				fmt.Sprintf("the %s provider builds primary clusters only; drop %s%s", c.Provider, f.key(fieldPrimary), orRemotes),
				"cluster %q is a remote of %q", cl.Name, cl.Primary))
		}
		if cl.isExternalControlPlane() && !c.ExternalControlPlane {
			errs = append(errs, t.errorf(f.path(i, fieldConfig),
				fmt.Sprintf("the %s provider cannot build an external control plane; drop %s%s", c.Provider, f.key(fieldConfig), orExternal),
				"cluster %q is an external control plane (its config cluster is %q)", cl.Name, cl.Config))
		}
		if c.NeedsKubeconfigs && cl.Kubeconfig == "" {
			errs = append(errs, t.errorf(f.path(i, fieldKubeconfig),
				fmt.Sprintf("the %s provider uses existing clusters: set %s to the path of cluster %q's kubeconfig", c.Provider, f.key(fieldKubeconfig), cl.Name),
				"cluster %q has no kubeconfig", cl.Name))
		}
	}
	return errors.Join(errs...)
}

// orUse names the alternatives that can, as prefix+"-provider=a or -provider=b"+suffix ("" when
// none can).
func orUse(alternatives []Capabilities, prefix, suffix string, can func(Capabilities) bool) string {
	var names []string
	for _, a := range alternatives {
		if can(a) {
			names = append(names, "-provider="+a.Provider)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return prefix + strings.Join(names, " or ") + suffix
}
