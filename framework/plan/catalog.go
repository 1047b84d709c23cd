package plan

// Catalog holds each top-level test's declaration, beside the test that runs it (a package-level
// `var _ = catalog.Add(name, needs, item)` in the test's file): what the test needs of a run and
// how long it takes. The plan and the test's skip both come from it, so whether a test runs is
// said once, and its expected time changes with the test. In is what both are worked out from.
type Catalog[In any] struct {
	entries []catalogEntry[In]
}

// Need is one thing a test needs of a run, and the reason it skips when the run lacks it.
type Need[In any] struct {
	Skip string
	Met  func(In) bool
}

type catalogEntry[In any] struct {
	name  string
	needs []Need[In]
	item  func(In) Item
}

// Add declares test name: its needs (where one is unmet the plan leaves the test out and the test
// skips, Unmet) and its item for the runs it runs in. It returns true, for a package-level var.
func (c *Catalog[In]) Add(name string, needs []Need[In], item func(In) Item) bool {
	if c.entry(name) != nil {
		panic("plan: " + name + " declared twice")
	}
	c.entries = append(c.entries, catalogEntry[In]{name, needs, item})
	return true
}

func (c *Catalog[In]) entry(name string) *catalogEntry[In] {
	for i := range c.entries {
		if c.entries[i].name == name {
			return &c.entries[i]
		}
	}
	return nil
}

// Unmet is why test name does not run for in (the first need in lacks), or "" when it runs. A
// name nothing declared is an error of the suite's, not a skip.
func (c *Catalog[In]) Unmet(name string, in In) (string, bool) {
	e := c.entry(name)
	if e == nil {
		return "", false
	}
	return Unmet(in, e.needs...), true
}

// Unmet is the reason of the first of needs that in lacks, "" when it has them all.
func Unmet[In any](in In, needs ...Need[In]) string {
	for _, n := range needs {
		if !n.Met(in) {
			return n.Skip
		}
	}
	return ""
}

// Items are the items of the tests that run for in, in the order they were declared, each named
// after its test.
func (c *Catalog[In]) Items(in In) []Item {
	var out []Item
	for _, e := range c.entries {
		if why, _ := c.Unmet(e.name, in); why == "" {
			it := e.item(in)
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
