package testrun

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/ambientmc/ambientmc/framework/ci/junit"
)

// display shows the user what go test would have: with -test.v=test2json the framed stream as it
// is (go test -json converts it), with -test.v the plain text, else (quiet) what a test binary
// prints without -v: package output, and a failed test's log and verdict lines once it failed.
type display struct {
	mu      sync.Mutex
	w       io.Writer
	mode    string             // "test2json", "true" or quiet
	plain   bool               // quiet, but test2json failed: print plain lines from now on
	pending map[string][]chunk // by top-level test
	order   []string           // top-level tests in the order they started
}

type chunk struct {
	test string
	text string
}

func newDisplay(w io.Writer, verbose string) *display {
	if verbose != "test2json" && verbose != "true" {
		verbose = "quiet"
	}
	return &display{w: w, mode: verbose, pending: map[string][]chunk{}}
}

// line is one line of the child's output, raw and without the framing marker.
func (d *display) line(raw, plain []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.mode == "test2json":
		d.w.Write(raw)
	case d.mode == "true" && len(raw) > 0 && raw[0] == 0x16:
		d.w.Write(verboseFrame(plain))
	case d.mode == "true" || d.plain:
		d.w.Write(plain)
	}
}

// verboseFrame turns a framing line of -test.v=test2json into what -test.v prints: no "=== NAME"
// lines (test2json needs them to attribute output, -v prints them only between parallel tests),
// and a subtest's result indented by its depth.
func verboseFrame(line []byte) []byte {
	s := string(line)
	if strings.HasPrefix(s, "=== NAME") {
		return nil
	}
	for _, r := range []string{"--- PASS: ", "--- FAIL: ", "--- SKIP: "} {
		if name, ok := strings.CutPrefix(s, r); ok {
			test, _, _ := strings.Cut(name, " ")
			return []byte(strings.Repeat("    ", strings.Count(test, "/")) + s)
		}
	}
	return line
}

// fallback switches a quiet display to plain lines, saying why.
func (d *display) fallback(why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mode == "quiet" && !d.plain {
		d.plain = true
		fmt.Fprintf(d.w, "ambientmc: %s: showing the test binary's output as it is from here\n", why)
	}
}

// events reads test2json's stream; in quiet mode it prints from it.
func (d *display) events(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var ev junit.Event
		if err := dec.Decode(&ev); err == io.EOF {
			d.unfinished()
			return nil
		} else if err != nil {
			d.fallback("reading go tool test2json's events: " + err.Error())
			_, _ = io.Copy(io.Discard, r) // let test2json finish writing
			return err
		}
		d.event(ev)
	}
}

func (d *display) event(ev junit.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mode != "quiet" || d.plain {
		return
	}
	if ev.Test == "" {
		if ev.Action == "output" {
			io.WriteString(d.w, ev.Output)
		}
		return
	}
	top, _, _ := strings.Cut(ev.Test, "/")
	switch ev.Action {
	case "output":
		if _, ok := d.pending[top]; !ok {
			d.order = append(d.order, top)
		}
		if !isFraming(ev.Output) {
			d.pending[top] = append(d.pending[top], chunk{ev.Test, ev.Output})
		}
	case "pass", "skip":
		if ev.Test == top {
			delete(d.pending, top)
			return
		}
		// A subtest that passed says nothing without -v, even under a failing parent.
		d.pending[top] = dropTest(d.pending[top], ev.Test)
	case "fail":
		if ev.Test != top {
			return
		}
		for _, c := range d.pending[top] {
			io.WriteString(d.w, c.text)
		}
		delete(d.pending, top)
	}
}

// unfinished prints what tests that never ended (a panic, a crash, a timeout) printed: without
// -v, go test shows that too.
func (d *display) unfinished() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, top := range d.order {
		for _, c := range d.pending[top] {
			io.WriteString(d.w, c.text)
		}
		delete(d.pending, top)
	}
}

// isFraming says whether an output event is a line go test prints only with -v.
func isFraming(s string) bool {
	t := strings.TrimLeft(s, " ")
	return strings.HasPrefix(s, "=== ") || strings.HasPrefix(t, "--- PASS: ") || strings.HasPrefix(t, "--- SKIP: ")
}

func dropTest(cs []chunk, test string) []chunk {
	out := cs[:0]
	for _, c := range cs {
		if c.test != test && !strings.HasPrefix(c.test, test+"/") {
			out = append(out, c)
		}
	}
	return out
}
