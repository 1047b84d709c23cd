package measure

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// AmbientzPath is istiod's ambient index dump (pilot/pkg/xds/debug.go ambientz): every workload
// and service istiod would send over workload xDS, before any per-client filtering.
const AmbientzPath = "/debug/ambientz"

// AmbientWorkload is the part of one /debug/ambientz workload a failure message needs.
type AmbientWorkload struct {
	UID       string                     `json:"uid"`
	ClusterID string                     `json:"clusterId"`
	Network   string                     `json:"network"`
	Status    string                     `json:"status"`
	Services  map[string]json.RawMessage `json:"services"`
}

// Ambientz is istiod's ambient index as /debug/ambientz gives it: Raw is the whole answer (to
// keep beside a failure), Workloads its workloads.
type Ambientz struct {
	Raw       []byte
	Workloads []AmbientWorkload
}

// Ambientz reads /debug/ambientz.
func (i *Sampler) Ambientz(ctx context.Context) (*Ambientz, error) {
	body, err := i.getDebug(ctx, AmbientzPath, i.client())
	if err != nil {
		return nil, err
	}
	var dump struct {
		Workloads []AmbientWorkload `json:"workloads"`
	}
	if err := json.Unmarshal(body, &dump); err != nil {
		return nil, fmt.Errorf("istiod %s: GET %s: decoding: %w", i.Name, AmbientzPath, err)
	}
	return &Ambientz{Raw: body, Workloads: dump.Workloads}, nil
}

// Of says what istiod holds of the service key (namespace/hostname): each workload serving it
// with its cluster, network and status, and how many workloads each cluster has in all.
func (a *Ambientz) Of(key string) string {
	var serving []string
	perCluster := map[string]int{}
	for _, w := range a.Workloads {
		perCluster[w.ClusterID]++
		if _, ok := w.Services[key]; ok {
			status := w.Status
			if status == "" {
				status = "HEALTHY" // the enum's zero value, which JSON leaves out
			}
			serving = append(serving, fmt.Sprintf("%s in %s/%s %s", w.UID, w.ClusterID, w.Network, status))
		}
	}
	clusters := make([]string, 0, len(perCluster))
	for c, n := range perCluster {
		clusters = append(clusters, fmt.Sprintf("%s %d", c, n))
	}
	sort.Strings(clusters)
	sort.Strings(serving)
	if len(serving) == 0 {
		serving = []string{"no workload"}
	}
	return fmt.Sprintf("serving %s: %s (workloads per cluster: %s)", key, strings.Join(serving, ", "), strings.Join(clusters, ", "))
}
