package compare

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"image/color"
	"io"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Chart colors: A and B, and the SQNR bands.
var (
	colorA     = color.NRGBA{R: 31, G: 119, B: 180, A: 150}
	colorB     = color.NRGBA{R: 255, G: 127, B: 14, A: 150}
	colorBad   = color.NRGBA{R: 214, G: 39, B: 40, A: 255}
	colorFair  = color.NRGBA{R: 255, G: 187, B: 60, A: 255}
	colorGood  = color.NRGBA{R: 44, G: 160, B: 44, A: 255}
	colorExact = color.NRGBA{R: 150, G: 150, B: 150, A: 255}
)

// SQNR bands of the per-layer chart: below 20 dB a tensor has lost most
// of an 8-bit code's 48 dB; above 30 dB it is typically harmless.
const (
	sqnrBad  = 20
	sqnrFair = 30
)

// WriteHTML writes the report as one self-contained HTML page: the
// summary table, the latency distributions of A and B and, with
// per-layer results, the SQNR of each tensor, as charts inline in the page.
func (r *Report) WriteHTML(w io.Writer, data string) error {
	latency, note, err := r.latencyChart()
	if err != nil {
		return err
	}
	page := htmlPage{R: r, Data: data, Latency: latency, LatencyNote: note, SQNR: FormatDB(r.Agreement.SQNR()),
		Cosine: fmt.Sprintf("%.6f", r.Agreement.Cosine()), MaxAbs: fmt.Sprintf("%.6g", r.Agreement.MaxAbsErr()),
		Speedup: fmt.Sprintf("%.2f×", r.Speedup), Top1: "n/a (the first output holds no class scores)", DebugNote: r.debugNote()}
	if top1, ok := r.Agreement.Top1(); ok {
		page.Top1 = fmt.Sprintf("%.4f (%d of %d)", top1, r.Agreement.top1Same, r.Agreement.top1Rows)
	}
	for _, s := range []struct {
		name string
		side Side
	}{{"A", r.A}, {"B", r.B}} {
		row := htmlSide{Name: s.name, Path: s.side.Path, Precision: s.side.Precision, Runs: len(s.side.LatenciesMS),
			Median: fmt.Sprintf("%.4f", s.side.Latency.Median), P90: fmt.Sprintf("%.4f", s.side.Latency.P90), P99: fmt.Sprintf("%.4f", s.side.Latency.P99)}
		if !math.IsNaN(s.side.Accuracy) {
			row.Accuracy = fmt.Sprintf("%.4f", s.side.Accuracy)
		}
		page.Sides = append(page.Sides, row)
	}
	if r.PerLayer {
		if page.Layers, err = r.sqnrChart(); err != nil {
			return err
		}
		for _, l := range r.Layers {
			page.Rows = append(page.Rows, htmlLayer{Name: l.Name, Node: l.Node, SQNR: FormatDB(l.SQNR)})
		}
	}
	return pageTemplate.Execute(w, page)
}

type htmlPage struct {
	R                      *Report
	Data                   string
	Sides                  []htmlSide
	Speedup, Top1, Cosine  string
	SQNR, MaxAbs           string
	Latency, Layers        template.HTML // inline images
	LatencyNote, DebugNote string
	Rows                   []htmlLayer
}

type htmlSide struct {
	Name, Path, Precision, Median, P90, P99, Accuracy string
	Runs                                              int
}

type htmlLayer struct{ Name, Node, SQNR string }

// latencyChart draws both engines' latency histograms over common bins,
// with their medians. The long tail of a busy machine's runs (past the
// 99.5th percentile, or three times the slower median) would squeeze the
// rest into a few bins, so it is off the chart, and the note says how
// many runs that is.
func (r *Report) latencyChart() (template.HTML, string, error) {
	all := append(slices.Clone(r.A.LatenciesMS), r.B.LatenciesMS...)
	slices.Sort(all)
	lo := all[0]
	hi := min(all[min(len(all)-1, int(0.995*float64(len(all))))], 3*max(r.A.Latency.Median, r.B.Latency.Median))
	if hi <= lo {
		hi = lo + max(lo*0.01, 1e-6)
	}
	const bins = 60
	width := (hi - lo) / bins
	p := plot.New()
	p.Title.Text = "Latency distribution (runs alternate between A and B)"
	p.X.Label.Text = "latency (ms)"
	p.Y.Label.Text = "% of runs"
	p.Legend.Top = true
	off := 0
	top := 0.0
	for _, s := range []struct {
		name string
		side Side
		c    color.Color
	}{{"A", r.A, colorA}, {"B", r.B, colorB}} {
		h := &plotter.Histogram{Width: width, FillColor: s.c, LineStyle: plotter.DefaultLineStyle}
		h.LineStyle.Width = 0
		for i := range bins {
			h.Bins = append(h.Bins, plotter.HistogramBin{Min: lo + float64(i)*width, Max: lo + float64(i+1)*width})
		}
		for _, v := range s.side.LatenciesMS {
			if v > hi {
				off++
				continue
			}
			h.Bins[min(bins-1, int((v-lo)/width))].Weight += 100 / float64(len(s.side.LatenciesMS))
		}
		for _, b := range h.Bins {
			top = max(top, b.Weight)
		}
		p.Add(h)
		p.Legend.Add(fmt.Sprintf("%s (%s): median %.4f ms", s.name, s.side.Precision, s.side.Latency.Median), h)
	}
	for _, s := range []struct {
		side Side
		c    color.NRGBA
	}{{r.A, colorA}, {r.B, colorB}} {
		m := s.side.Latency.Median
		line, err := plotter.NewLine(plotter.XYs{{X: m, Y: 0}, {X: m, Y: top * 1.05}})
		if err != nil {
			return "", "", err
		}
		line.Color = color.NRGBA{R: s.c.R, G: s.c.G, B: s.c.B, A: 255}
		line.Width = vg.Points(2)
		line.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		p.Add(line)
	}
	img, err := render(p, 8*vg.Inch, 4*vg.Inch)
	note := ""
	if off > 0 {
		note = fmt.Sprintf("%d of %d runs, slower than %.4f ms, are off the chart.", off, len(all), hi)
	}
	return img, note, err
}

// sqnrChart draws each tensor's SQNR as a horizontal bar, worst on top,
// colored by band; +Inf (B equals A) is drawn past the largest finite
// value, in gray.
func (r *Report) sqnrChart() (template.HTML, error) {
	n := len(r.Layers)
	if n == 0 {
		return "", nil
	}
	finiteMax := 0.0
	for _, l := range r.Layers {
		if !math.IsInf(l.SQNR, 0) && !math.IsNaN(l.SQNR) {
			finiteMax = max(finiteMax, l.SQNR)
		}
	}
	infAt := math.Max(finiteMax*1.15, finiteMax+10)
	bands := []struct {
		label string
		c     color.Color
		in    func(float64) bool
	}{
		{fmt.Sprintf("below %d dB", sqnrBad), colorBad, func(v float64) bool { return v < sqnrBad }},
		{fmt.Sprintf("%d to %d dB", sqnrBad, sqnrFair), colorFair, func(v float64) bool { return v >= sqnrBad && v < sqnrFair }},
		{fmt.Sprintf("%d dB or more", sqnrFair), colorGood, func(v float64) bool { return v >= sqnrFair && !math.IsInf(v, 1) }},
		{"+Inf (B equals A)", colorExact, func(v float64) bool { return math.IsInf(v, 1) }},
	}
	p := plot.New()
	p.Title.Text = "SQNR of B against A per tensor (dB, higher is better; worst on top)"
	p.X.Label.Text = "SQNR (dB)"
	p.Legend.Top = true
	// Bars go bottom up: the worst (first) layer at the top.
	names := make([]string, n)
	for i, l := range r.Layers {
		names[n-1-i] = "  " + truncate(l.Name, 60) + " " // spaces: gonum measures the text a little short
	}
	for _, band := range bands {
		vals := make(plotter.Values, n)
		any := false
		for i, l := range r.Layers {
			if band.in(l.SQNR) {
				v := l.SQNR
				if math.IsInf(v, 1) {
					v = infAt
				}
				vals[n-1-i], any = v, true
			}
		}
		if !any {
			continue
		}
		bars, err := plotter.NewBarChart(vals, vg.Points(10))
		if err != nil {
			return "", err
		}
		bars.Horizontal = true
		bars.Color = band.c
		bars.LineStyle.Width = 0
		p.Add(bars)
		p.Legend.Add(band.label, bars)
	}
	// Each bar's value at its end; room on the right for those and the legend.
	at := make(plotter.XYs, n)
	text := make([]string, n)
	for i, l := range r.Layers {
		at[n-1-i] = plotter.XY{X: max(0, l.SQNR), Y: float64(n - 1 - i)}
		if math.IsInf(l.SQNR, 1) {
			at[n-1-i].X = infAt
		}
		if math.IsNaN(l.SQNR) || math.IsInf(l.SQNR, -1) {
			at[n-1-i].X = 0
		}
		text[n-1-i] = " " + FormatDB(l.SQNR)
	}
	values, err := plotter.NewLabels(plotter.XYLabels{XYs: at, Labels: text})
	if err != nil {
		return "", err
	}
	for i := range values.TextStyle {
		values.TextStyle[i].YAlign = draw.YCenter
	}
	p.Add(values)
	p.X.Min, p.X.Max = 0, infAt*1.4
	p.NominalY(names...)
	return render(p, 9*vg.Inch, vg.Length(1.6+0.2*float64(n))*vg.Inch)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n+1:]
}

// render draws a plot as a PNG image at twice the usual resolution, inline
// in the page as a data URL: a raster carries its own fonts, where an SVG
// names fonts the reader's browser may not have.
func render(p *plot.Plot, w, h vg.Length) (template.HTML, error) {
	c := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(2*vgimg.DefaultDPI))
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(&buf); err != nil {
		return "", err
	}
	return template.HTML(fmt.Sprintf(`<img alt="%s" width="%d" src="data:image/png;base64,%s">`,
		template.HTMLEscapeString(p.Title.Text), int(w.Points()*96/72), base64.StdEncoding.EncodeToString(buf.Bytes()))), nil
}

var pageTemplate = template.Must(template.New("compare").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>kiln: {{.R.B.Path}} against {{.R.A.Path}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.5em 0; }
td, th { padding: 0.25em 0.8em; border-bottom: 1px solid #ddd; text-align: right; }
td.l, th.l { text-align: left; }
.big { font-size: 1.3em; font-weight: bold; }
.note { color: #666; font-size: 0.9em; }
code { background: #f4f4f4; padding: 0.1em 0.3em; }
img { max-width: 100%; height: auto; }
</style>
</head>
<body>
<h1>B: {{.R.B.Path}} against A: {{.R.A.Path}}</h1>
<p>On {{.Data}}: {{.R.Samples}} samples in {{.R.Runs}} runs, {{.R.Threads}} thread(s).</p>
<table>
<tr><th class="l"></th><th class="l">engine</th><th class="l">precision</th><th>median ms</th><th>p90 ms</th><th>p99 ms</th><th>timed runs</th><th>top-1 accuracy</th></tr>
{{range .Sides}}<tr><td class="l"><b>{{.Name}}</b></td><td class="l">{{.Path}}</td><td class="l">{{.Precision}}</td><td>{{.Median}}</td><td>{{.P90}}</td><td>{{.P99}}</td><td>{{.Runs}}</td><td>{{if .Accuracy}}{{.Accuracy}}{{else}}—{{end}}</td></tr>
{{end}}</table>
<p class="big">Speed-up of B over A: {{.Speedup}}</p>
<p class="note">A's median latency over B's. The engines take turns run by run, so a drift in the machine's speed hits both.{{with .DebugNote}} As measured, {{.}} (cc build --mark-outputs).{{end}}</p>
<h2>Agreement of B with A</h2>
<table>
<tr><td class="l">top-1 agreement</td><td>{{.Top1}}</td></tr>
<tr><td class="l">cosine similarity</td><td>{{.Cosine}}</td></tr>
<tr><td class="l">SQNR</td><td>{{.SQNR}} dB</td></tr>
<tr><td class="l">max abs error</td><td>{{.MaxAbs}}</td></tr>
</table>
<p class="note">Over every output element of every sample. SQNR is 10·log10(Σa²/Σ(a−b)²): +Inf when B equals A.</p>
<h2>Latency</h2>
{{.Latency}}
{{if .LatencyNote}}<p class="note">{{.LatencyNote}}</p>{{end}}
{{if .R.PerLayer}}<h2>Per tensor</h2>
{{if .R.Quantized}}<p>Each of B's quantized tensors, dequantized, against A's tensor of the same value.</p>{{else}}<p>B has no quantized tensors: every tensor both engines store, by value name.</p>{{end}}
{{.Layers}}
{{if .R.KeepFP32}}<p>To keep the worst in float: <code>cc quantize --keep-fp32 {{range $i, $n := .R.KeepFP32}}{{if $i}},{{end}}{{$n}}{{end}}</code></p>{{end}}
<table>
<tr><th>SQNR dB</th><th class="l">tensor</th><th class="l">node</th></tr>
{{range .Rows}}<tr><td>{{.SQNR}}</td><td class="l">{{.Name}}</td><td class="l">{{.Node}}</td></tr>
{{end}}</table>
{{if .R.Unmatched}}<p class="note">Not compared (no counterpart in A): {{range $i, $n := .R.Unmatched}}{{if $i}}, {{end}}{{$n}}{{end}}</p>{{end}}
{{end}}
</body>
</html>
`))
