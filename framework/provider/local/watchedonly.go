package local

import (
	"slices"
	"strings"

	"github.com/ambientmc/ambientmc/framework/etcdstate"
	"github.com/ambientmc/ambientmc/framework/mesh/crds"
)

// A watched-only cluster is one where no istiod runs in a run that starts only the observed one
// (provider.Env.IstiodClusters): the istiod reads its namespaces, pods, services, EndpointSlices,
// nodes, Gateways and WorkloadEntries, and the controller-manager keeps the EndpointSlices, service accounts,
// namespaces and nodes as in any cluster. What nothing there reads is left out, because every
// built-in resource an API server serves costs it a watch cache, an etcd connection and two dozen
// goroutines, idle or not (docs/measurements.md#clusters-an-istiod-only-watches-issue-36-item-2).

// watchedOnlyGroups are the API groups a watched-only cluster does not serve, beyond disabledGroups:
// autoscalers, disruption budgets and admission configuration are written by istiod's gateway
// deployment controller and webhooks only where it runs.
var watchedOnlyGroups = []string{"autoscaling/v1", "autoscaling/v2", "policy/v1", "admissionregistration.k8s.io/v1"}

// watchedOnlyResources are single resources of served groups it does not serve either (the core
// group's key begins with "/": its group is empty). DaemonSets are still served: node lifecycle
// needed their informer when it ran here, and leaving them out since has not been measured.
var watchedOnlyResources = []string{
	"apps/v1/deployments", "apps/v1/replicasets", "apps/v1/statefulsets", "apps/v1/controllerrevisions",
	"/v1/podtemplates", "/v1/replicationcontrollers", "/v1/limitranges", "/v1/resourcequotas",
	"/v1/persistentvolumes", "/v1/persistentvolumeclaims",
	"networking.k8s.io/v1/ingresses", "networking.k8s.io/v1/ingressclasses", "networking.k8s.io/v1/networkpolicies",
}

// watchedOnlyAdmission are the admission plugins that read admissionregistration or ingress
// classes (they never sync without them).
var watchedOnlyAdmission = []string{
	"ValidatingAdmissionWebhook", "MutatingAdmissionWebhook", "ValidatingAdmissionPolicy", "MutatingAdmissionPolicy", "DefaultIngressClass",
}

// watchedOnlyControllersOff are the controllers that act on what a watched-only cluster does not
// serve, and node lifecycle with its taint eviction: there a fake node's status is only what the
// framework wrote (nothing renews its lease, nothing reads one), and node lifecycle's passes wake
// ten times a second for nothing.
var watchedOnlyControllersOff = []string{
	"deployment-controller", "replicaset-controller", "replicationcontroller-controller", "daemonset-controller",
	"statefulset-controller", "disruption-controller", "validatingadmissionpolicy-status-controller",
	"node-lifecycle-controller", "taint-eviction-controller",
}

// watchedOnlyIdle are API server flags that take a watched-only cluster's idle loops away: the
// watch cache (each served resource's cache ticks every second for its bookmarks; without it an
// istiod's lists and watches are served from etcd), the per-resource object count poll, and the
// API server's identity lease, renewed every 10 s for peers a single API server does not have.
var watchedOnlyIdle = []string{
	"--watch-cache=false",
	"--etcd-count-metric-poll-period=0",
	"--feature-gates=APIServerIdentity=false,UnknownVersionInteroperabilityProxy=false",
}

// apiServerScope returns the API server's --runtime-config and --disable-admission-plugins flags,
// and in a watched-only cluster watchedOnlyIdle.
func apiServerScope(watchedOnly bool) []string {
	off, admission := make([]string, 0, len(disabledGroups)+len(watchedOnlyGroups)+len(watchedOnlyResources)), disabledAdmission
	for _, g := range disabledGroups {
		off = append(off, g+"/v1=false") // v1 is each one's only version served by default
	}
	if watchedOnly {
		for _, r := range slices.Concat(watchedOnlyGroups, watchedOnlyResources) {
			off = append(off, r+"=false")
		}
		admission = slices.Concat(disabledAdmission, watchedOnlyAdmission)
	}
	flags := []string{"--runtime-config=" + strings.Join(off, ","), "--disable-admission-plugins=" + strings.Join(admission, ",")}
	if watchedOnly {
		flags = append(flags, watchedOnlyIdle...)
	}
	return flags
}

// withProcs returns env with, in a watched-only cluster, GOMAXPROCS=1: its processes are idle
// but for the istiod's reads, and an idle Go process with one P wakes fewer threads for its
// timers (docs/measurements.md#clusters-an-istiod-only-watches-issue-36-item-2).
func withProcs(env []string, watchedOnly bool) []string {
	if !watchedOnly {
		return env
	}
	return append(slices.Clone(env), "GOMAXPROCS=1")
}

// controllersFor returns the controller-manager's controllers.
func controllersFor(watchedOnly bool) []string {
	if !watchedOnly {
		return controllers
	}
	return slices.DeleteFunc(slices.Clone(controllers), func(c string) bool { return slices.Contains(watchedOnlyControllersOff, c) })
}

// needsLeaseRenewal says whether fake nodes' leases must be renewed under a controller-manager
// running these controllers: only node lifecycle reads them.
func needsLeaseRenewal(controllers []string) bool {
	return slices.Contains(controllers, "node-lifecycle-controller")
}

// watchedOnlyCuts lists what watched-only clusters leave out (Facts.WatchedOnlyCuts); the
// framework lists their CRDs.
func (p *Provider) watchedOnlyCuts() []string {
	return []string{
		"API groups off: " + strings.Join(watchedOnlyGroups, ", "),
		"resources off: " + strings.Join(watchedOnlyResources, ", "),
		"admission plugins off: " + strings.Join(watchedOnlyAdmission, ", "),
		"controllers off: " + strings.Join(watchedOnlyControllersOff, ", "),
		"API server flags: " + strings.Join(watchedOnlyIdle, " "),
		"fake nodes' leases not renewed (no node lifecycle reads them)",
		"GOMAXPROCS=1 for the API server and controller-manager",
	}
}

// seedFor returns the entries of s a cluster stores before its API server starts: in a
// watched-only cluster only the CRDs it serves; the framework creates the others unserved
// (crds.Set.WhereNoIstiod), small without their schemas.
func seedFor(s *etcdstate.CRDSeed, watchedOnly bool) *etcdstate.CRDSeed {
	if s == nil || !watchedOnly {
		return s
	}
	return s.Only(crds.ServedWhereNoIstiod())
}

// watchedOnly says whether cluster name is built watched-only.
func (p *Provider) watchedOnly(name string) bool {
	return p.opts.IstiodClusters != nil && !slices.Contains(p.opts.IstiodClusters, name)
}
