package markdown

import (
	"math"
	"strconv"
	"strings"

	"github.com/ambientmc/ambientmc/framework/report"
)

// cpu prints a CPU figure, or "< resolution (below resolution)" when it is not resolved. Small
// figures keep two significant digits, so a resolved value never prints as 0.
func cpu(v, resolution *float64, prec int) string {
	if v == nil {
		return missingCellValue
	}
	if resolution != nil && math.Abs(*v) < *resolution {
		return "< " + res(*resolution) + " (below resolution)"
	}
	return num(*v, sigPrec(*v, prec))
}

// cpuSlope is slope for a CPU figure with a resolution.
func cpuSlope(v, se, resolution *float64, prec int) string {
	if v == nil {
		return missingCellValue
	}
	if resolution != nil && math.Abs(*v) < *resolution {
		return "< " + res(*resolution) + " (below resolution)"
	}
	pr := sigPrec(*v, prec)
	return num(*v, pr) + " ± " + opt(se, 1, pr)
}

// optRes prints an optional resolution with two significant digits.
func optRes(v *float64) string {
	if v == nil {
		return missingCellValue
	}
	return res(*v)
}

// res prints a resolution with two significant digits.
func res(v float64) string { return strconv.FormatFloat(v, 'g', 2, 64) }

// sigPrec is at least prec decimals, more when v needs them for two significant digits.
func sigPrec(v float64, prec int) int {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return prec
	}
	return max(prec, int(math.Ceil(-math.Log10(math.Abs(v))))+1)
}

func slope(v, se *float64, scale float64, prec int) string {
	if v == nil {
		return missingCellValue
	}
	// An absent standard error (fewer than three points) shows as "-", never as 0.
	return num(*v/scale, prec) + " ± " + opt(se, scale, prec)
}

// est prints an estimate as slope does.
func est(e *report.Estimate, scale float64, prec int) string {
	return slope(e.ValueOf(), e.StdErrOf(), scale, prec)
}

// estCPU prints a CPU estimate as cpuSlope does.
func estCPU(e *report.Estimate, prec int) string {
	if e == nil {
		return missingCellValue
	}
	return cpuSlope(&e.Value, e.StdErr, e.Resolution, prec)
}

func opt(v *float64, scale float64, prec int) string {
	if v == nil {
		return missingCellValue
	}
	return num(*v/scale, prec)
}

// num prints v with prec decimals; a non-finite value is no measurement and prints as absent.
func num(v float64, prec int) string {
	if !finite(v) {
		return missingCellValue
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// cell keeps free text from breaking a Markdown table row.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
