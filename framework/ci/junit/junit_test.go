package junit

import (
	"bytes"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func events(t *testing.T, b *Builder, lines ...string) {
	t.Helper()
	if err := b.Decode(strings.NewReader(strings.Join(lines, "\n"))); err != nil {
		t.Fatal(err)
	}
}

const testifyFailure = `{"Action":"output","Test":"TestJoin","Output":"    controlplane_test.go:80: \n"}
{"Action":"output","Test":"TestJoin","Output":"        \tError Trace:\t/src/controlplane_test.go:80\n"}
{"Action":"output","Test":"TestJoin","Output":"        \tError:      \tReceived unexpected error:\n"}
{"Action":"output","Test":"TestJoin","Output":"        \t            \tjoin of cluster-2 did not happen within -join.timeout=2m\n"}
{"Action":"output","Test":"TestJoin","Output":"        \tTest:       \tTestJoin\n"}`

func TestFailureMessages(t *testing.T) {
	b := NewBuilder("example.com/suite")
	events(t, b,
		`{"Time":"2026-01-01T00:00:00Z","Action":"start","Package":"example.com/suite"}`,
		`{"Action":"run","Test":"TestJoin"}`,
		`{"Action":"output","Test":"TestJoin","Output":"=== RUN   TestJoin\n"}`,
		testifyFailure,
		`{"Action":"output","Test":"TestJoin","Output":"--- FAIL: TestJoin (1.50s)\n"}`,
		`{"Action":"fail","Test":"TestJoin","Elapsed":1.5}`,
		`{"Action":"run","Test":"TestLatency"}`,
		`{"Action":"output","Test":"TestLatency","Output":"    latency_test.go:12: progress \u001b[31mred\u001b[0m\n"}`,
		`{"Action":"pass","Test":"TestLatency","Elapsed":2}`,
		`{"Time":"2026-01-01T00:00:09Z","Action":"output","Output":"FAIL\n"}`,
	)
	ts := b.Suites(1, "host")
	s := ts.Suites[0]
	if s.Tests != 2 || s.Failures != 1 || s.Time != "9.000" || s.Timestamp != "2026-01-01T00:00:00Z" {
		t.Errorf("suite: %+v", s)
	}
	join := s.Testcases[0]
	if join.Failure == nil || join.Failure.Message != "controlplane_test.go:80: Received unexpected error: join of cluster-2 did not happen within -join.timeout=2m" || join.Time != "1.500" {
		t.Errorf("testify failure: %+v", join.Failure)
	}
	if strings.Contains(join.Failure.Data, "=== RUN") || strings.Contains(join.Failure.Data, "--- FAIL") {
		t.Errorf("framing lines kept: %q", join.Failure.Data)
	}
	if out := s.Testcases[1].SystemOut; out == nil || !strings.Contains(out.Data, "progress \uFFFD[31mred") {
		t.Errorf("control characters must be replaced for XML 1.0: %+v", out)
	}
	var buf bytes.Buffer
	if err := ts.WriteXML(&buf); err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(buf.Bytes(), new(struct{})); err != nil {
		t.Fatalf("not XML: %v\n%s", err, buf.String())
	}
}

func TestParentOfFailedSubtestsAndGates(t *testing.T) {
	b := NewBuilder("p")
	events(t, b,
		`{"Action":"run","Test":"TestChecks"}`,
		`{"Action":"run","Test":"TestChecks/memory"}`,
		`{"Action":"output","Test":"TestChecks/memory","Output":"    checks_test.go:9: live heap kept\n"}`,
		`{"Action":"fail","Test":"TestChecks/memory"}`,
		`{"Action":"run","Test":"TestChecks/rejoin"}`,
		`{"Action":"output","Test":"TestChecks/rejoin","Output":"ambientmc [  85.2s] progress\n"}`,
		`{"Action":"output","Test":"TestChecks/rejoin","Output":"    checks_test.go:20: known istiod issue reproduced\n"}`,
		`{"Action":"skip","Test":"TestChecks/rejoin"}`,
		`{"Action":"fail","Test":"TestChecks"}`,
	)
	b.AddCase(Case{Name: "TestGates/churn.runs[*].lost", Failed: true, Message: "gate FAIL churn.runs[*].lost: not measured", Log: "profiles: none"})
	b.AddCase(Case{Name: "TestGates/latency.overhead.new.deltaMs", Message: "gate pass", Log: "gate pass latency.overhead.new.deltaMs = 2"})
	s := b.Suites(1, "").Suites[0]
	if s.Tests != 5 || s.Failures != 3 || s.Skipped != 1 {
		t.Errorf("tests=%d failures=%d skipped=%d", s.Tests, s.Failures, s.Skipped)
	}
	if m := s.Testcases[0].Failure.Message; m != "failed subtests: TestChecks/memory" {
		t.Errorf("parent: %q", m)
	}
	if m := s.Testcases[2].Skipped.Message; m != "checks_test.go:20: known istiod issue reproduced" {
		t.Errorf("skip message: %q", m)
	}
	if g := s.Testcases[3]; g.Name != "TestGates/churn.runs[*].lost" || g.Failure == nil || g.Failure.Message != "gate FAIL churn.runs[*].lost: not measured" {
		t.Errorf("gate case: %+v", g)
	}
	if g := s.Testcases[4]; g.Failure != nil || g.SystemOut == nil {
		t.Errorf("passing gate: %+v", g)
	}
}

// A binary that failed before any test (TestMain's setup) must not read as green.
func TestExitWithoutFailingTest(t *testing.T) {
	b := NewBuilder("p")
	events(t, b, `{"Action":"output","Output":"setup failed: preflight: no etcd\n"}`)
	s := b.Suites(1, "").Suites[0]
	if len(s.Testcases) != 1 || s.Testcases[0].Name != "TestMain" || s.Testcases[0].Error == nil || !strings.Contains(s.Testcases[0].Error.Data, "no etcd") {
		t.Fatalf("%+v", s.Testcases)
	}
	if s := NewBuilder("p").Suites(0, "").Suites[0]; len(s.Testcases) != 0 {
		t.Errorf("a clean exit adds nothing: %+v", s.Testcases)
	}
}

// A test running when the binary died is an error with the panic as its message.
func TestUnfinishedTest(t *testing.T) {
	b := NewBuilder("p")
	events(t, b, `{"Action":"run","Test":"TestX"}`, `{"Action":"output","Test":"TestX","Output":"panic: test timed out after 10m0s\n"}`)
	cases := b.Suites(2, "").Suites[0].Testcases
	if len(cases) != 1 {
		t.Errorf("the unfinished test explains the exit status; no TestMain case: %+v", cases)
	}
	tc := cases[0]
	if tc.Error == nil || tc.Error.Message != "did not finish (the test binary exited with status 2): panic: test timed out after 10m0s" {
		t.Fatalf("%+v", tc.Error)
	}
}

func TestWriteValidates(t *testing.T) {
	b := NewBuilder("p")
	events(t, b, `{"Time":"2026-01-01T00:00:00Z","Action":"run","Test":"TestX"}`, `{"Action":"skip","Test":"TestX"}`)
	path := filepath.Join(t.TempDir(), "junit.xml")
	if err := Write(path, b.Suites(0, "h")); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(data), `<?xml version="1.0" encoding="UTF-8"?>`) || strings.Contains(string(data), "<testsuites skipped") {
		t.Errorf("%s", data)
	}
	// With JUNIT_XSD naming the Jenkins JUnit schema (xunit-plugin's junit-10.xsd), xmllint validates.
	if xsd := os.Getenv("JUNIT_XSD"); xsd != "" {
		if out, err := exec.Command("xmllint", "--noout", "--schema", xsd, path).CombinedOutput(); err != nil {
			t.Errorf("xmllint: %v\n%s", err, out)
		}
	}
}
