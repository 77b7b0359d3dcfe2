package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"image/color"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/dstlgo/dstl/internal/benchreport"
)

// benchRun is one backend's report in a bench results file.
type benchRun struct {
	Name   string
	Report benchreport.Report
}

// decodeBenchRuns decodes a bench JSON report: one report (dstl bench
// --save), or an object of reports by run name (make bench), kept in the
// order of the file.
func decodeBenchRuns(data []byte) ([]benchRun, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("not a bench report: %w", err)
	}
	if _, ok := probe["machine"]; ok {
		var r benchreport.Report
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("not a bench report: %w", err)
		}
		return []benchRun{{Name: cmp.Or(r.Backend, "bench"), Report: r}}, nil
	}
	// The keys in the file's order.
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	var runs []benchRun
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string)
		var r benchreport.Report
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("run %q: not a bench report: %w", name, err)
		}
		if r.Backend == "" {
			return nil, fmt.Errorf("run %q: not a bench report: no backend", name)
		}
		runs = append(runs, benchRun{Name: name, Report: r})
	}
	if len(runs) == 0 {
		return nil, errors.New("no bench report in it")
	}
	return runs, nil
}

// benchChart is one chart of the index.
type benchChart struct {
	File, Title, Caption string
}

// chartWidth and chartHeight are the size of every chart.
const (
	chartWidth  = 7 * vg.Inch
	chartHeight = 4 * vg.Inch
)

// writeBenchCharts writes the charts of runs and index.html into dir and
// returns the charts drawn.
func writeBenchCharts(runs []benchRun, in, dir string) ([]benchChart, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var charts []benchChart
	for _, c := range []struct {
		file, title, caption string
		make                 func([]benchRun) (*plot.Plot, error)
	}{
		{"b-upload-ratio.svg", "(b) upload: persist → confirm ÷ the backend's Put",
			"One writer's persist → confirm time over the backend's Put of as many bytes, the median of the sets (target ≤ 1.10, 1.25 on local disk; lower is better).", uploadRatioChart},
		{"c-batching.svg", "(c) batching: objects per second",
			"Objects written per second as 1 to 256 writers persist together at a fixed rate: flat is the target.", batchingChart},
		{"d-recovery-ratio.svg", "(d) recovery: engine ÷ SDK get",
			"A full recovery's read throughput over the SDK's get of the same objects (target ≥ 0.9; 0.5 on local disk).", recoveryChart},
		{"e-persist-latency.svg", "(e) persist latency",
			"Persist to handle: the bar is p50, the whisker reaches p99; in (b) one writer with the middle object size, in (c) the most writers.", latencyChart},
		{"f-sustained-ratio.svg", "(f) sustained logging: engine ÷ the backend's parallel Put",
			"Changes' bytes of confirmed checkpoints per second over the backend's parallel Put of objects of the same size (target ≥ 0.95).", sustainedChart},
	} {
		p, err := c.make(runs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.file, err)
		}
		if p == nil {
			continue // the reports have no such section
		}
		p.Title.Text = c.title
		if err := p.Save(chartWidth, chartHeight, filepath.Join(dir, c.file)); err != nil {
			return nil, fmt.Errorf("%s: %w", c.file, err)
		}
		charts = append(charts, benchChart{File: c.file, Title: c.title, Caption: c.caption})
	}
	if err := writeBenchIndex(runs, in, dir, charts); err != nil {
		return nil, err
	}
	return charts, nil
}

var benchIndexTemplate = template.Must(template.New("index").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<link rel="icon" href="data:,">
<title>{{.Title}}</title>
<style>
body { font-family: sans-serif; max-width: 60em; margin: 2em auto; padding: 0 1em; color: #222; }
figure { margin: 2em 0; }
img { max-width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { color: #555; font-size: 0.9em; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p>{{.Machine}}</p>
<p>Runs: {{range $i, $r := .Runs}}{{if $i}}, {{end}}{{$r}}{{end}}.
{{- if .JSON}} The report: <a href="{{.JSON}}">JSON</a>{{if .Text}}, <a href="{{.Text}}">text</a>{{end}}.{{end}}</p>
{{range .Charts}}<figure>
<img src="{{.File}}" alt="{{.Title}}">
<figcaption>{{.Caption}}</figcaption>
</figure>
{{end}}</body>
</html>
`))

// writeBenchIndex writes index.html, which shows the charts and links the
// JSON report (and the text report beside it, if any).
func writeBenchIndex(runs []benchRun, in, dir string, charts []benchChart) error {
	first := runs[0].Report
	data := struct {
		Title, Machine, JSON, Text string
		Runs                       []string
		Charts                     []benchChart
	}{Title: "dstl bench, " + first.Start.Format("2006-01-02"), Charts: charts}
	m := first.Machine
	data.Machine = fmt.Sprintf("%s, %d cores, %s of memory, %s, %s", m.CPU, m.Cores, benchreport.FormatBytes(m.Memory), m.GoVersion, m.OS)
	for _, r := range runs {
		data.Runs = append(data.Runs, fmt.Sprintf("%s (%s)", r.Name, r.Report.Backend))
	}
	if absIn, err := filepath.Abs(in); err == nil {
		if absDir, err := filepath.Abs(dir); err == nil {
			if rel, err := filepath.Rel(absDir, absIn); err == nil {
				data.JSON = filepath.ToSlash(rel)
				txt := strings.TrimSuffix(absIn, filepath.Ext(absIn)) + ".txt"
				if _, err := os.Stat(txt); err == nil {
					data.Text = strings.TrimSuffix(data.JSON, filepath.Ext(data.JSON)) + ".txt"
				}
			}
		}
	}
	var buf bytes.Buffer
	if err := benchIndexTemplate.Execute(&buf, data); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "index.html"), buf.Bytes(), 0o644)
}

// chartColors are the series' colours (colour-blind safe, Okabe and Ito).
var chartColors = []color.Color{
	color.RGBA{0, 114, 178, 255}, color.RGBA{230, 159, 0, 255}, color.RGBA{0, 158, 115, 255},
	color.RGBA{204, 121, 167, 255}, color.RGBA{86, 180, 233, 255}, color.RGBA{213, 94, 0, 255},
	color.RGBA{240, 228, 66, 255}, color.RGBA{0, 0, 0, 255},
}

// chartGlyphs are the series' point shapes, so that lines on top of each
// other still show.
var chartGlyphs = []draw.GlyphDrawer{draw.RingGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{}, draw.CircleGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{}}

// chartColor is the colour of series i.
func chartColor(i int) color.Color { return chartColors[i%len(chartColors)] }

// groupedBars draws one bar per series in each group: values[s][g] is
// series s in group g (NaN: no bar). A target > 0 is drawn as a dashed
// line.
func groupedBars(groups, series []string, values [][]float64, ylabel string, target float64) (*plot.Plot, error) {
	p := plot.New()
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.Legend.Left = false
	w := vg.Points(min(60, 300/float64(max(1, len(groups)*len(series)))))
	for s, name := range series {
		vs := make(plotter.Values, len(groups))
		for g := range groups {
			vs[g] = values[s][g]
			if math.IsNaN(vs[g]) {
				vs[g] = 0
			}
		}
		b, err := plotter.NewBarChart(vs, w)
		if err != nil {
			return nil, err
		}
		b.LineStyle.Width = 0
		b.Color = chartColor(s)
		b.Offset = vg.Length(float64(s)-float64(len(series)-1)/2) * w
		p.Add(b)
		p.Legend.Add(name, b)
	}
	p.NominalX(groups...)
	p.X.Min, p.X.Max = -0.5, float64(len(groups))-0.5
	if target > 0 {
		addTarget(p, target, len(groups))
	}
	p.Y.Min = 0
	top := target
	for _, vs := range values {
		for _, v := range vs {
			if !math.IsNaN(v) {
				top = max(top, v)
			}
		}
	}
	lines := len(series)
	if target > 0 {
		lines++
	}
	legendRoom(p, top, lines)
	p.Add(plotter.NewGrid())
	return p, nil
}

// legendRoom sets the top of the Y axis so that the legend's lines fit
// above the data, which reaches top.
func legendRoom(p *plot.Plot, top float64, lines int) {
	share := (float64(lines)*13 + 12) / 220 // of the plot area's height
	p.Y.Max = max(top, 1e-9) / (1 - min(share, 0.6))
}

// addTarget draws a dashed horizontal line at y across n groups.
func addTarget(p *plot.Plot, y float64, n int) {
	l, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: y}, {X: float64(n) - 0.5, Y: y}})
	if err != nil {
		return
	}
	l.Color = color.RGBA{200, 0, 0, 255}
	l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(l)
	p.Legend.Add("target "+strconv.FormatFloat(y, 'g', -1, 64), l)
}

func runNames(runs []benchRun) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.Name
	}
	return out
}

// uploadRatioChart: (b), groups object sizes, series backends.
func uploadRatioChart(runs []benchRun) (*plot.Plot, error) {
	// Reports made before (b) measured persist -> confirm over the
	// backend's Put hold another ratio under the same key: the engine's
	// throughput over the SDK's put. They are not drawn.
	current := func(u benchreport.Upload) bool { return u.BackendPutP50Ms > 0 }
	sizes := map[int64]bool{}
	for _, r := range runs {
		for _, u := range r.Report.Upload {
			if current(u) {
				sizes[nominalSize(u.ObjectSize)] = true
			}
		}
	}
	if len(sizes) == 0 {
		return nil, nil
	}
	keys := slices.Sorted(maps.Keys(sizes))
	groups := make([]string, len(keys))
	for i, k := range keys {
		groups[i] = benchreport.FormatBytes(k) + " objects"
	}
	values := make([][]float64, len(runs))
	for s, r := range runs {
		values[s] = nanSlice(len(keys))
		for _, u := range r.Report.Upload {
			if current(u) {
				values[s][slices.Index(keys, nominalSize(u.ObjectSize))] = u.Ratio
			}
		}
	}
	return groupedBars(groups, runNames(runs), values, "persist → confirm ÷ backend Put", 1.10)
}

// nominalSize rounds an object size to the power of two near it (the
// engine's objects are a little smaller than the size asked for).
func nominalSize(n int64) int64 {
	if n <= 0 {
		return n
	}
	return int64(math.Pow(2, math.Round(math.Log2(float64(n)))))
}

func nanSlice(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = math.NaN()
	}
	return out
}

// batchingChart: (c), objects per second against writers, a line per
// backend, the writers on a log scale.
func batchingChart(runs []benchRun) (*plot.Plot, error) {
	p := plot.New()
	p.X.Label.Text = "writers persisting together"
	p.Y.Label.Text = "objects per second"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = writerTicks{}
	p.Legend.Top = true
	drawn := false
	for s, r := range runs {
		var xys plotter.XYs
		for _, row := range r.Report.Batching.Rows {
			if row.Writers > 0 {
				xys = append(xys, plotter.XY{X: float64(row.Writers), Y: row.ObjectsPerSec})
			}
		}
		if len(xys) == 0 {
			continue
		}
		drawn = true
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		l.Color, pts.Color = chartColor(s), chartColor(s)
		l.Width = vg.Points(1.5)
		pts.Shape = chartGlyphs[s%len(chartGlyphs)]
		pts.Radius = vg.Points(2.5 + float64(len(runs)-s))
		p.Add(l, pts)
		p.Legend.Add(r.Name, l, pts)
	}
	if !drawn {
		return nil, nil
	}
	p.Y.Min = 0
	legendRoom(p, max(p.Y.Max, 1), len(runs))
	p.Add(plotter.NewGrid())
	return p, nil
}

// writerTicks marks the writer counts: powers of two.
type writerTicks struct{}

func (writerTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for v := 1.0; v <= hi*1.0001; v *= 2 {
		if v >= lo*0.9999 {
			ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', 0, 64)})
		}
	}
	return ts
}

// recoveryChart: (d), a bar per backend.
func recoveryChart(runs []benchRun) (*plot.Plot, error) {
	values := [][]float64{make([]float64, len(runs))}
	drawn := false
	for i, r := range runs {
		values[0][i] = r.Report.Recovery.Ratio
		drawn = drawn || r.Report.Recovery.Ratio > 0
	}
	if !drawn {
		return nil, nil
	}
	return groupedBars(runNames(runs), []string{"full recovery ÷ SDK get"}, values, "engine ÷ SDK get", 0.9)
}

// latencyChart: (e), p50 bars with whiskers to p99, per backend, for (b)
// and (c).
func latencyChart(runs []benchRun) (*plot.Plot, error) {
	type series struct {
		name     string
		p50, p99 []float64
	}
	var b, c series
	// The legend names the object size and the writers of the rows
	// drawn: each run's own, where the runs differ.
	var sizes, writers []string
	for _, r := range runs {
		bp50, bp99, cp50, cp99 := math.NaN(), math.NaN(), math.NaN(), math.NaN()
		if up := r.Report.Upload; len(up) > 0 {
			u := up[len(up)/2]
			bp50, bp99 = u.PersistP50Ms, u.PersistP99Ms
			if sz := benchreport.FormatBytes(nominalSize(u.ObjectSize)); !slices.Contains(sizes, sz) {
				sizes = append(sizes, sz)
			}
		}
		if rows := r.Report.Batching.Rows; len(rows) > 0 {
			row := rows[len(rows)-1]
			cp50, cp99 = row.PersistP50Ms, row.PersistP99Ms
			if n := strconv.Itoa(row.Writers); !slices.Contains(writers, n) {
				writers = append(writers, n)
			}
		}
		b.p50, b.p99 = append(b.p50, bp50), append(b.p99, bp99)
		c.p50, c.p99 = append(c.p50, cp50), append(c.p99, cp99)
	}
	b.name, c.name = "(b) one writer", "(c) batching"
	switch {
	case len(sizes) == 1:
		b.name += ", " + sizes[0] + " objects"
	case len(sizes) > 1:
		b.name += ", " + strings.Join(sizes, " / ") + " objects (by run)"
	}
	switch {
	case len(writers) == 1:
		c.name = "(c) " + writers[0] + " writers batched"
	case len(writers) > 1:
		c.name = "(c) " + strings.Join(writers, " / ") + " writers batched (by run)"
	}
	p, err := groupedBars(runNames(runs), []string{b.name, c.name}, [][]float64{b.p50, c.p50}, "milliseconds (p50, whisker to p99)", 0)
	if err != nil {
		return nil, err
	}
	w := vg.Points(min(60, 300/float64(max(1, len(runs)*2))))
	top := 0.0
	for s, se := range []series{b, c} {
		wh := whiskers{off: vg.Length(float64(s)-0.5) * w}
		for g := range runs {
			if !math.IsNaN(se.p50[g]) && !math.IsNaN(se.p99[g]) {
				wh.xys = append(wh.xys, plotter.XY{X: float64(g), Y: se.p50[g]})
				wh.hi = append(wh.hi, max(se.p50[g], se.p99[g]))
				top = max(top, se.p99[g], se.p50[g])
			}
		}
		p.Add(wh)
	}
	legendRoom(p, top, 2)
	return p, nil
}

// whiskers draws a vertical line from each point up to its high value,
// shifted by off (to stand on a bar of a group).
type whiskers struct {
	xys plotter.XYs
	hi  []float64
	off vg.Length
}

// Plot draws the whiskers.
func (wh whiskers) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	style := draw.LineStyle{Color: color.Black, Width: vg.Points(1)}
	for i, xy := range wh.xys {
		x := trX(xy.X) + wh.off
		lo, hi := trY(xy.Y), trY(wh.hi[i])
		c.StrokeLines(style, c.ClipLinesY([]vg.Point{{X: x, Y: lo}, {X: x, Y: hi}})...)
		c.StrokeLine2(style, x-vg.Points(3), hi, x+vg.Points(3), hi)
	}
}

// DataRange makes room for the highest whisker.
func (wh whiskers) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax, ymin, ymax = math.Inf(1), math.Inf(-1), 0, 0
	for i, xy := range wh.xys {
		xmin, xmax = min(xmin, xy.X), max(xmax, xy.X)
		ymax = max(ymax, wh.hi[i])
	}
	if len(wh.xys) == 0 {
		xmin, xmax = 0, 0
	}
	return xmin, xmax, ymin, ymax
}

// sustainedChart: (f), groups writer counts, series backends.
func sustainedChart(runs []benchRun) (*plot.Plot, error) {
	counts := map[int]bool{}
	for _, r := range runs {
		if r.Report.Sustained != nil {
			for _, row := range r.Report.Sustained.Rows {
				counts[row.Writers] = true
			}
		}
	}
	if len(counts) == 0 {
		return nil, nil
	}
	keys := slices.Sorted(maps.Keys(counts))
	groups := make([]string, len(keys))
	for i, k := range keys {
		groups[i] = fmt.Sprintf("%d writers", k)
	}
	var names []string
	var values [][]float64
	for _, r := range runs {
		if r.Report.Sustained == nil {
			continue
		}
		vs := nanSlice(len(keys))
		for _, row := range r.Report.Sustained.Rows {
			vs[slices.Index(keys, row.Writers)] = row.Ratio
		}
		names, values = append(names, r.Name), append(values, vs)
	}
	return groupedBars(groups, names, values, "engine ÷ the backend's parallel Put", 0.95)
}
