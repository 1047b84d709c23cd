package measure

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// KrtzPath is istiod's krt debugger dump (pilot/pkg/xds/debug.go: every collection registered with
// the debugger, as a JSON array of {uid, name, state}). It is a full dump of istiod's state:
// reading it allocates a lot, so read it after memory samples, not before.
const KrtzPath = "/debug/krtz"

// KrtCollections returns the names of the krt collections istiod's debugger holds, one entry per
// collection (names repeat: each remote cluster registers its own informers).
func (i *Istiod) KrtCollections(ctx context.Context) ([]string, error) {
	if i.DebugURL == "" {
		return nil, fmt.Errorf("istiod %s: no debug URL", i.Name)
	}
	u := strings.TrimRight(i.DebugURL, "/") + KrtzPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := i.client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("istiod %s: GET %s: %w", i.Name, u, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("istiod %s: GET %s: HTTP %s: %s", i.Name, u, resp.Status, snippet(body))
	}
	var dump []struct {
		Name *string `json:"name"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&dump); err != nil {
		return nil, fmt.Errorf("istiod %s: GET %s: decoding the krt dump: %w", i.Name, u, err)
	}
	names := make([]string, 0, len(dump))
	for k, c := range dump {
		if c.Name == nil {
			return nil, fmt.Errorf("istiod %s: GET %s: entry %d has no name: not a krt dump", i.Name, u, k)
		}
		names = append(names, *c.Name)
	}
	return names, nil
}
