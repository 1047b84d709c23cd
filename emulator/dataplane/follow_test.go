package dataplane

import (
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"istio.io/istio/pkg/workloadapi"
	"istio.io/istio/pkg/workloadapi/security"
)

// racySource is an address source whose state changes right after its first read, before the
// reader can ask for the change channel: the moment a stream's last adds can land.
type racySource struct {
	mu      sync.Mutex
	addrs   map[string]*workloadapi.Address
	changed chan struct{}
	done    chan struct{}
	late    map[string]*workloadapi.Address // what lands after the first read
	reads   int
}

func (s *racySource) Addresses() map[string]*workloadapi.Address {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := maps.Clone(s.addrs)
	s.reads++
	if s.reads == 1 {
		maps.Copy(s.addrs, s.late)
		close(s.changed)
		s.changed = make(chan struct{})
	}
	return out
}

func (s *racySource) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

func (s *racySource) Done() <-chan struct{} { return s.done }

func (s *racySource) Authorizations() map[string]*security.Authorization { return nil }

// A change landing between follow's read of the state and its wait for the next change still
// reaches the view.
func TestFollowSeesAChangeDuringItsRead(t *testing.T) {
	all := addresses(nil, true)
	early := map[string]*workloadapi.Address{}
	late := map[string]*workloadapi.Address{}
	for name, a := range all {
		if name == "c1//Pod/probe/echo-0" {
			late[name] = a
		} else {
			early[name] = a
		}
	}
	src := &racySource{addrs: early, late: late, changed: make(chan struct{}), done: make(chan struct{})}
	views := make(chan *View, 10)
	stop := Follow(src, func(v *View) { views <- v })
	defer stop()
	first := <-views
	svc := first.ServiceByHostname("echo.probe.svc.cluster.local")
	require.NotNil(t, svc)
	require.Len(t, first.Endpoints(svc), 1, "the first view has only the split-horizon workload")
	select {
	case v := <-views:
		assert.Len(t, v.Endpoints(svc), 2, "the pod that landed during the first read")
	case <-time.After(5 * time.Second):
		t.Fatal("follow missed the change that landed while it read the state: the view stays stale")
	}
}
