package xdswatch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"istio.io/istio/pkg/adsc"
	"istio.io/istio/pkg/workloadapi"
)

// newTestWatcher is a Watcher without a stream: updates are fed to onAddress as adsc would.
func newTestWatcher() *Watcher {
	return &Watcher{addrs: map[string]*workloadapi.Address{}, changed: make(chan struct{}), done: make(chan struct{})}
}

func workloadAddr(uid string) *workloadapi.Address {
	return &workloadapi.Address{Type: &workloadapi.Address_Workload{Workload: &workloadapi.Workload{Uid: uid}}}
}

func TestSubscribeSeesUpdatesOnArrival(t *testing.T) {
	w := newTestWatcher()
	w.onAddress(0, "a", workloadAddr("a"), adsc.EventAdd)

	var got []Update
	state, unsubscribe := w.Subscribe(func(u Update) { got = append(got, u) })
	assert.Contains(t, state, "a", "the state at subscription")

	before := time.Now()
	w.onAddress(0, "b", workloadAddr("b"), adsc.EventAdd)
	w.onAddress(0, "a", nil, adsc.EventDelete)
	require.Len(t, got, 2)
	assert.Equal(t, "b", got[0].Name)
	assert.NotNil(t, got[0].Address)
	assert.Equal(t, "a", got[1].Name)
	assert.Nil(t, got[1].Address, "a removal carries no resource")
	assert.False(t, got[0].At.Before(before), "stamped when it arrived")
	assert.False(t, got[1].At.Before(got[0].At))
	assert.Equal(t, got[0].Seq+1, got[1].Seq)
	assert.Equal(t, uint64(3), w.Seq())

	unsubscribe()
	w.onAddress(0, "c", workloadAddr("c"), adsc.EventAdd)
	assert.Len(t, got, 2, "no calls after unsubscribe")
	assert.Len(t, w.Addresses(), 2)
}

func TestChangedStillFiresWithSubscribers(t *testing.T) {
	w := newTestWatcher()
	_, unsubscribe := w.Subscribe(func(Update) {})
	defer unsubscribe()
	ch := w.Changed()
	w.onAddress(0, "a", workloadAddr("a"), adsc.EventAdd)
	select {
	case <-ch:
	default:
		t.Fatal("Changed not closed on an update")
	}
}
