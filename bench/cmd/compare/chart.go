package main

import (
	"fmt"
	"image/color"
	"io"
	"os"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/ratedb/ratedb/bench"
)

// palette gives each limiter a fixed colour; ratedb's two rows come first.
var palette = []color.RGBA{
	{0xd6, 0x27, 0x28, 0xff}, {0xff, 0x98, 0x96, 0xff}, {0x7f, 0x7f, 0x7f, 0xff}, {0x1f, 0x77, 0xb4, 0xff},
	{0x2c, 0xa0, 0x2c, 0xff}, {0x94, 0x67, 0xbd, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x8c, 0x56, 0x4b, 0xff},
}

// chart draws ns per hit by workload (top) and heap bytes per key (bottom)
// as grouped bars, one colour per limiter, into an SVG file, or a PNG file
// if path ends in ".png".
func (s *suite) chart(path string) error {
	top := plot.New()
	top.Title.Text = fmt.Sprintf("ns per hit, median of %d runs (lower is better)", s.o.runs)
	top.Y.Label.Text = "ns/op"
	names := make([]string, len(workloads))
	for i, w := range workloads {
		names[i] = w.title
	}
	n := len(bench.Factories)
	width := vg.Points(9)
	for i, f := range bench.Factories {
		vals := make(plotter.Values, len(workloads))
		for j, w := range workloads {
			vals[j] = median(s.ns(f.Name, w.id))
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return err
		}
		bars.Color = palette[i%len(palette)]
		bars.LineStyle.Width = 0
		bars.Offset = width * vg.Length(float64(i)-float64(n-1)/2)
		top.Add(bars)
		top.Legend.Add(f.Name, bars)
	}
	top.NominalX(names...)
	top.Legend.Top = true
	top.Legend.Left = true
	top.Y.Min = 0

	bottom := plot.New()
	bottom.Title.Text = fmt.Sprintf("retained heap bytes per key at %d keys (lower is better)", s.o.keys)
	bottom.Y.Label.Text = "B/key"
	vals := make(plotter.Values, n)
	labels := make([]string, n)
	for i, f := range bench.Factories {
		vals[i] = median(s.bytesPerKey(f.Name))
		labels[i] = f.Name
	}
	for i := range bench.Factories {
		one := make(plotter.Values, n)
		one[i] = vals[i]
		bars, err := plotter.NewBarChart(one, vg.Points(30))
		if err != nil {
			return err
		}
		bars.Color = palette[i%len(palette)]
		bars.LineStyle.Width = 0
		bottom.Add(bars)
	}
	bottom.NominalX(labels...)
	bottom.Y.Min = 0

	w, h := 11*vg.Inch, 9*vg.Inch
	var c interface {
		vg.CanvasSizer
		io.WriterTo
	}
	if strings.HasSuffix(path, ".png") {
		c = vgimg.PngCanvas{Canvas: vgimg.New(w, h)}
	} else {
		c = vgsvg.New(w, h)
	}
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Points(12), PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(6)}
	top.Draw(tiles.At(dc, 0, 0))
	bottom.Draw(tiles.At(dc, 0, 1))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
