package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// series is one line of a chart.
type series struct {
	name   string
	style  int // colour and marker
	xs, ys []float64
}

// charts draws throughput.png and, with the scaling curves, scaling.png into
// dir, and returns their file names.
func (r *report) charts(dir string) ([]string, error) {
	var names []string
	if len(r.Sets) > 0 {
		if err := r.throughputChart(filepath.Join(dir, "throughput.png")); err != nil {
			return nil, err
		}
		names = append(names, "throughput.png")
	}
	if len(r.Items) > 0 || len(r.Segs) > 0 {
		if err := r.scalingChart(filepath.Join(dir, "scaling.png")); err != nil {
			return nil, err
		}
		names = append(names, "scaling.png")
	}
	return names, nil
}

var chartLabel = map[string]string{
	sysZstd:       "zstd, 1 core (ceiling)",
	sysDLQ:        "dlqdump → fs",
	sysDLQS3:      "dlqdump → S3 (versitygw)",
	sysDQ:         "go-diskqueue",
	sysDLQDurable: "dlqdump → fs, Durable",
	sysDQSync:     "go-diskqueue, SyncEvery 1",
}

var chartStyle = map[string]int{sysZstd: 0, sysDLQ: 1, sysDLQS3: 2, sysDQ: 3, sysDLQDurable: 4, sysDQSync: 5}

func (r *report) throughputChart(path string) error {
	var ticks []string
	for _, s := range r.Sets {
		ticks = append(ticks, fmt.Sprintf("%s (%s)", s.Name, human(int64(s.Mean))))
	}
	build := func(title, ylabel string, order []string, pick func(*setResult, string) *result, value func(*result) float64) (*plot.Plot, error) {
		var ss []series
		for _, sys := range order {
			sr := series{name: chartLabel[sys], style: chartStyle[sys]}
			for i, s := range r.Sets {
				if res := pick(s, sys); res != nil && value(res) > 0 {
					sr.xs = append(sr.xs, float64(i))
					sr.ys = append(sr.ys, value(res))
				}
			}
			if len(sr.xs) > 0 {
				ss = append(ss, sr)
			}
		}
		p, err := linePlot(title, "payload (mean item size)", ylabel, ss, true)
		if err != nil {
			return nil, err
		}
		p.NominalX(ticks...)
		p.X.Min, p.X.Max = -0.3, float64(len(ticks))-0.7
		return p, nil
	}
	dump := func(s *setResult, sys string) *result { return s.Dump[sys] }
	restore := func(s *setResult, sys string) *result { return s.Restore[sys] }
	mbps := func(x *result) float64 { return x.mbps() }
	rate := func(x *result) float64 { return x.rate() }
	var plots [2][2]*plot.Plot
	var err error
	if plots[0][0], err = build("Dump: MB/s of payload", "MB/s (log)", dumpOrder, dump, mbps); err != nil {
		return err
	}
	if plots[0][1], err = build("Restore / read-back: MB/s of payload", "MB/s (log)", restoreOrder, restore, mbps); err != nil {
		return err
	}
	if plots[1][0], err = build("Dump: items/s", "items/s (log)", dumpOrder, dump, rate); err != nil {
		return err
	}
	if plots[1][1], err = build("Restore / read-back: items/s", "items/s (log)", restoreOrder, restore, rate); err != nil {
		return err
	}
	return savePNG(path, 30*vg.Centimeter, 24*vg.Centimeter, [][]*plot.Plot{plots[0][:], plots[1][:]})
}

func (r *report) scalingChart(path string) error {
	var row []*plot.Plot
	if len(r.Items) > 0 {
		d := series{name: "dump", style: 1}
		rs := series{name: "restore", style: 3}
		for _, it := range r.Items {
			p := it.ScaleN
			d.xs, d.ys = append(d.xs, float64(p.N)), append(d.ys, perItem(p.Dump, p.N))
			rs.xs, rs.ys = append(rs.xs, float64(p.N)), append(rs.ys, perItem(p.Restore, p.N))
		}
		p, err := linePlot("dlqdump → fs: cost per item vs items (typical)", "items dumped, then restored (log)", "ns per item (log)", []series{d, rs}, true)
		if err != nil {
			return err
		}
		logX(p)
		row = append(row, p)
	}
	if len(r.Segs) > 0 {
		l := series{name: "listing, per segment", style: 0}
		c := series{name: "Claim + Release", style: 2}
		rs := series{name: "restore, per segment", style: 3}
		for _, it := range r.Segs {
			p := it.Segments
			x := float64(p.Segments)
			l.xs, l.ys = append(l.xs, x), append(l.ys, us(p.List)/x)
			c.xs, c.ys = append(c.xs, x), append(c.ys, us(p.Claim))
			rs.xs, rs.ys = append(rs.xs, x), append(rs.ys, us(p.Restore))
		}
		p, err := linePlot("fs.Reader: cost per segment vs segments in the directory", "segments in the directory (log)", "µs (log)", []series{l, c, rs}, true)
		if err != nil {
			return err
		}
		logX(p)
		row = append(row, p)
	}
	return savePNG(path, 30*vg.Centimeter, 12*vg.Centimeter, [][]*plot.Plot{row})
}

func logX(p *plot.Plot) {
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = shortTicks{plot.LogTicks{Prec: -1}}
}

// shortTicks labels log ticks 100, 1k, 10k, 1M... instead of 1e+06.
type shortTicks struct{ plot.Ticker }

func (t shortTicks) Ticks(min, max float64) []plot.Tick {
	ts := t.Ticker.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = short(ts[i].Value)
		}
	}
	return ts
}

func short(v float64) string {
	switch {
	case v >= 1e9:
		return strconv.FormatFloat(v/1e9, 'g', 3, 64) + "G"
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 3, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'g', 3, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func linePlot(title, xlabel, ylabel string, ss []series, logY bool) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = shortTicks{plot.LogTicks{Prec: -1}}
		// Leave room above and below so lines are not on the frame.
		lo, hi := 0.0, 0.0
		for _, s := range ss {
			for _, y := range s.ys {
				if lo == 0 || y < lo {
					lo = y
				}
				hi = max(hi, y)
			}
		}
		if lo > 0 {
			p.Y.Min, p.Y.Max = lo/2, hi*12 // the top decade for the legend
		}
	}
	for _, s := range ss {
		xys := make(plotter.XYs, len(s.xs))
		for i := range s.xs {
			xys[i].X, xys[i].Y = s.xs[i], s.ys[i]
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		l.Color = plotutil.Color(s.style)
		l.Width = vg.Points(1.5)
		pts.Color = plotutil.Color(s.style)
		pts.Shape = plotutil.Shape(s.style)
		p.Add(l, pts)
		p.Legend.Add(s.name, l, pts)
	}
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	return p, nil
}

func savePNG(path string, w, h vg.Length, plots [][]*plot.Plot) error {
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
	dc := draw.New(img)
	cols := 0
	for _, row := range plots {
		cols = max(cols, len(row))
	}
	t := draw.Tiles{Rows: len(plots), Cols: cols, PadX: vg.Centimeter, PadY: vg.Centimeter,
		PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 3}
	canvases := plot.Align(plots, t, dc)
	for i, row := range plots {
		for j, p := range row {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
