package plan

import (
	"fmt"
	"regexp"
)

// Selection says which top-level tests go test's -run and -skip select, read the way the testing
// package reads them: each pattern is split at slashes outside brackets and parentheses, -run's
// first element must match a test's name, and -skip drops a test only when the whole pattern is
// one element that matches it (a longer one skips subtests, not the test).
type Selection struct {
	run, skip *regexp.Regexp
}

// Select compiles -run and -skip; an empty pattern selects (or skips) nothing special.
func Select(run, skip string) (Selection, error) {
	var s Selection
	if run != "" {
		re, err := regexp.Compile(splitTop(run)[0])
		if err != nil {
			return s, fmt.Errorf("-run=%q: %w", run, err)
		}
		s.run = re
	}
	if parts := splitTop(skip); skip != "" && len(parts) == 1 {
		re, err := regexp.Compile(parts[0])
		if err != nil {
			return s, fmt.Errorf("-skip=%q: %w", skip, err)
		}
		s.skip = re
	}
	return s, nil
}

// Runs reports whether the top-level test called name runs.
func (s Selection) Runs(name string) bool {
	if s.run != nil && !s.run.MatchString(name) {
		return false
	}
	return s.skip == nil || !s.skip.MatchString(name)
}

// splitTop splits a -run pattern at slashes that are not inside [...] or (...), as testing does.
func splitTop(p string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '[', '(':
			depth++
		case ']', ')':
			depth = max(0, depth-1)
		case '\\':
			i++ // an escaped character is never a separator
		case '/':
			if depth == 0 {
				parts = append(parts, p[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, p[start:])
}
