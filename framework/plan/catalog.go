package plan

// Catalog holds each top-level test's plan item, declared beside the test that runs it (a
// package-level `var _ = catalog.Add(name, item)` in the test's file), so a test's expected time
// changes with the test. In is what the items are worked out from.
type Catalog[In any] struct {
	entries []catalogEntry[In]
}

type catalogEntry[In any] struct {
	name string
	item func(In) (Item, bool)
}

// Add declares test name's item: item says how long the test takes for an input, and false where
// the test will not run for it (it skips at once). It returns true, for a package-level var.
func (c *Catalog[In]) Add(name string, item func(In) (Item, bool)) bool {
	for _, e := range c.entries {
		if e.name == name {
			panic("plan: " + name + " declared twice")
		}
	}
	c.entries = append(c.entries, catalogEntry[In]{name, item})
	return true
}

// Items are the items of the tests that run for in, in the order they were declared, each named
// after its test.
func (c *Catalog[In]) Items(in In) []Item {
	var out []Item
	for _, e := range c.entries {
		if it, ok := e.item(in); ok {
			it.Name = e.name
			out = append(out, it)
		}
	}
	return out
}

// Names are every declared test, in the order they were declared.
func (c *Catalog[In]) Names() []string {
	out := make([]string, len(c.entries))
	for i, e := range c.entries {
		out[i] = e.name
	}
	return out
}
