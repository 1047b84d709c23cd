package churn

import (
	"fmt"
	"strconv"
	"strings"

	"istio.io/istio/pkg/workloadapi"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/workload"
)

// States a key can be in at the watcher, besides Absent.
const (
	Healthy   = "healthy"
	Unhealthy = "unhealthy"
	// other is any resource the runs do not change (services, gateways).
	other = "other"
)

// splitHorizonMarker is in the UID of every split-horizon workload
// (pilot/pkg/serviceregistry/ambient/multicluster.go generateSplitHorizonWorkloadUID).
const splitHorizonMarker = "/SplitHorizonWorkload/"

// Capacity is the state of a remote network's split-horizon workload of a service with n
// endpoints. With none, istiod sends no such workload: Absent.
func Capacity(n int) string {
	if n <= 0 {
		return Absent
	}
	return "capacity=" + strconv.Itoa(n)
}

// StateOf is what a watcher resource (nil: removed) means for the tracker: a pod workload is
// healthy or unhealthy, a split-horizon workload is its capacity.
func StateOf(name string, a *workloadapi.Address) string {
	if a == nil {
		return Absent
	}
	wl := a.GetWorkload()
	switch {
	case wl == nil:
		return other
	case strings.Contains(name, splitHorizonMarker):
		// istiod counts a workload without capacity as 1 (multicluster.go:342-348); a
		// split-horizon workload always carries the sum.
		return Capacity(int(wl.GetCapacity().GetValue()))
	case wl.GetStatus() == workloadapi.WorkloadStatus_HEALTHY:
		return Healthy
	default:
		return Unhealthy
	}
}

// States maps a watcher snapshot to tracker states.
func States(addrs map[string]*workloadapi.Address) map[string]string {
	out := make(map[string]string, len(addrs))
	for name, a := range addrs {
		out[name] = StateOf(name, a)
	}
	return out
}

// PodUID is the workload UID istiod gives a pod (pilot/pkg/serviceregistry/ambient/helpers.go
// generatePodUID): the watcher's resource name for it.
func PodUID(cluster, namespace, name string) string {
	return cluster + "//Pod/" + namespace + "/" + name
}

// SplitHorizonKey finds the split-horizon workload of service (ns/hostname) for network in a
// watcher snapshot.
func SplitHorizonKey(addrs map[string]*workloadapi.Address, network, service string) (string, bool) {
	for name, a := range addrs {
		wl := a.GetWorkload()
		if wl == nil || wl.GetNetwork() != network || !strings.Contains(name, splitHorizonMarker) {
			continue
		}
		if _, ok := wl.GetServices()[service]; ok {
			return name, true
		}
	}
	return "", false
}

// SplitHorizonKeys finds, for every scale service, the key of c's split-horizon workload in addrs
// (what a ztunnel-like client holds).
func SplitHorizonKeys(addrs map[string]*workloadapi.Address, c *cluster.Cluster, scale workload.Scale) (map[int]string, error) {
	keys := map[int]string{}
	for n := range scale.Services {
		ns := scale.ServiceNamespace(n)
		svc := ns + "/" + workload.ServiceName(n) + "." + ns + ".svc.cluster.local"
		k, ok := SplitHorizonKey(addrs, c.Network, svc)
		if !ok {
			return nil, fmt.Errorf("the watcher holds no split-horizon workload of %s for %s", svc, c.Network)
		}
		keys[n] = k
	}
	return keys, nil
}
