package measure

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// PprofPath is where istiod serves Go's profiles: the HTTP debug port (--httpAddr), which answers
// loopback callers without authentication (pilot/pkg/xds/debug.go, on while --profile is, the
// default).
const PprofPath = "/debug/pprof/"

// Profile fetches one of istiod's pprof profiles (heap, goroutine, or profile: CPU for seconds)
// as the gzipped protobuf pprof writes. A CPU profile takes its seconds to answer.
func (i *Sampler) Profile(ctx context.Context, name string, seconds int) ([]byte, error) {
	if i.DebugURL == "" {
		return nil, fmt.Errorf("istiod %s: the provider does not reach its debug port, so it has no profiles", i.Name)
	}
	path := PprofPath + name
	if seconds > 0 {
		path += "?seconds=" + strconv.Itoa(seconds)
	}
	// The sampler's client gives up after 10 s; a CPU profile takes longer by design.
	c := &http.Client{Transport: i.client().Transport, Timeout: time.Duration(seconds)*time.Second + 30*time.Second}
	body, err := i.getDebug(ctx, path, c)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(body, []byte{0x1f, 0x8b}) { // pprof writes gzip; anything else is an error page
		return nil, fmt.Errorf("istiod %s: GET %s: not a gzipped profile: %s", i.Name, path, snippet(body))
	}
	return body, nil
}
