package churn

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func TestTrackerReflectsOnArrival(t *testing.T) {
	tr := NewTracker(map[string]string{"pod-a": Healthy})
	c, err := tr.Expect("pod-a", Absent, at(0))
	require.NoError(t, err)
	assert.True(t, tr.Busy("pod-a"))

	// An update that does not show the wanted state leaves the change pending.
	tr.Observe("pod-a", Unhealthy, at(50))
	assert.Equal(t, 1, tr.Pending())
	select {
	case <-c.Done():
		t.Fatal("reflected by an update that does not show it")
	default:
	}

	tr.Observe("pod-a", Absent, at(120))
	<-c.Done()
	rs := tr.Results()
	require.Len(t, rs, 1)
	assert.True(t, rs[0].Reflected)
	assert.False(t, rs[0].Superseded)
	assert.Equal(t, 120*time.Millisecond, rs[0].Latency)
	assert.Zero(t, tr.Pending())
}

func TestTrackerSupersededCountsAtLaterPush(t *testing.T) {
	// Capacity 5 -> 4 (write at 0) -> 3 (write at 40); istiod pushes only 3, at 300.
	tr := NewTracker(map[string]string{"sh": Capacity(5)})
	_, err := tr.Expect("sh", Capacity(4), at(0))
	require.NoError(t, err)
	_, err = tr.Expect("sh", Capacity(3), at(40))
	require.NoError(t, err)
	tr.Observe("sh", Capacity(3), at(300))

	rs := tr.Results()
	require.Len(t, rs, 2)
	assert.True(t, rs[0].Reflected && rs[0].Superseded, "the earlier change is reflected by the later push")
	assert.Equal(t, 300*time.Millisecond, rs[0].Latency)
	assert.True(t, rs[1].Reflected && !rs[1].Superseded)
	assert.Equal(t, 260*time.Millisecond, rs[1].Latency)
}

func TestTrackerLaterChangeStaysPending(t *testing.T) {
	// Unready (write 0) then Ready again (write 10): a push showing unready reflects only the first.
	tr := NewTracker(map[string]string{"p": Healthy})
	_, err := tr.Expect("p", Unhealthy, at(0))
	require.NoError(t, err)
	_, err = tr.Expect("p", Healthy, at(10))
	require.NoError(t, err)
	tr.Observe("p", Unhealthy, at(100))
	assert.Equal(t, 1, tr.Pending())
	tr.Observe("p", Healthy, at(250))
	rs := tr.Results()
	assert.Equal(t, 100*time.Millisecond, rs[0].Latency)
	assert.Equal(t, 240*time.Millisecond, rs[1].Latency)
	assert.False(t, rs[0].Superseded || rs[1].Superseded)
}

func TestTrackerRefusesInvisibleChange(t *testing.T) {
	tr := NewTracker(map[string]string{"p": Healthy})
	_, err := tr.Expect("p", Healthy, at(0))
	require.Error(t, err, "the watcher already holds the state")
	_, err = tr.Expect("p", Unhealthy, at(0))
	require.NoError(t, err)
	_, err = tr.Expect("p", Unhealthy, at(5))
	require.Error(t, err, "a pending change already leads there")
	_, err = tr.Expect("new", Absent, at(0))
	require.Error(t, err, "an unknown key is absent already")
}

func TestTrackerSeedKeepsNewerUpdates(t *testing.T) {
	tr := NewTracker(nil)
	tr.Observe("p", Unhealthy, at(5)) // arrived after the snapshot was taken
	tr.Seed(map[string]string{"p": Healthy, "q": Healthy})
	assert.Equal(t, Unhealthy, tr.State("p"))
	assert.Equal(t, Healthy, tr.State("q"))
}

func TestTrackerMismatches(t *testing.T) {
	tr := NewTracker(map[string]string{"a": Healthy, "b": Capacity(3)})
	got := tr.Mismatches(map[string]string{"a": Healthy, "b": Capacity(4), "gone": Absent, "new": Healthy})
	assert.Equal(t, map[string]string{"b": Capacity(3), "new": Absent}, got)
}

func TestSummarizeLostAndPercentiles(t *testing.T) {
	var rs []Result
	for i := 1; i <= 100; i++ {
		rs = append(rs, Result{Reflected: true, Latency: time.Duration(i) * time.Millisecond})
	}
	rs = append(rs,
		Result{Reflected: true, Latency: 16 * time.Second}, // late
		Result{Reflected: false},                           // never seen
		Result{Reflected: true, Superseded: true, Latency: 50 * time.Millisecond},
	)
	s := Summarize(rs, 15*time.Second, 2)
	assert.Equal(t, 103, s.Samples)
	assert.Equal(t, 101, s.Reflected)
	assert.Equal(t, 1, s.Superseded)
	assert.Equal(t, 1, s.Late)
	assert.Equal(t, 1, s.Unseen)
	assert.Equal(t, 2, s.Mismatched)
	assert.Equal(t, 4, s.Lost)
	// Nearest rank over 1..100 ms plus one 50 ms sample.
	assert.Equal(t, 50*time.Millisecond, *s.P50)
	assert.Equal(t, 90*time.Millisecond, *s.P90)
	assert.Equal(t, 99*time.Millisecond, *s.P99)
	assert.Equal(t, 100*time.Millisecond, *s.Max)
}

func TestSummarizeNothingReflectedHasNoPercentiles(t *testing.T) {
	s := Summarize([]Result{{Reflected: false}}, time.Second, 0)
	assert.Nil(t, s.P50, "absent, not zero")
	assert.Nil(t, s.Max)
	assert.Equal(t, 1, s.Lost)
}

func TestKnee(t *testing.T) {
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	rate, ok := Knee(map[float64]time.Duration{2: ms(110), 5: ms(180), 20: ms(400), 50: ms(900)})
	assert.True(t, ok)
	assert.Equal(t, 20.0, rate)
	_, ok = Knee(map[float64]time.Duration{2: ms(110), 5: ms(220)})
	assert.False(t, ok, "exactly twice is not over twice")
	_, ok = Knee(map[float64]time.Duration{2: ms(110)})
	assert.False(t, ok)
}

func TestCapacityOfNoEndpointsIsAbsent(t *testing.T) {
	assert.Equal(t, Absent, Capacity(0))
	assert.Equal(t, "capacity=3", Capacity(3))
}
