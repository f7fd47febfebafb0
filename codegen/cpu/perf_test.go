package cpu

import (
	"flag"
	"math/rand"
	"testing"
	"time"

	"github.com/kiln-ml/kiln/ir"
)

var perf = flag.Bool("perf", false, "run the single-kernel GFLOP/s measurements")

// TestPerfConv reports the GFLOP/s of single convolutions (go test -perf).
func TestPerfConv(t *testing.T) {
	if !*perf {
		t.Skip("GFLOP/s measurements run with -perf")
	}
	needLLC(t)
	r := rand.New(rand.NewSource(1))
	for _, c := range []struct{ C, H, OC, k, s int64 }{{64, 56, 64, 3, 1}, {256, 14, 256, 3, 1}, {512, 7, 512, 3, 1}, {64, 56, 128, 1, 1}, {3, 224, 64, 7, 2},
		{32, 112, 16, 1, 1}, {16, 112, 96, 1, 1}, {512, 13, 1000, 1, 1}, {320, 7, 1280, 1, 1}} {
		g := ir.NewGraph("c")
		x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, c.C, c.H, c.H)))
		w := g.AddInitializer("w", randTensor(r, c.OC, c.C, c.k, c.k))
		y := g.Apply("Conv", []*ir.Value{x, w}, ir.AttrIs("pads", c.k/2, c.k/2, c.k/2, c.k/2), ir.AttrIs("strides", c.s, c.s))
		g.SetOutputs(y)
		m := ir.NewModel(g, 13)
		res, err := Compile(m, Options{})
		if err != nil {
			t.Fatal(err)
		}
		e, _ := Load(res)
		feeds := map[string]*ir.Tensor{"x": randTensor(r, 1, c.C, c.H, c.H)}
		arena := e.NewArena()
		e.Run(feeds, 1, arena)
		// The fastest of many runs: robust to other work on the machine.
		dt := time.Hour
		for i := 0; i < 50; i++ {
			st := time.Now()
			e.Run(feeds, 1, arena)
			dt = min(dt, time.Since(st))
		}
		oh := dimsOf(y)[2]
		flops := 2 * c.OC * oh * oh * c.C * c.k * c.k
		t.Logf("%+v: %v, %.1f GFLOP/s", c, dt, float64(flops)/dt.Seconds()/1e9)
		e.Close()
	}
}
