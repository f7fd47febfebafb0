package cpu

import (
	"fmt"
	"math/rand"
	"runtime"
	"testing"
	"unsafe"

	"github.com/kiln-ml/kiln/ir"
)

// Benchmarks of int8 convolution layers of resnet18's shapes against the
// float32 kernels of the same shape, at one thread: each reports GMAC/s
// (multiply-adds of the direct convolution per second, whatever the
// algorithm). go test ./codegen/cpu -run '^$' -bench QConv

type benchConv struct {
	C, H, OC, k, s int64
	dw             bool // depthwise (group = C = OC)
}

func (c benchConv) String() string {
	if c.dw {
		return fmt.Sprintf("dw%dx%d_C%d_H%d_s%d", c.k, c.k, c.C, c.H, c.s)
	}
	return fmt.Sprintf("%dx%d_C%d_H%d_OC%d_s%d", c.k, c.k, c.C, c.H, c.OC, c.s)
}

func (c benchConv) group() int64 {
	if c.dw {
		return c.C
	}
	return 1
}

func (c benchConv) outH() int64 { return (c.H+2*(c.k/2)-c.k)/c.s + 1 }

func (c benchConv) macs() float64 {
	oh := c.outH()
	return float64(c.OC * oh * oh * c.C / c.group() * c.k * c.k)
}

var resnet18Convs = []benchConv{
	{64, 56, 64, 3, 1, false}, {128, 28, 128, 3, 1, false}, {256, 14, 256, 3, 1, false}, {512, 7, 512, 3, 1, false},
	{64, 56, 128, 3, 2, false}, {3, 224, 64, 7, 2, false},
	{64, 56, 128, 1, 2, false}, {128, 28, 256, 1, 2, false}, {256, 14, 512, 1, 2, false},
}

// mobilenetConvs are mobilenet_v2's depthwise and 1×1 shapes.
var mobilenetConvs = []benchConv{
	{32, 112, 32, 3, 1, true}, {96, 112, 96, 3, 2, true}, {144, 56, 144, 3, 1, true}, {576, 14, 576, 3, 1, true},
	{32, 112, 16, 1, 1, false}, {16, 112, 96, 1, 1, false}, {144, 56, 24, 1, 1, false}, {576, 14, 96, 1, 1, false},
}

// qconvBenchModel is the layer as a qconv group: u8 in, per-channel s8
// weights, int32 bias, Relu, u8 out.
func qconvBenchModel(_ testing.TB, c benchConv) (*ir.Model, map[string]*ir.Tensor) {
	q := &qtest{g: ir.NewGraph("bench"), r: rand.New(rand.NewSource(1)), feeds: map[string]*ir.Tensor{}}
	x := q.input("x", ir.Uint8, 1, c.C, c.H, c.H)
	sx := float32(0.02)
	xf := q.dq(x, sx, 128)
	sw := q.scales(c.OC, true)
	wf, _ := q.weights(sw, 0, c.OC, c.C/c.group(), c.k, c.k)
	p := c.k / 2
	y := q.g.Apply("Conv", []*ir.Value{xf, wf, q.bias(sx, sw, c.OC)},
		ir.AttrIs("pads", p, p, p, p), ir.AttrIs("strides", c.s, c.s), ir.AttrI("group", c.group()))
	y = q.g.Apply("Relu", []*ir.Value{y})
	y = q.g.Apply("QuantizeLinear", []*ir.Value{y, q.scalar(0.05), q.zp(ir.Uint8, 0)})
	y.Name = "y"
	q.g.SetOutputs(y)
	q.group("qconv", "dq-input", "dq-weight", "dq-bias", "base", "activation", "q-output")
	m := ir.NewModel(q.g, 21)
	m.OpsetImports = append(m.OpsetImports, ir.OpsetImport{Domain: ir.KilnDomain, Version: 1})
	return m, q.feeds
}

func fconvBenchModel(b *testing.B, c benchConv) (*ir.Model, map[string]*ir.Tensor) {
	r := rand.New(rand.NewSource(1))
	g := ir.NewGraph("bench")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, c.C, c.H, c.H)))
	p := c.k / 2
	y := g.Apply("Conv", []*ir.Value{x, g.AddInitializer("w", randTensor(r, c.OC, c.C/c.group(), c.k, c.k)), g.AddInitializer("b", randTensor(r, c.OC))},
		ir.AttrIs("pads", p, p, p, p), ir.AttrIs("strides", c.s, c.s), ir.AttrI("group", c.group()))
	y = g.Apply("Relu", []*ir.Value{y})
	y.Name = "y"
	g.SetOutputs(y)
	m := optimize(b, ir.NewModel(g, 13))
	return m, map[string]*ir.Tensor{"x": randTensor(r, 1, c.C, c.H, c.H)}
}

func benchEngine(b *testing.B, m *ir.Model, feeds map[string]*ir.Tensor, macs float64) {
	needLLC(b)
	e := compileLoad(b, m, Options{})
	arena := e.NewArena()
	if _, err := e.Run(feeds, 1, arena); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.Run(feeds, 1, arena)
	}
	b.ReportMetric(macs*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
}

func BenchmarkQConv(b *testing.B) {
	for _, c := range append(resnet18Convs, mobilenetConvs...) {
		b.Run("int8_"+c.String(), func(b *testing.B) {
			m, feeds := qconvBenchModel(b, c)
			benchEngine(b, m, feeds, c.macs())
		})
		b.Run("fp32_"+c.String(), func(b *testing.B) {
			m, feeds := fconvBenchModel(b, c)
			benchEngine(b, m, feeds, c.macs())
		})
	}
}

// stepCycles runs e once through its profiling entry point (static
// shapes) and returns each step's cycles on thread 0.
func stepCycles(e *Engine, feeds map[string]*ir.Tensor) ([]uint64, error) {
	r := e.Result
	io := make([]unsafe.Pointer, len(r.Inputs)+len(r.Outputs))
	var keep []*ir.Tensor
	for _, in := range r.Inputs {
		t := feeds[in.Name]
		io[in.Index] = unsafe.Pointer(&t.Raw[0])
		keep = append(keep, t)
	}
	for _, o := range r.Outputs {
		t := ir.NewTensor(o.DType, o.Dims...)
		io[o.Index] = unsafe.Pointer(&t.Raw[0])
		keep = append(keep, t)
	}
	times := make([]uint64, len(r.Kernels)+1)
	arena := e.NewArena()
	if err := e.lib.RunProfile(1, e.weightsPtr(), unsafe.Pointer(&arena[0]), io, times); err != nil {
		return nil, err
	}
	runtime.KeepAlive(keep)
	out := make([]uint64, len(r.Kernels))
	for i := range out {
		out[i] = times[i+1] - times[i]
	}
	return out, nil
}

// TestQConvSteps logs each step's share of an int8 layer's time (go test
// -perf).
func TestQConvSteps(t *testing.T) {
	if !*perf {
		t.Skip("measurements run with -perf")
	}
	needLLC(t)
	for _, c := range append(resnet18Convs, mobilenetConvs...) {
		m, feeds := qconvBenchModel(nil, c)
		res, err := Compile(m, Options{})
		if err != nil {
			t.Fatal(err)
		}
		e, err := Load(res)
		if err != nil {
			t.Fatal(err)
		}
		best := make([]uint64, len(res.Kernels))
		for i := 0; i < 20; i++ {
			cy, err := stepCycles(e, feeds)
			if err != nil {
				t.Fatal(err)
			}
			for j, v := range cy {
				if i == 0 || v < best[j] {
					best[j] = v
				}
			}
		}
		var total uint64
		line := ""
		for j, k := range res.Kernels {
			total += best[j]
			line += fmt.Sprintf(" %s %.0fk", k, float64(best[j])/1e3)
		}
		t.Logf("%v: %.2f MAC/cycle;%s", c, c.macs()/float64(total), line)
		e.Close()
	}
}
