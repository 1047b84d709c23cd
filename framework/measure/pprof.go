package measure

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// PprofPath is where istiod serves Go's profiles: the HTTP debug port (--httpAddr), which answers
// loopback callers without authentication (pilot/pkg/xds/debug.go, on while --profile is, the
// default).
const PprofPath = "/debug/pprof/"

// Profile fetches one of istiod's pprof profiles (heap, goroutine, or profile: CPU for seconds)
// as the gzipped protobuf pprof writes. A CPU profile takes its seconds to answer.
func (i *Istiod) Profile(ctx context.Context, name string, seconds int) ([]byte, error) {
	if i.DebugURL == "" {
		return nil, fmt.Errorf("istiod %s: the provider does not reach its debug port, so it has no profiles", i.Name)
	}
	u := strings.TrimRight(i.DebugURL, "/") + PprofPath + name
	if seconds > 0 {
		u += "?seconds=" + strconv.Itoa(seconds)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	// The sampler's client gives up after 10 s; a CPU profile takes longer by design.
	c := &http.Client{Transport: i.client().Transport, Timeout: time.Duration(seconds)*time.Second + 30*time.Second}
	resp, err := c.Do(req)
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
	if !bytes.HasPrefix(body, []byte{0x1f, 0x8b}) { // pprof writes gzip; anything else is an error page
		return nil, fmt.Errorf("istiod %s: GET %s: not a gzipped profile: %s", i.Name, u, snippet(body))
	}
	return body, nil
}
