package testrun

import (
	"bytes"
	"encoding/xml"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ambientmc/ambientmc/framework/ci/junit"
)

// This test binary plays three parts: the tests below run it as a parent (TESTRUN_PARENT=1),
// which runs it again as a child that runs the TestFixture* tests (TESTRUN_FIXTURE=1).
func TestMain(m *testing.M) {
	flag.Parse()
	switch {
	case os.Getenv("TESTRUN_PARENT") == "1" && !IsChild():
		os.Exit(Run(Options{
			Package: "example.com/fixture", Dir: os.Getenv("TESTRUN_DIR"),
			Args:    append(os.Args[1:], "-test.v=test2json"),
			Verbose: flag.Lookup("test.v").Value.String(),
			Stdout:  os.Stdout, Stderr: os.Stderr, Drain: 2 * time.Second,
			Extra: func() []junit.Case {
				if os.Getenv("TESTRUN_SETUP_FAILS") == "1" {
					return nil // no tests ran, so no gates were judged
				}
				return []junit.Case{{Name: "TestGates/churn.runs[*].lost", Failed: true, Message: "gate FAIL churn.runs[*].lost: churn.runs[1].lost = 3 breaks max 0"}}
			},
		}))
	case IsChild() && os.Getenv("TESTRUN_SETUP_FAILS") == "1":
		fmt.Fprintln(os.Stderr, "setup failed: no clusters")
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func fixture(t *testing.T) {
	if os.Getenv("TESTRUN_FIXTURE") != "1" {
		t.Skip("a fixture of the tests below")
	}
}

func TestFixturePass(t *testing.T) {
	fixture(t)
	t.Log("passing log line")
	fmt.Fprintln(os.Stderr, "progress on stderr while passing")
}

func TestFixtureFail(t *testing.T) {
	fixture(t)
	t.Run("ok", func(t *testing.T) { t.Log("subtest that passes") })
	t.Run("broken", func(t *testing.T) {
		fmt.Fprintln(os.Stderr, "progress on stderr while failing")
		t.Errorf("broken on purpose: %d", 42)
	})
}

func TestFixtureSkip(t *testing.T) {
	fixture(t)
	t.Skip("nothing to do here")
}

func TestFixtureInterrupt(t *testing.T) {
	fixture(t)
	if os.Getenv("TESTRUN_INTERRUPT") != "1" {
		t.Skip("only when interrupted")
	}
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, os.Interrupt)
	fmt.Println("waiting for Ctrl-C")
	<-ch
	n := 1
	for wait := time.After(500 * time.Millisecond); ; {
		select {
		case <-ch:
			n++
			continue
		case <-wait:
		}
		break
	}
	fmt.Printf("got %d interrupt(s), cleaning up\n", n)
	os.Exit(3)
}

func TestFixturePanic(t *testing.T) {
	fixture(t)
	if os.Getenv("TESTRUN_PANIC") == "1" {
		panic("boom")
	}
}

type result struct {
	code   int
	stdout string
	dir    string
	suites suites
}

// suites is the part of junit.xml the checks read.
type suites struct {
	Suites []struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Skipped  int `xml:"skipped,attr"`
		Cases    []struct {
			Name    string `xml:"name,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Data    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
				Data    string `xml:",chardata"`
			} `xml:"error"`
			Skipped *struct{} `xml:"skipped"`
			Out     string    `xml:"system-out"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func parent(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestFixture"}, args...)...)
	cmd.Env = append(os.Environ(), append(env, "TESTRUN_PARENT=1", "TESTRUN_FIXTURE=1", "TESTRUN_DIR="+dir)...)
	cmd.Env = append(cmd.Env, ChildEnv+"=") // this test may itself run under a child
	return cmd
}

func runParent(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := parent(t, env, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	r := result{code: exitCode(err), stdout: out.String(), dir: strings.TrimPrefix(cmd.Env[len(cmd.Env)-2], "TESTRUN_DIR=")}
	data, err := os.ReadFile(filepath.Join(r.dir, JUnitFile))
	if err != nil {
		t.Fatalf("no junit.xml: %v\noutput:\n%s", err, r.stdout)
	}
	if err := xml.Unmarshal(data, &r.suites); err != nil {
		t.Fatalf("junit.xml: %v\n%s", err, data)
	}
	validate(t, filepath.Join(r.dir, JUnitFile))
	return r
}

// validate checks junit.xml against the Jenkins JUnit schema (xunit-plugin's junit-10.xsd, the
// format prow and GitHub's JUnit viewers read) with xmllint, where JUNIT_XSD names that file.
func validate(t *testing.T, file string) {
	t.Helper()
	xsd := os.Getenv("JUNIT_XSD")
	if xsd == "" {
		t.Log("JUNIT_XSD unset: junit.xml parsed, not validated against the schema")
		return
	}
	out, err := exec.Command("xmllint", "--noout", "--schema", xsd, file).CombinedOutput()
	if err != nil {
		t.Errorf("xmllint --schema %s: %v\n%s", xsd, err, out)
	}
}

func (r result) testcase(t *testing.T, name string) int {
	t.Helper()
	for i, c := range r.suites.Suites[0].Cases {
		if c.Name == name {
			return i
		}
	}
	t.Fatalf("no testcase %s in junit.xml", name)
	return -1
}

func TestQuietRunShowsFailuresAndWritesJUnit(t *testing.T) {
	r := runParent(t, nil)
	if r.code != 1 {
		t.Errorf("exit %d, want the child's 1\n%s", r.code, r.stdout)
	}
	for _, want := range []string{"progress on stderr while failing", "broken on purpose: 42", "--- FAIL: TestFixtureFail/broken", "--- FAIL: TestFixtureFail (", "\nFAIL\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the user does not see %q:\n%s", want, r.stdout)
		}
	}
	for _, not := range []string{"=== RUN", "passing log line", "subtest that passes", "progress on stderr while passing", "\x16"} {
		if strings.Contains(r.stdout, not) {
			t.Errorf("without -v the user sees %q:\n%s", not, r.stdout)
		}
	}
	s := r.suites.Suites[0]
	// Pass, Fail, Fail/ok, Fail/broken, Skip, Interrupt (skipped), Panic, and the extra gate.
	if s.Tests != 8 || s.Failures != 3 || s.Skipped != 2 {
		t.Errorf("tests=%d failures=%d skipped=%d, want 8, 3, 2", s.Tests, s.Failures, s.Skipped)
	}
	broken := s.Cases[r.testcase(t, "TestFixtureFail/broken")]
	if broken.Failure == nil || !strings.HasSuffix(broken.Failure.Message, ": broken on purpose: 42") ||
		!strings.Contains(broken.Failure.Data, "progress on stderr while failing") || strings.Contains(broken.Failure.Data, "=== RUN") {
		t.Errorf("failed subtest: %+v", broken.Failure)
	}
	if pass := s.Cases[r.testcase(t, "TestFixturePass")]; !strings.Contains(pass.Out, "passing log line") || !strings.Contains(pass.Out, "progress on stderr while passing") {
		t.Errorf("a passing test keeps its log: %q", pass.Out)
	}
	if skip := s.Cases[r.testcase(t, "TestFixtureSkip")]; skip.Skipped == nil {
		t.Error("skipped test not marked skipped")
	}
	if g := s.Cases[r.testcase(t, "TestGates/churn.runs[*].lost")]; g.Failure == nil || g.Failure.Message != "gate FAIL churn.runs[*].lost: churn.runs[1].lost = 3 breaks max 0" {
		t.Errorf("gate case: %+v", g.Failure)
	}
	text, _ := os.ReadFile(filepath.Join(r.dir, OutputFile))
	if !strings.Contains(string(text), "=== RUN   TestFixturePass") || !strings.Contains(string(text), "passing log line") || bytes.ContainsRune(text, 0x16) {
		t.Errorf("test-output.txt is not go test -v's text:\n%s", text)
	}
}

func TestVerboseRunShowsEverything(t *testing.T) {
	r := runParent(t, nil, "-test.v=true", "-test.run=^TestFixturePass$")
	if r.code != 0 || !strings.Contains(r.stdout, "=== RUN   TestFixturePass\n") || !strings.Contains(r.stdout, "passing log line") || strings.ContainsRune(r.stdout, 0x16) {
		t.Errorf("exit %d, -v output:\n%q", r.code, r.stdout)
	}
	// Subtests' results are indented as go test -v indents them, and test2json's "=== NAME" lines
	// are not shown.
	r = runParent(t, nil, "-test.v=true", "-test.run=^TestFixtureFail$")
	if !strings.Contains(r.stdout, "\n    --- PASS: TestFixtureFail/ok (") || !strings.Contains(r.stdout, "\n--- FAIL: TestFixtureFail (") || strings.Contains(r.stdout, "=== NAME") {
		t.Errorf("-v output of subtests:\n%s", r.stdout)
	}
	// go test -json hands the binary -test.v=test2json and converts the framed stream itself.
	r = runParent(t, nil, "-test.v=test2json", "-test.run=^TestFixturePass$")
	if !strings.Contains(r.stdout, "\x16=== RUN   TestFixturePass\n") {
		t.Errorf("-test.v=test2json output is not the framed stream:\n%q", r.stdout)
	}
}

func TestSetupFailureIsAFailingCase(t *testing.T) {
	r := runParent(t, []string{"TESTRUN_SETUP_FAILS=1"})
	if r.code != 1 || !strings.Contains(r.stdout, "setup failed: no clusters") {
		t.Errorf("exit %d:\n%s", r.code, r.stdout)
	}
	c := r.suites.Suites[0].Cases[r.testcase(t, "TestMain")]
	if c.Error == nil || c.Error.Message != "the test binary exited with status 1" || !strings.Contains(c.Error.Data, "setup failed: no clusters") {
		t.Errorf("TestMain case: %+v", c.Error)
	}
}

func TestPanicKeepsTheOutput(t *testing.T) {
	r := runParent(t, []string{"TESTRUN_PANIC=1"}, "-test.run=^TestFixturePanic$")
	if r.code != 2 || !strings.Contains(r.stdout, "panic: boom") {
		t.Errorf("exit %d:\n%s", r.code, r.stdout)
	}
	c := r.suites.Suites[0].Cases[r.testcase(t, "TestFixturePanic")]
	if c.Error == nil || c.Error.Message != "did not finish (the test binary exited with status 2): panic: boom [recovered, repanicked]" || !strings.Contains(c.Error.Data, "testrun_test.go:") {
		t.Errorf("panicking test: %+v", c)
	}
}

// Ctrl-C reaches the child once, through the parent, whether it is sent to the parent or (as a
// terminal does) to the whole foreground process group; the child's exit status is the run's.
func TestInterruptIsForwarded(t *testing.T) {
	t.Run("to the parent", func(t *testing.T) { interrupt(t, false) })
	t.Run("to the process group", func(t *testing.T) { interrupt(t, true) })
}

func interrupt(t *testing.T, group bool) {
	cmd := parent(t, []string{"TESTRUN_INTERRUPT=1"}, "-test.run=^TestFixtureInterrupt$", "-test.v=true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	pr, pw, _ := os.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	waiting, read := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		for {
			n, err := pr.Read(buf)
			out.Write(buf[:n])
			if strings.Contains(out.String(), "waiting for Ctrl-C") {
				select {
				case <-waiting:
				default:
					close(waiting)
				}
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-waiting:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-read
		t.Fatalf("the child never started waiting:\n%s", out.String())
	}
	if group {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	} else {
		_ = cmd.Process.Signal(syscall.SIGINT)
	}
	code := exitCode(cmd.Wait())
	<-read // the parent's output is all read once the pipe closes
	if code != 3 || !strings.Contains(out.String(), "got 1 interrupt(s), cleaning up") {
		t.Errorf("exit %d, want the child's 3:\n%s", code, out.String())
	}
}

func TestNoGoCommandIsAClearError(t *testing.T) {
	cmd := parent(t, nil)
	cmd.Env = append(cmd.Env, "PATH=/nonexistent")
	out, err := cmd.CombinedOutput()
	if exitCode(err) != 2 || !strings.Contains(string(out), "junit.xml is made with `go tool test2json`, but there is no go command on PATH") || !strings.Contains(string(out), "-junit=false") {
		t.Errorf("exit %d:\n%s", exitCode(err), out)
	}
}
