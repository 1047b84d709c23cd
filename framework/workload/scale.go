// Package workload creates the scale workloads each cluster gets for the control-plane load test:
// fake Nodes, ambient namespaces, global Services with their ServiceAccounts, and Running pods
// whose status the framework writes itself (no kubelet or scheduler exists).
package workload

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ambientmc/ambientmc/topology"
)

// ReservedPodIPs is how many pod addresses at the start of each cluster's plan
// (slots 0..255 of a provider's plan, cluster.AddressPlan) are left to probe workloads; scale pods
// start after them.
const ReservedPodIPs = 256

// MaxScalePods is how many scale pods fit in one cluster's address plan.
const MaxScalePods = topology.MaxPods - ReservedPodIPs

// Scale is what one cluster gets: Services global services spread over Namespaces namespaces,
// Pods pods spread over the services, scheduled round-robin onto Nodes fake nodes.
type Scale struct {
	Name                              string
	Services, Pods, Namespaces, Nodes int
}

// String describes the scale for logs.
func (s Scale) String() string {
	return fmt.Sprintf("%s: %d services, %d pods, %d namespaces, %d nodes", s.Name, s.Services, s.Pods, s.Namespaces, s.Nodes)
}

// Profiles are the named scales behind -scale.
var Profiles = map[string]Scale{
	// Sized so 10 clusters plus 9 joins finish well under 10 minutes on 2 cores.
	"small":  {Name: "small", Services: 20, Pods: 100, Namespaces: 2, Nodes: 3},
	"medium": {Name: "medium", Services: 100, Pods: 1000, Namespaces: 5, Nodes: 8},
	// Istio's published multicluster load: 300 services and 4000 endpoints per cluster.
	"published": {Name: "published", Services: 300, Pods: 4000, Namespaces: 10, Nodes: 15},
}

// CustomName is Scale.Name when -services or -pods changed a profile's counts.
const CustomName = "custom"

// profileNames lists the profiles smallest first, for error messages.
func profileNames() string {
	names := make([]string, 0, len(Profiles))
	for n := range Profiles {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		if d := Profiles[a].Pods - Profiles[b].Pods; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return strings.Join(names, ", ")
}

// Resolve returns the profile named by -scale with -services and -pods overriding its counts
// when they are above 0. The namespace count is capped at the service count so no namespace is
// empty. Errors name the flag to fix.
func Resolve(profile string, services, pods int) (Scale, error) {
	s, ok := Profiles[profile]
	if !ok {
		return Scale{}, fmt.Errorf("-scale=%q: unknown profile; valid profiles: %s", profile, profileNames())
	}
	if services < 0 {
		return Scale{}, fmt.Errorf("-services=%d: must be positive; 0 takes the count from -scale=%s (%d)", services, profile, s.Services)
	}
	if pods < 0 {
		return Scale{}, fmt.Errorf("-pods=%d: must be positive; 0 takes the count from -scale=%s (%d)", pods, profile, s.Pods)
	}
	if services > 0 && services != s.Services {
		s.Services, s.Name = services, CustomName
	}
	if pods > 0 && pods != s.Pods {
		s.Pods, s.Name = pods, CustomName
	}
	if s.Pods < s.Services {
		// Blame the flag the user set; at least one was set since every profile is consistent.
		if pods > 0 {
			return Scale{}, fmt.Errorf("-pods=%d is less than the %d services: every service needs at least one pod, so -pods must be at least -services", s.Pods, s.Services)
		}
		return Scale{}, fmt.Errorf("-services=%d is more than the %d pods of -scale=%s: every service needs at least one pod; lower -services or raise -pods", s.Services, s.Pods, profile)
	}
	if s.Pods > MaxScalePods {
		return Scale{}, fmt.Errorf("-pods=%d: at most %d scale pods fit per cluster (%d pod addresses, %d reserved for probe workloads)", s.Pods, MaxScalePods, topology.MaxPods, ReservedPodIPs)
	}
	s.Namespaces = min(s.Namespaces, s.Services)
	return s, nil
}

// validate checks a hand-built scale before Deploy touches a cluster.
func (s Scale) validate() error {
	switch {
	case s.Services < 1 || s.Namespaces < 1 || s.Nodes < 1:
		return fmt.Errorf("scale %v: services, namespaces and nodes must each be at least 1", s)
	case s.Pods < s.Services:
		return fmt.Errorf("scale %v: fewer pods than services; every service needs at least one pod", s)
	case s.Pods > MaxScalePods:
		return fmt.Errorf("scale %v: at most %d scale pods fit per cluster", s, MaxScalePods)
	case s.Nodes > topology.MaxNodes:
		return fmt.Errorf("scale %v: at most %d nodes fit per cluster", s, topology.MaxNodes)
	}
	return nil
}

// Names and placement, shared by Deploy and anyone who needs to find a scale object.

// NodeName is the name of fake node k.
func NodeName(k int) string { return fmt.Sprintf("node-%d", k) }

// NamespaceName is the name of scale namespace k.
func NamespaceName(k int) string { return fmt.Sprintf("scale-%d", k) }

// ServiceName is the name of scale service n (also its ServiceAccount and its pods' app label).
func ServiceName(n int) string { return fmt.Sprintf("svc-%d", n) }

// ServiceNamespace is the namespace of service n: services go round-robin over the namespaces.
func (s Scale) ServiceNamespace(n int) string { return NamespaceName(n % s.Namespaces) }

// PodsOf is how many pods service n gets: an even share, the first services taking the remainder.
func (s Scale) PodsOf(n int) int {
	per := s.Pods / s.Services
	if n < s.Pods%s.Services {
		per++
	}
	return per
}
