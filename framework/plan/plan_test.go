package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func item(name string, d time.Duration) Item { return Item{Name: name, Expected: d} }

func TestFitsCountsTestsFromMRunAndSetupFromTheStart(t *testing.T) {
	p := Plan{Timeout: 10 * time.Minute, Margin: 30 * time.Second,
		Setup: []Item{item("setup", time.Minute)}, Tests: []Item{item("TestA", 9*time.Minute)}}
	assert.True(t, p.Fits(), "9m of tests fit 10m less 30s; setup is inside go test's kill a minute later")
	p.Tests[0].Expected = 9*time.Minute + 31*time.Second
	assert.False(t, p.Fits(), "the tests alone pass the margin")
	p.Tests[0].Expected = 9 * time.Minute
	p.Setup[0].Expected = 2 * time.Minute
	assert.False(t, p.Fits(), "setup and tests together pass go test's kill")
}

func TestFitTrimsInOrderUntilItFitsAndSaysSo(t *testing.T) {
	trimmedB := false
	p := Plan{Timeout: 5 * time.Minute, Margin: 30 * time.Second, Tests: []Item{
		item("TestA", 3*time.Minute),
		{Name: "TestB", Expected: 3 * time.Minute, Trim: func() (Item, string) {
			trimmedB = true
			return Item{Name: "TestB", Expected: time.Minute}, "TestB trimmed: pass -b.full for the full version"
		}},
		{Name: "TestC", Expected: time.Second, Trim: func() (Item, string) { t.Fatal("no trim needed after B"); return Item{}, "" }},
	}}
	require.NoError(t, p.Fit())
	assert.True(t, trimmedB)
	assert.True(t, p.Tests[1].Trimmed)
	assert.Equal(t, []string{"TestB trimmed: pass -b.full for the full version"}, p.Warnings)
	assert.Contains(t, p.Table(), "(trimmed)")
}

func TestFitRefusesWithTheTimeoutItNeeds(t *testing.T) {
	p := Plan{Timeout: 3 * time.Minute, Margin: MarginFor(3 * time.Minute),
		Setup: []Item{item("setup", 30*time.Second)}, Tests: []Item{item("TestA", 4*time.Minute)}}
	err := p.Fit()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-timeout=3m0s")
	assert.Contains(t, err.Error(), "pass -timeout=5m0s", "4m of tests need 5m with its 30 s margin")
	assert.Contains(t, err.Error(), "TestA", "the plan is printed")
	q := p
	q.Timeout, q.Margin = 5*time.Minute, MarginFor(5*time.Minute)
	assert.True(t, q.Fits(), "the timeout it names is enough")
	q.Timeout, q.Margin = 4*time.Minute, MarginFor(4*time.Minute)
	assert.False(t, q.Fits(), "and the one below is not")
}

func TestNoTimeoutFitsAnything(t *testing.T) {
	p := Plan{Tests: []Item{item("TestA", 100*time.Hour)}}
	assert.NoError(t, p.Fit())
}

func TestTableListsEveryItemAndTheTotal(t *testing.T) {
	p := Plan{Timeout: 10 * time.Minute, Setup: []Item{{Name: "setup", Expected: 25 * time.Second, Detail: "10 clusters"}},
		Tests: []Item{{Name: "TestControlPlaneJoin", Expected: 61 * time.Second, Detail: "9 joins x 6 s"}}}
	tab := p.Table()
	for _, want := range []string{"setup", "25s", "10 clusters", "TestControlPlaneJoin", "1m1s", "9 joins x 6 s", "total", "1m26s", "of -timeout=10m0s"} {
		assert.Contains(t, tab, want)
	}
	assert.Equal(t, 3, strings.Count(tab, "\n"))
}

func TestSelectReadsRunAndSkipAsTestingDoes(t *testing.T) {
	for _, c := range []struct {
		run, skip string
		want      map[string]bool
	}{
		{"", "", map[string]bool{"TestA": true, "TestB": true}},
		{"TestA", "", map[string]bool{"TestA": true, "TestAB": true, "TestB": false}},
		{"^TestA$", "", map[string]bool{"TestA": true, "TestAB": false}},
		{"TestA/sub", "", map[string]bool{"TestA": true, "TestB": false}},
		{"Test[A/B]", "", map[string]bool{"TestA": true, "TestB": true, "TestC": false}},
		{"", "TestA", map[string]bool{"TestA": false, "TestB": true}},
		{"", "TestA/sub", map[string]bool{"TestA": true}},
		{"Test", "B$", map[string]bool{"TestA": true, "TestB": false}},
	} {
		s, err := Select(c.run, c.skip)
		require.NoError(t, err)
		for name, want := range c.want {
			assert.Equal(t, want, s.Runs(name), "-run=%q -skip=%q: %s", c.run, c.skip, name)
		}
	}
	_, err := Select("Test(", "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `-run="Test("`)
}

func TestScaleStretchesEstimatesAndTheirTrims(t *testing.T) {
	items := Scale([]Item{
		item("setup", 10*time.Second),
		{Name: "TestB", Expected: time.Minute, Trim: func() (Item, string) { return Item{Name: "TestB", Expected: 20 * time.Second}, "trimmed" }},
	}, 2)
	assert.Equal(t, 20*time.Second, items[0].Expected)
	assert.Equal(t, 2*time.Minute, items[1].Expected)
	short, _ := items[1].Trim()
	assert.Equal(t, 40*time.Second, short.Expected, "the trimmed version is scaled too")
}
