// Package svg draws a report's charts as plain SVG written as text: no dependency, and they
// render on GitHub and in browsers.
package svg

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"}

const (
	chartWidth   = 760.0
	panelHeight  = 280.0
	marginLeft   = 80.0
	marginRight  = 190.0 // room for the legend
	marginTop    = 36.0
	marginBottom = 50.0
)

type point struct{ x, y float64 }

type series struct {
	name   string
	points []point
}

type panel struct {
	title, xLabel, yLabel string
	series                []series
}

func linePanels(panels []panel) []byte {
	// Drop series and panels with nothing measured rather than drawing empty axes.
	var keep []panel
	for _, p := range panels {
		p.series = slices.DeleteFunc(slices.Clone(p.series), func(s series) bool { return len(s.points) == 0 })
		if len(p.series) > 0 {
			keep = append(keep, p)
		}
	}
	var b bytes.Buffer
	height := panelHeight * float64(max(len(keep), 1))
	svgOpen(&b, chartWidth, height)
	for i, p := range keep {
		fmt.Fprintf(&b, `<g transform="translate(0,%s)">`+"\n", f1(float64(i)*panelHeight))
		linePanel(&b, p)
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func linePanel(b *bytes.Buffer, p panel) {
	plotW := chartWidth - marginLeft - marginRight
	plotH := panelHeight - marginTop - marginBottom
	var maxX, maxY float64
	for _, s := range p.series {
		for _, pt := range s.points {
			maxX, maxY = max(maxX, pt.x), max(maxY, pt.y)
		}
	}
	xStep := niceStep(max(maxX, 1) / 10)
	xStep = max(xStep, 1) // cluster counts are whole numbers
	xTop := math.Ceil(max(maxX, 1)/xStep) * xStep
	yStep := niceStep(maxY / 5)
	yTop := math.Ceil(maxY/yStep) * yStep
	if yTop <= 0 {
		yTop = yStep
	}
	sx := func(x float64) float64 { return marginLeft + x/xTop*plotW }
	sy := func(y float64) float64 { return marginTop + plotH - y/yTop*plotH }

	axes(b, p.title, p.xLabel, p.yLabel, plotW, plotH, yStep, yTop)
	for i := 0; float64(i)*xStep <= xTop+xStep/2; i++ {
		x := float64(i) * xStep
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#000"/>`+"\n", f1(sx(x)), f1(marginTop+plotH), f1(sx(x)), f1(marginTop+plotH+5))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" font-size="11">%s</text>`+"\n", f1(sx(x)), f1(marginTop+plotH+18), tick(x, xStep))
	}
	for i, s := range p.series {
		color := palette[i%len(palette)]
		pts := slices.Clone(s.points)
		slices.SortStableFunc(pts, func(a, b point) int { return cmpFloat(a.x, b.x) })
		var coords []string
		for _, pt := range pts {
			coords = append(coords, f1(sx(pt.x))+","+f1(sy(pt.y)))
		}
		fmt.Fprintf(b, `<polyline class="series" data-series="%s" fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n",
			esc(s.name), color, strings.Join(coords, " "))
		for _, pt := range pts {
			fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="3.5" fill="%s"><title>%s: %s %s at %s</title></circle>`+"\n",
				f1(sx(pt.x)), f1(sy(pt.y)), color, esc(s.name), strconv.FormatFloat(pt.y, 'g', 4, 64), esc(p.yLabel), tick(pt.x, 1))
		}
		legendEntry(b, i, s.name, color, true)
	}
}

func svgOpen(b *bytes.Buffer, w, h float64) {
	fmt.Fprintf(b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" font-family="sans-serif">`+"\n"+
		`<rect width="100%%" height="100%%" fill="#fff"/>`+"\n", f1(w), f1(h), f1(w), f1(h))
}

// axes draws the frame, title, axis labels and the y ticks with grid lines.
func axes(b *bytes.Buffer, title, xLabel, yLabel string, plotW, plotH, yStep, yTop float64) {
	fmt.Fprintf(b, `<text x="%s" y="20" text-anchor="middle" font-size="14" font-weight="bold">%s</text>`+"\n", f1(marginLeft+plotW/2), esc(title))
	for i := 0; float64(i)*yStep <= yTop+yStep/2; i++ {
		y := float64(i) * yStep
		py := marginTop + plotH - y/yTop*plotH
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#ddd"/>`+"\n", f1(marginLeft), f1(py), f1(marginLeft+plotW), f1(py))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="end" font-size="11">%s</text>`+"\n", f1(marginLeft-6), f1(py+4), tick(y, yStep))
	}
	fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#000"/>`+"\n", f1(marginLeft), f1(marginTop), f1(marginLeft), f1(marginTop+plotH))
	fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#000"/>`+"\n", f1(marginLeft), f1(marginTop+plotH), f1(marginLeft+plotW), f1(marginTop+plotH))
	fmt.Fprintf(b, `<text class="x-label" x="%s" y="%s" text-anchor="middle" font-size="12">%s</text>`+"\n",
		f1(marginLeft+plotW/2), f1(marginTop+plotH+marginBottom-8), esc(xLabel))
	cy := marginTop + plotH/2
	fmt.Fprintf(b, `<text class="y-label" x="20" y="%s" text-anchor="middle" font-size="12" transform="rotate(-90 20 %s)">%s</text>`+"\n",
		f1(cy), f1(cy), esc(yLabel))
}

func legendEntry(b *bytes.Buffer, i int, name, color string, line bool) {
	x := chartWidth - marginRight + 20
	y := marginTop + 10 + float64(i)*20
	if line {
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"/><circle cx="%s" cy="%s" r="3.5" fill="%s"/>`+"\n",
			f1(x), f1(y), f1(x+24), f1(y), color, f1(x+12), f1(y), color)
	} else {
		fmt.Fprintf(b, `<rect x="%s" y="%s" width="24" height="10" fill="%s"/>`+"\n", f1(x), f1(y-5), color)
	}
	fmt.Fprintf(b, `<text class="legend" x="%s" y="%s" font-size="12">%s</text>`+"\n", f1(x+30), f1(y+4), esc(name))
}

// niceStep rounds v up to 1, 2 or 5 times a power of ten, so ticks read well.
func niceStep(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p*(1+1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// tick prints a tick value with as many decimals as its step needs, hiding float noise.
func tick(v, step float64) string {
	dec := 0
	if step < 1 {
		dec = int(math.Ceil(-math.Log10(step) - 1e-9))
	}
	return strconv.FormatFloat(v, 'f', dec, 64)
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;")

func esc(s string) string { return xmlEscaper.Replace(s) }
