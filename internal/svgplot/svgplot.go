// Package svgplot draws small line charts as SVG with the standard library
// only: an x axis in powers of two (message sizes), a linear or log10 y
// axis, one polyline with markers per series, a legend and axis labels.
package svgplot

import (
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// Point is one sample of a series.
type Point struct{ X, Y float64 }

// Series is one line of a chart.
type Series struct {
	Name   string
	Points []Point // drawn in order; points that the axes cannot show (x ≤ 0, or y ≤ 0 on a log axis) are left out
	Dashed bool
}

// Chart is a line chart with a log2 x axis.
type Chart struct {
	Title          string
	XLabel, YLabel string
	LogY           bool // log10 y axis; otherwise linear from 0
	Width, Height  int  // pixels; 0: 800 × 480
	Series         []Series
}

// Plot area margins, pixels.
const (
	marginLeft   = 80
	marginRight  = 20
	marginTop    = 40
	marginBottom = 60
	legendRow    = 18
)

// palette is the colour of series i (mod its length).
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

// Area is the plot area in pixels: where every drawn point lies.
type Area struct{ X0, Y0, X1, Y1 float64 }

func (c *Chart) size() (int, int) {
	w, h := c.Width, c.Height
	if w == 0 {
		w = 800
	}
	if h == 0 {
		h = 480
	}
	return w, h
}

// PlotArea returns the rectangle the data is drawn in (the legend takes
// rows at its bottom, one per series).
func (c *Chart) PlotArea() Area {
	w, h := c.size()
	return Area{X0: marginLeft, Y0: marginTop, X1: float64(w - marginRight), Y1: float64(h - marginBottom - legendRow*len(c.Series))}
}

// visible reports whether p can be drawn on c's axes.
func (c *Chart) visible(p Point) bool {
	ok := p.X > 0 && !math.IsNaN(p.Y) && !math.IsInf(p.Y, 0)
	if c.LogY {
		ok = ok && p.Y > 0
	}
	return ok
}

// bounds returns the x range in log2 units and the y range (log10 units
// for a log axis), widened to whole powers (log) or from 0 (linear).
func (c *Chart) bounds() (x0, x1, y0, y1 float64, err error) {
	x0, x1, y0, y1 = math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range c.Series {
		for _, p := range s.Points {
			if !c.visible(p) {
				continue
			}
			lx, y := math.Log2(p.X), p.Y
			if c.LogY {
				y = math.Log10(y)
			}
			x0, x1, y0, y1 = min(x0, lx), max(x1, lx), min(y0, y), max(y1, y)
		}
	}
	if math.IsInf(x0, 1) {
		return 0, 0, 0, 0, errors.New("svgplot: no point to draw")
	}
	x0, x1 = math.Floor(x0), math.Ceil(x1)
	if x1 == x0 {
		x1 = x0 + 1
	}
	if c.LogY {
		y0, y1 = math.Floor(y0), math.Ceil(y1)
		if y1 == y0 {
			y1 = y0 + 1
		}
	} else {
		y0 = min(0, y0)
		if y1 <= y0 {
			y1 = y0 + 1
		}
		y1 = niceCeil(y1)
	}
	return x0, x1, y0, y1, nil
}

// niceCeil rounds v > 0 up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// SizeLabel names a byte count as 2, 64, 4K, 1M.
func SizeLabel(v float64) string {
	switch {
	case v >= 1<<20 && math.Mod(v, 1<<20) == 0:
		return fmt.Sprintf("%gM", v/(1<<20))
	case v >= 1<<10 && math.Mod(v, 1<<10) == 0:
		return fmt.Sprintf("%gK", v/(1<<10))
	}
	return fmt.Sprintf("%g", v)
}

func tickLabel(v float64) string {
	if v != 0 && (math.Abs(v) >= 1e5 || math.Abs(v) < 1e-3) {
		return fmt.Sprintf("%.0e", v)
	}
	return fmt.Sprintf("%g", v)
}

// Write draws the chart as a standalone SVG document.
func (c *Chart) Write(w io.Writer) error {
	x0, x1, y0, y1, err := c.bounds()
	if err != nil {
		return err
	}
	a := c.PlotArea()
	if a.X1 <= a.X0 || a.Y1 <= a.Y0 {
		return errors.New("svgplot: the chart is too small for its series")
	}
	px := func(x float64) float64 { return a.X0 + (math.Log2(x)-x0)/(x1-x0)*(a.X1-a.X0) }
	py := func(y float64) float64 {
		if c.LogY {
			y = math.Log10(y)
		}
		return a.Y1 - (y-y0)/(y1-y0)*(a.Y1-a.Y0)
	}
	width, height := c.size()
	var b strings.Builder
	esc := html.EscapeString
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="24" text-anchor="middle" font-size="15">%s</text>`+"\n", width/2, esc(c.Title))
	// Grid and ticks: x at every power of two (labelled every other one when crowded).
	step := 1
	if x1-x0 > 12 {
		step = 2
	}
	for i, e := 0, x0; e <= x1; i, e = i+1, e+1 {
		x := px(math.Exp2(e))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x, a.Y0, x, a.Y1)
		if i%step == 0 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, a.Y1+16, SizeLabel(math.Exp2(e)))
		}
	}
	var yticks []float64
	if c.LogY {
		for e := y0; e <= y1; e++ {
			yticks = append(yticks, math.Pow(10, e))
		}
	} else {
		for i := 0; i <= 5; i++ {
			yticks = append(yticks, y0+(y1-y0)*float64(i)/5)
		}
	}
	for _, v := range yticks {
		y := py(v)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", a.X0, y, a.X1, y)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", a.X0-6, y+4, tickLabel(v))
	}
	fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="black"/>`+"\n", a.X0, a.Y0, a.X1-a.X0, a.Y1-a.Y0)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", (a.X0+a.X1)/2, a.Y1+34, esc(c.XLabel))
	fmt.Fprintf(&b, `<text x="18" y="%.1f" text-anchor="middle" transform="rotate(-90 18 %.1f)">%s</text>`+"\n", (a.Y0+a.Y1)/2, (a.Y0+a.Y1)/2, esc(c.YLabel))
	for i, s := range c.Series {
		col := palette[i%len(palette)]
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		var pts []string
		var marks strings.Builder
		for _, p := range s.Points {
			if !c.visible(p) {
				continue
			}
			x, y := px(p.X), py(p.Y)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
			fmt.Fprintf(&marks, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`+"\n", x, y, col)
		}
		if len(pts) > 0 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5"%s points="%s"/>`+"\n", col, dash, strings.Join(pts, " "))
			b.WriteString(marks.String())
		}
		ly := a.Y1 + 46 + float64(legendRow*(i+1))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", a.X0, ly-4, a.X0+30, ly-4, col, dash)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", a.X0+38, ly, esc(s.Name))
	}
	b.WriteString("</svg>\n")
	_, err = io.WriteString(w, b.String())
	return err
}
