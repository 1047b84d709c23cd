package measure

import (
	"context"
	"fmt"
)

// KrtzPath is istiod's krt debugger dump (pilot/pkg/xds/debug.go: every collection registered with
// the debugger, as a JSON array of {uid, name, state}). It is a full dump of istiod's state:
// reading it allocates a lot, so read it after memory samples, not before.
const KrtzPath = "/debug/krtz"

// KrtCollections returns the names of the krt collections istiod's debugger holds, one entry per
// collection (names repeat: each remote cluster registers its own informers).
func (i *Sampler) KrtCollections(ctx context.Context) ([]string, error) {
	var dump []struct {
		Name *string `json:"name"`
	}
	if err := i.getDebugJSON(ctx, KrtzPath, &dump); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(dump))
	for k, c := range dump {
		if c.Name == nil {
			return nil, fmt.Errorf("istiod %s: GET %s: entry %d has no name: not a krt dump", i.Name, KrtzPath, k)
		}
		names = append(names, *c.Name)
	}
	return names, nil
}
