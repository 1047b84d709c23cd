package measure

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// ClusterzPath lists the clusters istiod reads, with each one's sync status as its secret
// controller sees it (pilot/pkg/xds/debug.go clusterz, pkg/kube/multicluster ListRemoteClusters).
const ClusterzPath = "/debug/clusterz"

// ClusterInfo is one entry of /debug/clusterz.
type ClusterInfo struct {
	ID         string `json:"id"`
	SecretName string `json:"secretName"`
	SyncStatus string `json:"syncStatus"`
}

// SyncStatusOf is what a /debug/clusterz listing says of cluster id's sync; listed is false when
// the cluster is not in it.
func SyncStatusOf(cs []ClusterInfo, id string) (status string, listed bool) {
	for _, c := range cs {
		if c.ID == id {
			status, listed = c.SyncStatus, true
		}
	}
	return status, listed
}

// Clusterz reads /debug/clusterz: the config cluster first, then every cluster of a remote secret.
func (i *Sampler) Clusterz(ctx context.Context) ([]ClusterInfo, error) {
	var out []ClusterInfo
	if err := i.getDebugJSON(ctx, ClusterzPath, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// getDebugJSON GETs one of istiod's /debug endpoints on its HTTP port and decodes the JSON answer.
func (i *Sampler) getDebugJSON(ctx context.Context, path string, into any) error {
	body, err := i.getDebug(ctx, path, i.client())
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("istiod %s: GET %s: decoding: %w", i.Name, path, err)
	}
	return nil
}

// getDebug GETs path (with its query) from istiod's HTTP debug port with client and returns the
// whole body of a 200 answer.
func (i *Sampler) getDebug(ctx context.Context, path string, client *http.Client) ([]byte, error) {
	if i.DebugURL == "" {
		return nil, fmt.Errorf("istiod %s: no debug URL (the provider does not reach its debug port)", i.Name)
	}
	u := strings.TrimRight(i.DebugURL, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("istiod %s: GET %s: %w", i.Name, u, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("istiod %s: GET %s: %w", i.Name, u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("istiod %s: GET %s: HTTP %s: %s", i.Name, u, resp.Status, snippet(body))
	}
	return body, nil
}

// WaitClusterzSynced polls /debug/clusterz until it lists cluster as synced: the status of the
// cluster istiod serves now. After an in-place secret rotation the metric can say otherwise (the
// replaced cluster's "closed" lands on the shared cluster ID), so waits on a rotation read this.
// Without a debug URL it falls back to the metric.
func (i *Sampler) WaitClusterzSynced(ctx context.Context, cluster string, poll time.Duration) error {
	if i.DebugURL == "" {
		_, err := i.WaitRemoteSynced(ctx, cluster, poll)
		return err
	}
	last := "never read"
	for {
		cs, err := i.Clusterz(ctx)
		if err == nil {
			last = "not listed"
			if st, ok := SyncStatusOf(cs, cluster); ok {
				last = st
			}
			if last == StatusSynced {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("istiod %s: %s not synced in %s (%s): %w", i.Name, cluster, ClusterzPath, last, context.Cause(ctx))
		case <-time.After(poll):
		}
	}
}
