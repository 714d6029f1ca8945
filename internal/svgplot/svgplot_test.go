package svgplot

import (
	"bytes"
	"encoding/xml"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// elements parses an SVG document and returns its elements by name, each
// as its attributes.
func elements(t *testing.T, doc []byte) map[string][]map[string]string {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	d.Strict = true
	got := map[string][]map[string]string{}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, doc)
		}
		if se, ok := tok.(xml.StartElement); ok {
			attrs := map[string]string{}
			for _, a := range se.Attr {
				attrs[a.Name.Local] = a.Value
			}
			got[se.Name.Local] = append(got[se.Name.Local], attrs)
		}
	}
	return got
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("attribute %q: %v", s, err)
	}
	return v
}

func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		name  string
		chart Chart
		marks int // circles expected: the visible points
	}{
		{"log y", Chart{Title: "write_lat <t_typical> & co", XLabel: "message size (B)", YLabel: "µs", LogY: true, Series: []Series{
			{Name: "perftest 6.1", Points: []Point{{2, 11}, {64, 12}, {4096, 80}, {1 << 20, 25000}}},
			{Name: "ibperf 6.1", Dashed: true, Points: []Point{{2, 12}, {64, 0}, {4096, 82}, {1 << 23, 190000}}}, // 0 cannot be shown on a log axis
		}}, 7},
		{"linear y", Chart{Title: "bw", XLabel: "size", YLabel: "MB/s", Width: 400, Height: 300, Series: []Series{
			{Name: "a", Points: []Point{{2, 0.08}, {8, 3}, {1024, 44.5}}},
			{Name: "b", Points: []Point{{0, 5}, {2, 0.1}, {1024, 47}}}, // x 0 cannot be shown on a log2 axis
		}}, 5},
		{"one point", Chart{Title: "one", LogY: true, Series: []Series{{Name: "x", Points: []Point{{64, 10}}}}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.chart.Write(&b); err != nil {
				t.Fatal(err)
			}
			el := elements(t, b.Bytes())
			if len(el["svg"]) != 1 {
				t.Fatalf("%d svg elements", len(el["svg"]))
			}
			a := tc.chart.PlotArea()
			inside := func(x, y float64) bool {
				return x >= a.X0-0.05 && x <= a.X1+0.05 && y >= a.Y0-0.05 && y <= a.Y1+0.05
			}
			if len(el["circle"]) != tc.marks {
				t.Errorf("%d points drawn, want %d", len(el["circle"]), tc.marks)
			}
			for _, c := range el["circle"] {
				if x, y := num(t, c["cx"]), num(t, c["cy"]); !inside(x, y) {
					t.Errorf("point (%v, %v) outside the plot area %+v", x, y, a)
				}
			}
			if len(el["polyline"]) != len(tc.chart.Series) {
				t.Errorf("%d lines, want %d", len(el["polyline"]), len(tc.chart.Series))
			}
			for _, pl := range el["polyline"] {
				for _, xy := range strings.Fields(pl["points"]) {
					x, y, _ := strings.Cut(xy, ",")
					if !inside(num(t, x), num(t, y)) {
						t.Errorf("line vertex %s outside the plot area %+v", xy, a)
					}
				}
			}
			var texts []string
			d := xml.NewDecoder(&b)
			for {
				tok, err := d.Token()
				if err != nil {
					break
				}
				if cd, ok := tok.(xml.CharData); ok && strings.TrimSpace(string(cd)) != "" {
					texts = append(texts, string(cd))
				}
			}
			for _, want := range append([]string{tc.chart.Title, tc.chart.XLabel, tc.chart.YLabel}, names(tc.chart.Series)...) {
				if want != "" && !contains(texts, want) {
					t.Errorf("no text %q in %q", want, texts)
				}
			}
		})
	}
}

func names(ss []Series) []string {
	var n []string
	for _, s := range ss {
		n = append(n, s.Name)
	}
	return n
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func TestWriteNothingToDraw(t *testing.T) {
	c := Chart{LogY: true, Series: []Series{{Name: "x", Points: []Point{{2, 0}, {0, 3}}}}}
	if err := c.Write(io.Discard); err == nil {
		t.Error("a chart without a visible point was drawn")
	}
}

func TestSizeLabel(t *testing.T) {
	var got []string
	for _, v := range []float64{2, 64, 1000, 4096, 65536, 1 << 20, 8 << 20} {
		got = append(got, SizeLabel(v))
	}
	want := []string{"2", "64", "1000", "4K", "64K", "1M", "8M"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
