package report

import (
	"bytes"
	"fmt"
	"strings"
)

// Results of an istiod property check.
const (
	CheckPass       = "pass"
	CheckFail       = "fail"
	CheckKnownIssue = "known-issue"
)

// IstiodCheck is the outcome of one istiod property check, after the known-issues table.
type IstiodCheck struct {
	Name   string `json:"name"`
	Result string `json:"result"` // pass, fail or known-issue
	// Reference is the upstream issue a known-issue (or an out-of-date table entry) names.
	Reference string `json:"reference,omitempty"`
	Detail    string `json:"detail"`
}

func validateChecks(cs []IstiodCheck) error {
	for i, c := range cs {
		switch c.Result {
		case CheckPass, CheckFail:
		case CheckKnownIssue:
			if c.Reference == "" {
				return fmt.Errorf("istiodChecks[%d] %q is a known-issue without a reference", i, c.Name)
			}
		default:
			return fmt.Errorf("istiodChecks[%d].result %q is not pass, fail or known-issue", i, c.Result)
		}
	}
	return nil
}

func markdownChecks(b *bytes.Buffer, cs []IstiodCheck) {
	if len(cs) == 0 {
		return
	}
	fmt.Fprintf(b, "## istiod property checks\n\n| Check | Result | Reference | Detail |\n|---|---|---|---|\n")
	for _, c := range cs {
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", cell(c.Name), c.Result, cell(c.Reference), cell(strings.ReplaceAll(c.Detail, "\n", " ")))
	}
	b.WriteString("\n")
}
