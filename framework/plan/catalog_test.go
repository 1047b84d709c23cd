package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestCatalogDerivesThePlanAndTheSkipFromOneDeclaration(t *testing.T) {
	var c Catalog[int]
	two := Need[int]{Skip: "needs two", Met: func(n int) bool { return n >= 2 }}
	three := Need[int]{Skip: "needs three", Met: func(n int) bool { return n >= 3 }}
	c.Add("TestA", nil, func(n int) Item { return Item{Expected: time.Duration(n) * time.Second} })
	c.Add("TestB", []Need[int]{two, three}, func(n int) Item { return Item{Name: "ignored", Expected: time.Second} })
	assert.Equal(t, []string{"TestA", "TestB"}, c.Names())
	assert.Equal(t, []Item{{Name: "TestA", Expected: time.Second}}, c.Items(1))
	assert.Equal(t, []Item{{Name: "TestA", Expected: 2 * time.Second}}, c.Items(2))
	assert.Equal(t, []Item{{Name: "TestA", Expected: 3 * time.Second}, {Name: "TestB", Expected: time.Second}}, c.Items(3))

	for n, want := range map[int]string{1: "needs two", 2: "needs three", 3: ""} {
		why, declared := c.Unmet("TestB", n)
		assert.True(t, declared)
		assert.Equal(t, want, why, "TestB at %d: the first unmet need's reason", n)
	}
	why, declared := c.Unmet("TestA", 0)
	assert.True(t, declared)
	assert.Empty(t, why, "no needs: it runs")
	_, declared = c.Unmet("TestC", 3)
	assert.False(t, declared, "an undeclared test")
	assert.Panics(t, func() { c.Add("TestA", nil, nil) }, "a test declared twice")
}
