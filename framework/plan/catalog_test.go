package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestCatalogNamesItemsAfterTheirTestsAndDropsThoseThatDoNotRun(t *testing.T) {
	var c Catalog[int]
	c.Add("TestA", func(n int) (Item, bool) { return Item{Expected: time.Duration(n) * time.Second}, true })
	c.Add("TestB", func(n int) (Item, bool) { return Item{Name: "ignored", Expected: time.Second}, n > 1 })
	assert.Equal(t, []string{"TestA", "TestB"}, c.Names())
	assert.Equal(t, []Item{{Name: "TestA", Expected: time.Second}}, c.Items(1))
	assert.Equal(t, []Item{{Name: "TestA", Expected: 2 * time.Second}, {Name: "TestB", Expected: time.Second}}, c.Items(2))
	assert.Panics(t, func() { c.Add("TestA", nil) }, "a test declared twice")
}
