package cpu

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/internal/opcase"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Quantized fusion groups, built by hand as the INT8 contract says the
// passes build them (a body of float QDQ simulation, roles naming each
// node), compiled and compared with the reference executor running the
// unfused QDQ graph: every output within one quantization step, nearly all
// exact. The kernel list shows which lowering ran.

// qtest builds a QDQ graph.
type qtest struct {
	t     *testing.T
	g     *ir.Graph
	r     *rand.Rand
	feeds map[string]*ir.Tensor
	// minSQNR > 0 compares outputs by their signal-to-noise ratio (dB)
	// against the reference's instead of step by step: for an algorithm
	// that rounds more than the reference (integer Winograd).
	minSQNR float64
}

func newQTest(t *testing.T, name string, seed int64) *qtest {
	return &qtest{t: t, g: ir.NewGraph(name), r: rand.New(rand.NewSource(seed)), feeds: map[string]*ir.Tensor{}}
}

// bytesTensor is random u8 or s8 data; hot makes a third of it extreme.
func (q *qtest) bytesTensor(d ir.DType, dims ...int64) *ir.Tensor {
	n := ir.Product(dims)
	if d == ir.Int8 {
		b := make([]int8, n)
		for i := range b {
			b[i] = int8(q.r.Intn(256) - 128)
		}
		return ir.FromSlice(d, dims, b)
	}
	b := make([]uint8, n)
	for i := range b {
		b[i] = uint8(q.r.Intn(256))
	}
	return ir.FromSlice(d, dims, b)
}

func (q *qtest) input(name string, d ir.DType, dims ...int64) *ir.Value {
	q.feeds[name] = q.bytesTensor(d, dims...)
	return q.g.AddInput(name, ir.TensorType(d, ir.S(dims...)))
}

func (q *qtest) scalar(v float32) *ir.Value {
	return q.g.AddInitializer(q.g.UniqueName("s"), ir.Scalar(ir.Float32, v))
}

func (q *qtest) zp(d ir.DType, v int64) *ir.Value {
	name := q.g.UniqueName("zp")
	if d == ir.Int8 {
		return q.g.AddInitializer(name, ir.Scalar(ir.Int8, int8(v)))
	}
	return q.g.AddInitializer(name, ir.Scalar(ir.Uint8, uint8(v)))
}

// dq dequantizes x with a scalar scale and zero point (zp < -128: none).
func (q *qtest) dq(x *ir.Value, s float32, zp int64) *ir.Value {
	ins := []*ir.Value{x, q.scalar(s)}
	if zp >= -128 {
		ins = append(ins, q.zp(x.Type.Elem, zp))
	}
	return q.g.Apply("DequantizeLinear", ins)
}

// weights is a random s8 constant in [-127, 127] of the given dims and
// its per-channel (or, with one scale, per-tensor) DequantizeLinear.
func (q *qtest) weights(scales []float32, axis int64, dims ...int64) (*ir.Value, *ir.Tensor) {
	n := ir.Product(dims)
	b := make([]int8, n)
	for i := range b {
		b[i] = int8(q.r.Intn(255) - 127)
	}
	w := ir.FromSlice(ir.Int8, dims, b)
	wv := q.g.AddInitializer(q.g.UniqueName("w"), w)
	var s *ir.Value
	if len(scales) == 1 {
		s = q.scalar(scales[0])
	} else {
		s = q.g.AddInitializer(q.g.UniqueName("sw"), ir.FromSlice(ir.Float32, []int64{int64(len(scales))}, scales))
	}
	return q.g.Apply("DequantizeLinear", []*ir.Value{wv, s}, ir.AttrI("axis", axis)), w
}

// bias is a random int32 bias with scale s_x·s_w[c], dequantized.
func (q *qtest) bias(sx float32, sw []float32, n int64) *ir.Value {
	b := make([]int32, n)
	s := make([]float32, n)
	for i := range b {
		b[i] = int32(q.r.Intn(20001) - 10000)
		s[i] = sx * sw[min(int64(i), int64(len(sw))-1)]
	}
	bv := q.g.AddInitializer(q.g.UniqueName("b"), ir.FromSlice(ir.Int32, []int64{n}, b))
	sv := q.g.AddInitializer(q.g.UniqueName("sb"), ir.FromSlice(ir.Float32, []int64{n}, s))
	return q.g.Apply("DequantizeLinear", []*ir.Value{bv, sv}, ir.AttrI("axis", 0))
}

func (q *qtest) scales(n int64, perChannel bool) []float32 {
	if !perChannel {
		n = 1
	}
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(0.002 + 0.01*q.r.Float64())
	}
	return s
}

// group wraps the graph's last len(roles) nodes into a fusion group.
func (q *qtest) group(kind string, roles ...string) *ir.Node {
	g := q.g
	nodes := g.Nodes[len(g.Nodes)-len(roles):]
	nodes = slices.Clone(nodes)
	last := nodes[len(nodes)-1]
	out := last.Outputs[0]
	inner := &ir.Value{Name: g.UniqueName(out.Name + "_fused"), Type: out.Type, Producer: last}
	last.Outputs[0] = inner
	body := &ir.Graph{Name: kind, Nodes: nodes, Outputs: []*ir.Value{inner}}
	fg := &ir.Node{Name: last.Name, OpType: ops.FusionGroup, Domain: ir.KilnDomain, Inputs: body.FreeValues(), Outputs: []*ir.Value{out},
		Attrs: []*ir.Attribute{ir.AttrS("kind", kind), ir.AttrG("body", body), ir.AttrSs("roles", roles...)}}
	out.Producer = fg
	g.Nodes = append(g.Nodes[:len(g.Nodes)-len(roles)], fg)
	return fg
}

// floatStats is the mean and standard deviation of float value v of the
// graph so far, by the reference on the feeds.
func (q *qtest) floatStats(v *ir.Value) (mean, std float64) {
	q.t.Helper()
	q.g.SetOutputs(v)
	out := runRef(q.t, ir.NewModel(q.g, 21), q.feeds)[v.Name]
	n := float64(out.Len())
	for i := 0; i < int(out.Len()); i++ {
		mean += out.Float64At(i) / n
	}
	for i := 0; i < int(out.Len()); i++ {
		d := out.Float64At(i) - mean
		std += d * d / n
	}
	return mean, math.Sqrt(std)
}

// quantizeOut quantizes float y to type d over about ±3σ of its values
// around its mean (narrower by squeeze, which saturates more); relu picks
// zero point the type's low end, else the one centering the mean.
func (q *qtest) quantizeOut(y *ir.Value, d ir.DType, squeeze float64, relu bool) *ir.Value {
	mean, std := q.floatStats(y)
	sy := (6*std + 2*math.Abs(mean)) / 255 / max(squeeze, 1)
	lo, center := int64(0), 128.0
	if d == ir.Int8 {
		lo, center = -128, 0
	}
	zp := lo
	if !relu {
		zp = int64(math.Round(center - mean/sy))
		zp = min(max(zp, lo), lo+255)
	}
	return q.g.Apply("QuantizeLinear", []*ir.Value{y, q.scalar(float32(sy)), q.zp(d, zp)})
}

// run compiles the graph (output y) as it is and with its last nodes
// grouped, and compares each with the reference on the ungrouped graph.
// kernels, when set, is the step names the grouped engine must have.
func (q *qtest) run(y *ir.Value, kind string, roles []string, kernels string, opts Options) *Result {
	t := q.t
	t.Helper()
	needLLC(t)
	y.Name = "y"
	q.g.SetOutputs(y)
	m := ir.NewModel(q.g, 21)
	want := runRef(t, m, q.feeds)["y"]
	q.group(kind, roles...)
	m = ir.NewModel(q.g, 21)
	m.OpsetImports = append(m.OpsetImports, ir.OpsetImport{Domain: ir.KilnDomain, Version: 1})
	res, err := Compile(m, opts)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	if *dumpDir != "" {
		os.WriteFile(filepath.Join(*dumpDir, strings.ReplaceAll(t.Name(), "/", "_")+".ll"), []byte(res.LLVMIR), 0o644)
	}
	if kernels != "" {
		var got []string
		for _, k := range res.Kernels {
			got = append(got, k[strings.Index(k, "_")+1:])
		}
		if strings.Join(got, " ") != kernels {
			t.Errorf("compiled to %v, want %s", got, kernels)
		}
	}
	e, err := Load(res)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, threads := range []int{1, 2} {
		outs, err := e.Run(q.feeds, threads, nil)
		if err != nil {
			t.Fatal(err)
		}
		if q.minSQNR > 0 {
			if db := quantizedSQNR(t, outs["y"], want); db < q.minSQNR {
				t.Errorf("%d threads: SQNR %.1f dB against the reference, want at least %.0f", threads, db, q.minSQNR)
			} else if threads == 1 {
				t.Logf("SQNR %.1f dB", db)
			}
			continue
		}
		off, sat := compareQuantized(t, outs["y"], want)
		if threads == 1 {
			t.Logf("%d of %d outputs differ by one step; %d at the type's bounds", off, want.Len(), sat)
		}
	}
	return res
}

// compareQuantized fails on any output more than one step from the
// reference's, or on more than 1% differing by one; it returns how many
// differ and how many of the reference's lie at the type's bounds.
func compareQuantized(t *testing.T, got, want *ir.Tensor) (off, sat int) {
	t.Helper()
	if got == nil || got.DType != want.DType || !slices.Equal(got.Dims, want.Dims) {
		t.Fatalf("got %v, want %s%v", got, want.DType, want.Dims)
	}
	lo, hi := int64(0), int64(255)
	if want.DType == ir.Int8 {
		lo, hi = -128, 127
	}
	bad := 0
	for i := 0; i < int(want.Len()); i++ {
		a, b := got.Int64At(i), want.Int64At(i)
		if b == lo || b == hi {
			sat++
		}
		switch d := a - b; {
		case d == 0:
		case d == 1 || d == -1:
			off++
		default:
			if bad < 5 {
				t.Errorf("element %d: got %d, want %d", i, a, b)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d elements differ by more than one step", bad, want.Len())
	}
	if off*100 > int(want.Len()) {
		t.Errorf("%d of %d elements differ by one step (more than 1%%)", off, want.Len())
	}
	return off, sat
}

// qconvCase is one quantized convolution group.
type qconvCase struct {
	name                   string
	N, C, H, W, OC, kh, kw int64
	stride, pad, dil, grp  int64
	xType, yType           ir.DType
	zpX                    int64
	perChannel, bias       bool
	residual               bool
	act                    string  // "", "Relu", "Clip"
	squeeze                float64 // output scale narrower than ±3σ by this

	oneD    bool
	kernels string
}

func (c qconvCase) build(q *qtest) (*ir.Value, []string) {
	roles := []string{"dq-input", "dq-weight"}
	xd := []int64{c.N, c.C, c.H, c.W}
	wd := []int64{c.OC, c.C / c.grp, c.kh, c.kw}
	attrs := []*ir.Attribute{ir.AttrI("group", c.grp), ir.AttrIs("strides", c.stride, c.stride), ir.AttrIs("dilations", c.dil, c.dil),
		ir.AttrIs("pads", c.pad, c.pad, c.pad, c.pad)}
	if c.oneD {
		xd, wd = []int64{c.N, c.C, c.W}, []int64{c.OC, c.C / c.grp, c.kw}
		attrs = []*ir.Attribute{ir.AttrI("group", c.grp), ir.AttrIs("strides", c.stride), ir.AttrIs("dilations", c.dil), ir.AttrIs("pads", c.pad, c.pad)}
	}
	x := q.input("x", c.xType, xd...)
	sx := float32(0.02)
	xf := q.dq(x, sx, c.zpX)
	sw := q.scales(c.OC, c.perChannel)
	wf, _ := q.weights(sw, 0, wd...)
	ins := []*ir.Value{xf, wf}
	if c.bias {
		ins = append(ins, q.bias(sx, sw, c.OC))
		roles = append(roles, "dq-bias")
	}
	y := q.g.Apply("Conv", ins, attrs...)
	roles = append(roles, "base")
	_, std := q.floatStats(y)
	if c.residual {
		r := q.input("r", ir.Uint8, dimsOf(q.inferred(y))...)
		y = q.g.Apply("Add", []*ir.Value{y, q.dq(r, float32(std/100), 100)})
		roles = append(roles, "dq-residual", "residual")
	}
	y = q.activation(y, c.act, float32(std/40))
	if c.act != "" {
		roles = append(roles, "activation")
	}
	return q.quantizeOut(y, c.yType, c.squeeze, c.act != ""), append(roles, "q-output")
}

// activation applies act; Clip's bounds are -30 and 90 units.
func (q *qtest) activation(y *ir.Value, act string, unit float32) *ir.Value {
	switch act {
	case "Relu":
		return q.g.Apply("Relu", []*ir.Value{y})
	case "Clip":
		return q.g.Apply("Clip", []*ir.Value{y, q.scalar(-30 * unit), q.scalar(90 * unit)})
	}
	return y
}

// inferred returns v with its type inferred (the graph so far).
func (q *qtest) inferred(v *ir.Value) *ir.Value {
	q.g.SetOutputs(v)
	if _, err := ops.InferShapes(ir.NewModel(q.g, 21)); err != nil {
		q.t.Fatal(err)
	}
	return v
}

// TestQConvGroups runs the direct kernels (Winograd off: its extra
// rounding has its own test, TestQWinograd).
func TestQConvGroups(t *testing.T) {
	for _, c := range qconvCases() {
		t.Run(c.name, func(t *testing.T) {
			q := newQTest(t, c.name, 11)
			y, roles := c.build(q)
			q.run(y, "qconv", roles, c.kernels, Options{Winograd: WinogradOff})
		})
	}
}

// TestQConvFusedIm2col runs every convolution the fused im2col takes
// (qconvLayout's rowBlock) through it, on each instruction set: blocks of
// rows with a shorter last one, batches, strides, residuals.
func TestQConvFusedIm2col(t *testing.T) {
	above, slice, items := qFuseIm2colAbove, qFuseSlice, qFuseIm2colItems
	qFuseIm2colAbove, qFuseSlice, qFuseIm2colItems = 0, 6<<10, 1
	defer func() { qFuseIm2colAbove, qFuseSlice, qFuseIm2colItems = above, slice, items }()
	for _, cpu := range []string{"x86-64-v3", "cascadelake", "native"} {
		for _, c := range qconvCases() {
			if c.grp != 1 || c.H == 1 || c.kh*c.kw == 1 && c.stride == 1 && c.pad == 0 {
				continue // no rows to block: a 1×1 reads each plane as one row
			}
			t.Run(cpu+"/"+c.name, func(t *testing.T) {
				if hasCPU(cpu) != nil {
					t.Skip(hasCPU(cpu))
				}
				q := newQTest(t, c.name, 11)
				y, roles := c.build(q)
				res := q.run(y, "qconv", roles, "", Options{CPU: cpu, Winograd: WinogradOff})
				if got := strings.Join(res.Kernels, " "); strings.Contains(got, "QIm2col") || !strings.HasSuffix(got, "QConv") {
					t.Errorf("compiled to %s, want im2col fused into QConv", got)
				}
			})
		}
	}
}

func qconvCases() []qconvCase {
	u8, s8 := ir.Uint8, ir.Int8
	cases := []qconvCase{
		{name: "3x3_pad_bias_relu_perchannel", N: 1, C: 8, H: 9, W: 11, OC: 16, kh: 3, kw: 3, stride: 1, pad: 1, dil: 1, grp: 1,
			xType: u8, yType: u8, zpX: 3, perChannel: true, bias: true, act: "Relu", kernels: "QPad QIm2col QConv"},
		{name: "k27_stride2_pertensor_nobias", N: 1, C: 3, H: 17, W: 15, OC: 10, kh: 3, kw: 3, stride: 2, pad: 1, dil: 1, grp: 1,
			xType: u8, yType: u8, zpX: 0},
		{name: "1x1_residual_relu_49px", N: 1, C: 20, H: 7, W: 7, OC: 24, kh: 1, kw: 1, stride: 1, pad: 0, dil: 1, grp: 1,
			xType: u8, yType: u8, zpX: 130, perChannel: true, bias: true, residual: true, act: "Relu", kernels: "QIm2col QConv"},
		{name: "1x1_stride2_s8_in_s8_out", N: 2, C: 16, H: 14, W: 14, OC: 32, kh: 1, kw: 1, stride: 2, pad: 0, dil: 1, grp: 1,
			xType: s8, yType: s8, zpX: -7, perChannel: true, bias: true},
		{name: "groups2_dilated", N: 1, C: 8, H: 12, W: 10, OC: 12, kh: 3, kw: 3, stride: 1, pad: 2, dil: 2, grp: 2,
			xType: u8, yType: u8, zpX: 17, perChannel: true, bias: true, act: "Clip"},
		{name: "depthwise_s2_clip", N: 1, C: 16, H: 15, W: 15, OC: 16, kh: 3, kw: 3, stride: 2, pad: 1, dil: 1, grp: 16,
			xType: u8, yType: u8, zpX: 90, perChannel: true, bias: true, act: "Clip", kernels: "QConvDW"},
		{name: "depthwise_5x5_s8_residual", N: 2, C: 24, H: 13, W: 21, OC: 24, kh: 5, kw: 5, stride: 1, pad: 2, dil: 1, grp: 24,
			xType: s8, yType: u8, zpX: 4, perChannel: true, bias: true, residual: true},
		{name: "depthwise_multiplier2", N: 1, C: 8, H: 9, W: 9, OC: 16, kh: 3, kw: 3, stride: 1, pad: 1, dil: 1, grp: 8,
			xType: u8, yType: u8, zpX: 0, perChannel: true},
		{name: "conv1d", N: 2, C: 6, W: 40, OC: 5, kw: 5, stride: 1, pad: 2, dil: 1, grp: 1, oneD: true,
			xType: u8, yType: u8, zpX: 9, perChannel: true, bias: true},
		{name: "saturating", N: 1, C: 32, H: 8, W: 8, OC: 40, kh: 3, kw: 3, stride: 1, pad: 1, dil: 1, grp: 1,
			xType: u8, yType: u8, zpX: 0, perChannel: true, bias: true, squeeze: 30},
		{name: "3x3_54px_s8_out", N: 1, C: 12, H: 6, W: 9, OC: 9, kh: 3, kw: 3, stride: 1, pad: 1, dil: 1, grp: 1,
			xType: u8, yType: s8, zpX: 200, perChannel: true, bias: true},
		{name: "groups2_7x7_tail_turned_residual", N: 1, C: 16, H: 7, W: 7, OC: 32, kh: 3, kw: 3, stride: 1, pad: 1, dil: 1, grp: 2,
			xType: u8, yType: s8, zpX: 21, perChannel: true, bias: true, residual: true, act: "Relu"},
		{name: "stem_7x7_s2", N: 1, C: 3, H: 32, W: 32, OC: 16, kh: 7, kw: 7, stride: 2, pad: 3, dil: 1, grp: 1,
			xType: u8, yType: u8, zpX: 114, perChannel: true, bias: true, act: "Relu"},
		{name: "3x3_batch2_rows_in_blocks", N: 2, C: 24, H: 13, W: 12, OC: 40, kh: 3, kw: 3, stride: 1, pad: 1, dil: 1, grp: 1,
			xType: s8, yType: u8, zpX: 5, perChannel: true, bias: true, residual: true},
	}
	for i := range cases {
		if cases[i].H == 0 {
			cases[i].H, cases[i].kh = 1, 1
		}
	}
	return cases
}

// TestQISAs runs a convolution, a depthwise convolution and a matmul for
// each instruction set the int8 kernels take: AVX2 (x86-64-v3) and AVX-512
// without VNNI (x86-64-v4) multiply in int16 pairs with vpmaddwd, VNNI
// without VBMI (cascadelake) interleaves the depthwise taps itself, and
// the host (native) uses what it has; with AMX (sapphirerapids), the
// convolutions' GEMM runs on tiles.
func TestQISAs(t *testing.T) {
	for _, cpu := range []string{"x86-64-v3", "x86-64-v4", "cascadelake", "sapphirerapids", "native"} {
		t.Run(cpu, func(t *testing.T) {
			if hasCPU(cpu) != nil {
				t.Skip(hasCPU(cpu))
			}
			feats, _ := cpuFeatures(cpu)
			vnni, vbmi := slices.Contains(feats, "avx512_vnni") || slices.Contains(feats, "avx_vnni"), slices.Contains(feats, "avx512vbmi")
			amx := slices.Contains(feats, "amx_int8")
			check := func(res *Result, what string) {
				t.Helper()
				if strings.Contains(res.LLVMIR, "vpdpbusd") != vnni || strings.Contains(res.LLVMIR, "pmadd") == vnni {
					t.Errorf("%s: vpdpbusd used %v, want %v", what, !vnni, vnni)
				}
			}
			c := qconvCase{N: 1, C: 5, H: 7, W: 7, OC: 20, kh: 3, kw: 3, stride: 1, pad: 1, dil: 1, grp: 1,
				xType: ir.Int8, yType: ir.Uint8, zpX: -3, perChannel: true, bias: true, residual: true, act: "Relu"}
			q := newQTest(t, "conv_"+cpu, 12)
			y, roles := c.build(q)
			res := q.run(y, "qconv", roles, "QPad QIm2col QConv", Options{CPU: cpu})
			if amx {
				if !strings.Contains(res.LLVMIR, "tdpbsud") || !slices.Contains(res.Features, "amx_int8") {
					t.Errorf("conv: AMX tiles not used (or not recorded: %v)", res.Features)
				}
			} else {
				check(res, "conv")
			}
			for _, s := range []int64{1, 2} {
				dw := qconvCase{N: 1, C: 8, H: 10, W: 37, OC: 8, kh: 3, kw: 3, stride: s, pad: 1, dil: 1, grp: 8,
					xType: ir.Int8, yType: ir.Uint8, zpX: 7, perChannel: true, bias: true, act: "Relu"}
				q = newQTest(t, "dw_"+cpu, 13)
				y, roles = dw.build(q)
				res := q.run(y, "qconv", roles, "QConvDW", Options{CPU: cpu})
				check(res, "depthwise")
				if strings.Contains(res.LLVMIR, "permvar") != (vnni && vbmi) {
					t.Errorf("depthwise: vpermb used %v, want %v", !(vnni && vbmi), vnni && vbmi)
				}
			}
			q = newQTest(t, "mm_"+cpu, 14)
			y, roles = qmatmulCase{M: []int64{3, 9}, K: 37, N: 29, xType: ir.Int8, zpX: 5, bias: true}.build(q)
			res = q.run(y, "qmatmul", roles, "QMatMul", Options{CPU: cpu})
			check(res, "matmul")
			if slices.Contains(res.Features, "amx_tile") {
				t.Errorf("matmul: the engine records AMX, which its code does not use: %v", res.Features)
			}
		})
	}
}

// hasCPU reports whether this host runs code built for cpu.
func hasCPU(cpu string) error {
	feats, err := cpuFeatures(cpu)
	if err != nil {
		return err
	}
	host, err := cpuFeatures("native")
	if err != nil {
		return err
	}
	for _, f := range feats {
		if !slices.Contains(host, f) {
			return fmt.Errorf("this host lacks %s", f)
		}
	}
	return nil
}

// qmatmulCase is a qgemm (Gemm base) or qmatmul group.
type qmatmulCase struct {
	gemm         bool
	transB       bool
	alpha        float32
	M            []int64 // A's dims but K
	K, N         int64
	xType, yType ir.DType
	zpX          int64
	perChannel   bool
	bias         bool
	residual     bool
	act          string
}

func (c qmatmulCase) build(q *qtest) (*ir.Value, []string) {
	if c.yType == ir.Undefined {
		c.yType = ir.Uint8
	}
	roles := []string{"dq-input", "dq-weight"}
	xd := append(slices.Clone(c.M), c.K)
	x := q.input("x", c.xType, xd...)
	sx := float32(0.03)
	xf := q.dq(x, sx, c.zpX)
	sw := q.scales(c.N, c.perChannel)
	var y, wf *ir.Value
	switch {
	case c.gemm && c.transB:
		wf, _ = q.weights(sw, 0, c.N, c.K)
	default:
		wf, _ = q.weights(sw, 1, c.K, c.N)
	}
	var b *ir.Value
	if c.bias {
		b = q.bias(sx, sw, c.N)
		roles = append(roles, "dq-bias")
	}
	if c.gemm {
		ins := []*ir.Value{xf, wf}
		if b != nil {
			ins = append(ins, b)
		}
		alpha := c.alpha
		if alpha == 0 {
			alpha = 1
		}
		tb := int64(0)
		if c.transB {
			tb = 1
		}
		y = q.g.Apply("Gemm", ins, ir.AttrI("transB", tb), ir.AttrF("alpha", alpha))
		roles = append(roles, "base")
	} else {
		y = q.g.Apply("MatMul", []*ir.Value{xf, wf})
		roles = append(roles, "base")
		if b != nil {
			y = q.g.Apply("Add", []*ir.Value{y, b})
			roles = append(roles, "bias")
		}
	}
	_, std := q.floatStats(y)
	if c.residual {
		r := q.input("r", ir.Int8, dimsOf(q.inferred(y))...)
		y = q.g.Apply("Add", []*ir.Value{q.dq(r, float32(std/60), -4), y})
		roles = append(roles, "dq-residual", "residual")
	}
	y = q.activation(y, c.act, float32(std/40))
	if c.act != "" {
		roles = append(roles, "activation")
	}
	return q.quantizeOut(y, c.yType, 1, c.act != ""), append(roles, "q-output")
}

func TestQMatMulGroups(t *testing.T) {
	u8, s8 := ir.Uint8, ir.Int8
	for _, c := range []struct {
		name string
		kind string
		c    qmatmulCase
	}{
		{"gemm_transB_bias_relu", "qgemm", qmatmulCase{gemm: true, transB: true, M: []int64{5}, K: 33, N: 37, xType: u8, zpX: 12, perChannel: true, bias: true, act: "Relu"}},
		{"gemm_one_row_alpha", "qgemm", qmatmulCase{gemm: true, alpha: 0.5, M: []int64{1}, K: 512, N: 1000, xType: u8, zpX: 0, bias: true}},
		{"gemm_k_odd", "qgemm", qmatmulCase{gemm: true, M: []int64{9}, K: 7, N: 16, xType: u8, zpX: 255, perChannel: true, bias: true}},
		{"matmul_batched_s8_residual", "qmatmul", qmatmulCase{M: []int64{2, 7}, K: 64, N: 50, xType: s8, yType: s8, zpX: -9, perChannel: true, residual: true}},
		{"matmul_bias_add_clip", "qmatmul", qmatmulCase{M: []int64{128}, K: 96, N: 80, xType: u8, zpX: 128, perChannel: true, bias: true, act: "Clip"}},
		{"matmul_1d", "qmatmul", qmatmulCase{M: nil, K: 45, N: 19, xType: u8, zpX: 1}},
		{"matmul_k_blocks_tail_rows_residual", "qmatmul", qmatmulCase{M: []int64{40}, K: 128, N: 33, xType: u8, zpX: 3, perChannel: true, bias: true, residual: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := newQTest(t, c.name, 21)
			y, roles := c.c.build(q)
			res := q.run(y, c.kind, roles, "QMatMul", Options{})
			// On an AMX host, u8 products of 8 rows or more run on tiles.
			rows := int64(1)
			for _, d := range c.c.M {
				rows *= d
			}
			want := hasCPU("sapphirerapids") == nil && c.c.xType == u8 && rows >= qAMXMinRows
			if got := strings.Contains(res.LLVMIR, "tdpbusd"); got != want {
				t.Errorf("AMX tiles used %v, want %v", got, want)
			}
		})
	}
}

// TestQLinearOpsOnInt8Kernels: the ONNX integer ops with constant weights
// and per-tensor activation parameters run on the int8 kernels, bit for
// bit the reference's (QLinear ops requantize in float64 as it does); the
// others stay on the kernel layer (TestEveryLoweredOp covers both).
func TestQLinearOpsOnInt8Kernels(t *testing.T) {
	needLLC(t)
	for _, c := range []struct{ line, kernels string }{
		{"QLinearConv-10(pads=[1 1 1 1]) T[1,5,8,9], float=[0.05], T=[2], int8[6,5,3,3]=rand, float[6]=[0.01 0.02 0.03 0.015 0.04 0.007], int8[6]=[0 0 0 0 0 0], float=[0.09], uint8=[128], int32[6]=rand", "QPad QIm2col QConv"},
		{"QLinearConv-10(group=4, strides=[2 2], pads=[1 1 1 1]) T[2,4,9,9], float=[0.1], T=[3], int8[4,1,3,3]=rand, float=[0.02], int8=[0], float=[0.3], int8=[-4], int32[4]=rand", "QConvDW"},
		{"QLinearConv-10 T[1,8,7,7], float=[0.5], T=[0], int8[16,8,1,1]=rand, float=[0.25], int8=[0], float=[2], T=[3]", "QIm2col QConv"},
		{"ConvInteger-10(pads=[1 1 1 1]) T[2,3,6,17], int8[5,3,3,3]=rand, T=[4], int8[5]=[1 -2 3 0 0]", "QPad QIm2col QConv"},
		{"ConvInteger-10(pads=[1 1 1 1]) T[1,4,7,7], int8[8,4,3,3]=rand, T=[9], int8=[0]", "QPad QIm2col QConv"},
		{"ConvInteger-10(group=3) T[1,6,5,5], uint8[6,2,2,2]=[100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127 128 129 130 131 132 133 134 135 136 137 138 139 141 142 143 144 145 146 147 148], T=[1], uint8=[100]", "QIm2col QConv"},
		{"QLinearMatMul-10 T[3,17], float=[0.02], T=[3], int8[17,9]=rand, float=[0.03], int8=[0], float=[0.05], uint8=[100]", "QMatMul"},
		{"QLinearMatMul-10 T[16,4], float=[0.1], T=[0], int8[4,16]=rand, float=[1], int8=[0], float=[1], T=[0]", "QMatMul"}, // ties
		{"QLinearMatMul-10 T[2,5,40], float=[0.1], T=[7], int8[40,33]=rand, float[33]=rand, int8=[0], float=[0.7], int8=[5]", "QMatMul"},
		{"MatMulInteger-10 T[2,4,7], int8[7,19]=rand, T=[4], int8[19]=rand", "QMatMul"},
		{"MatMulInteger-10 T[5], uint8[5,6]=[1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30], T=[3], uint8=[4]", "QMatMul"},
	} {
		t.Run(c.line, func(t *testing.T) {
			cs, err := opcase.Parse(c.line)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range []ir.DType{ir.Uint8, ir.Int8} {
				g := ir.NewGraph("case")
				outs, feeds, err := cs.Add(g, "c", d, rand.New(rand.NewSource(3)))
				if err != nil {
					t.Fatal(err)
				}
				// A random per-channel scale must be positive.
				for _, v := range g.Initializers {
					if v.Type.Elem == ir.Float32 {
						f := v.Const.Float32s()
						for i := range f {
							f[i] = float32(math.Abs(float64(f[i]))) + 0.01
						}
					}
				}
				g.SetOutputs(outs...)
				m := ir.NewModel(g, cs.Opset)
				want := runRef(t, m, feeds)
				res, err := Compile(m, Options{})
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, k := range res.Kernels {
					got = append(got, k[strings.Index(k, "_")+1:])
				}
				if strings.Join(got, " ") != c.kernels {
					t.Errorf("T=%s: compiled to %v, want %s", d, got, c.kernels)
				}
				e, err := Load(res)
				if err != nil {
					t.Fatal(err)
				}
				for _, threads := range []int{1, 2} {
					out, err := e.Run(feeds, threads, nil)
					if err != nil {
						t.Fatal(err)
					}
					for _, o := range outs {
						if err := compareOut(out[o.Name], want[o.Name]); err != nil {
							t.Errorf("T=%s, %d threads: %v", d, threads, err)
						}
					}
				}
				e.Close()
			}
		})
	}
}

// TestQElementwiseGroups: qadd and qmul (one map of the body), qpool (an
// int32 sum requantized once) and qlut (a table of the body's values).
func TestQElementwiseGroups(t *testing.T) {
	for _, c := range []struct {
		name, kind, kernels string
		build               func(q *qtest) (*ir.Value, []string)
	}{
		{"qadd_relu", "qadd", "QAdd", func(q *qtest) (*ir.Value, []string) {
			a := q.dq(q.input("a", ir.Uint8, 1, 16, 7, 9), 0.05, 10)
			b := q.dq(q.input("b", ir.Int8, 1, 16, 7, 9), 0.02, -3)
			y := q.g.Apply("Relu", []*ir.Value{q.g.Apply("Add", []*ir.Value{a, b})})
			return q.quantizeOut(y, ir.Uint8, 1, true), []string{"dq-input", "dq-input", "base", "activation", "q-output"}
		}},
		{"qmul_broadcast_s8", "qmul", "QMul", func(q *qtest) (*ir.Value, []string) {
			a := q.dq(q.input("a", ir.Uint8, 2, 24, 5, 5), 0.05, 100)
			b := q.dq(q.input("b", ir.Uint8, 2, 24, 1, 1), 0.004, 0)
			y := q.g.Apply("Mul", []*ir.Value{a, b})
			return q.quantizeOut(y, ir.Int8, 1, false), []string{"dq-input", "dq-input", "base", "q-output"}
		}},
		{"qpool_global", "qpool", "QPool", func(q *qtest) (*ir.Value, []string) {
			x := q.dq(q.input("x", ir.Uint8, 2, 40, 7, 7), 0.05, 30)
			return q.quantizeOut(q.g.Apply("GlobalAveragePool", []*ir.Value{x}), ir.Uint8, 1, false), []string{"dq-input", "base", "q-output"}
		}},
		{"qpool_average_pad", "qpool", "QPool", func(q *qtest) (*ir.Value, []string) {
			x := q.dq(q.input("x", ir.Int8, 1, 8, 11, 10), 0.05, -5)
			y := q.g.Apply("AveragePool", []*ir.Value{x}, ir.AttrIs("kernel_shape", 3, 3), ir.AttrIs("strides", 2, 2), ir.AttrIs("pads", 1, 1, 1, 1))
			return q.quantizeOut(y, ir.Int8, 1, false), []string{"dq-input", "base", "q-output"}
		}},
		{"qpool_average_count_pad", "qpool", "QPool", func(q *qtest) (*ir.Value, []string) {
			x := q.dq(q.input("x", ir.Uint8, 1, 8, 9, 9), 0.05, 128)
			y := q.g.Apply("AveragePool", []*ir.Value{x}, ir.AttrIs("kernel_shape", 3, 2), ir.AttrIs("pads", 1, 0, 1, 1), ir.AttrI("count_include_pad", 1))
			return q.quantizeOut(y, ir.Uint8, 1, false), []string{"dq-input", "base", "q-output"}
		}},
		{"qlut_sigmoid", "qlut", "QLut", func(q *qtest) (*ir.Value, []string) {
			x := q.dq(q.input("x", ir.Uint8, 1, 32, 6, 6), 0.06, 128)
			return q.quantizeOut(q.g.Apply("Sigmoid", []*ir.Value{x}), ir.Uint8, 1, false), []string{"dq-input", "base", "q-output"}
		}},
		{"qlut_silu_s8", "qlut", "QLut", func(q *qtest) (*ir.Value, []string) {
			x := q.dq(q.input("x", ir.Int8, 3, 50), 0.05, 0)
			y := q.g.Apply("Mul", []*ir.Value{x, q.g.Apply("Sigmoid", []*ir.Value{x})})
			return q.quantizeOut(y, ir.Int8, 1, false), []string{"dq-input", "base", "base", "q-output"}
		}},
		{"qlut_hardswish", "qlut", "QLut", func(q *qtest) (*ir.Value, []string) {
			x := q.dq(q.input("x", ir.Uint8, 4, 33), 0.05, 120)
			return q.quantizeOut(q.g.Apply("HardSwish", []*ir.Value{x}), ir.Uint8, 1, false), []string{"dq-input", "base", "q-output"}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := newQTest(t, c.name, 31)
			y, roles := c.build(q)
			q.run(y, c.kind, roles, c.kernels, Options{})
		})
	}
}

// TestQGroupBodyAsIs: a qconv group whose weights the int8 kernels do not
// take (uint8 weights minus a zero point of 0 do not fit s8) runs its body
// node by node through the kernel layer, with the same result.
func TestQGroupBodyAsIs(t *testing.T) {
	q := newQTest(t, "asis", 41)
	x := q.dq(q.input("x", ir.Uint8, 1, 4, 6, 6), 0.02, 128)
	w := q.g.AddInitializer("w", q.bytesTensor(ir.Uint8, 5, 4, 3, 3))
	wf := q.g.Apply("DequantizeLinear", []*ir.Value{w, q.scalar(0.01), q.zp(ir.Uint8, 0)})
	y := q.g.Apply("Relu", []*ir.Value{q.g.Apply("Conv", []*ir.Value{x, wf}, ir.AttrIs("pads", 1, 1, 1, 1))})
	y = q.quantizeOut(y, ir.Uint8, 1, true)
	q.run(y, "qconv", []string{"dq-input", "dq-weight", "base", "activation", "q-output"},
		"DequantizeLinear DequantizeLinear Conv Relu QuantizeLinear", Options{})
}

// TestQFeatures: the int8 kernels use vpdpbusd exactly when the target has
// AVX512-VNNI, and the engine records the feature.
func TestQFeatures(t *testing.T) {
	needLLC(t)
	host, err := cpuFeatures("native")
	if err != nil {
		t.Skip(err)
	}
	for _, c := range []struct {
		cpu  string
		vnni bool
	}{{"native", slices.Contains(host, "avx512_vnni") || slices.Contains(host, "avx_vnni")}, {"icelake-server", true}, {"x86-64-v4", false}, {"x86-64-v3", false}} {
		q := newQTest(t, "feat", 51)
		y, roles := qmatmulCase{M: []int64{4}, K: 32, N: 16, xType: ir.Uint8}.build(q)
		y.Name = "y"
		q.g.SetOutputs(y)
		q.group("qmatmul", roles...)
		m := ir.NewModel(q.g, 21)
		m.OpsetImports = append(m.OpsetImports, ir.OpsetImport{Domain: ir.KilnDomain, Version: 1})
		res, err := Compile(m, Options{CPU: c.cpu})
		if err != nil {
			t.Fatalf("%s: %v", c.cpu, err)
		}
		uses := strings.Contains(res.LLVMIR, "vpdpbusd")
		records := slices.Contains(res.Features, "avx512_vnni") || slices.Contains(res.Features, "avx_vnni")
		if uses != c.vnni || records != c.vnni {
			t.Errorf("--cpu %s: vpdpbusd used %v, VNNI recorded %v (features %v), want %v", c.cpu, uses, records, res.Features, c.vnni)
		}
	}
}

// TestQDynamicBatch: quantized groups over a dynamic batch (the int8
// kernels run per sample, the kernel-layer ones over the whole batch),
// compiled once and run at several batches.
func TestQDynamicBatch(t *testing.T) {
	needLLC(t)
	build := func(grouped bool) *ir.Model {
		q := newQTest(t, "dyn", 61)
		g := q.g
		x := g.AddInput("x", ir.TensorType(ir.Uint8, ir.ShapeOf(ir.Sym("N"), ir.D(8), ir.D(10), ir.D(10))))
		xf := q.dq(x, 0.02, 120)
		sw := q.scales(8, true)
		wf, _ := q.weights(sw, 0, 8, 8, 3, 3)
		y := g.Apply("Conv", []*ir.Value{xf, wf, q.bias(0.02, sw, 8)}, ir.AttrIs("pads", 1, 1, 1, 1))
		y = g.Apply("Add", []*ir.Value{y, q.dq(x, 0.02, 120)})
		y = g.Apply("Relu", []*ir.Value{y})
		y = g.Apply("QuantizeLinear", []*ir.Value{y, q.scalar(0.1), q.zp(ir.Uint8, 0)})
		if grouped {
			q.group("qconv", "dq-input", "dq-weight", "dq-bias", "base", "dq-residual", "residual", "activation", "q-output")
		}
		p := g.Apply("GlobalAveragePool", []*ir.Value{q.dq(y, 0.1, 0)})
		p = g.Apply("QuantizeLinear", []*ir.Value{p, q.scalar(0.05), q.zp(ir.Uint8, 0)})
		if grouped {
			q.group("qpool", "dq-input", "base", "q-output")
		}
		s := g.Apply("Sigmoid", []*ir.Value{q.dq(y, 0.1, 0)})
		s = g.Apply("QuantizeLinear", []*ir.Value{s, q.scalar(1.0 / 256), q.zp(ir.Uint8, 0)})
		if grouped {
			q.group("qlut", "dq-input", "base", "q-output")
		}
		p.Name, s.Name = "pool", "lut"
		g.SetOutputs(p, s)
		m := ir.NewModel(g, 21)
		if grouped {
			m.OpsetImports = append(m.OpsetImports, ir.OpsetImport{Domain: ir.KilnDomain, Version: 1})
		}
		return m
	}
	res, err := Compile(build(true), Options{Profile: map[string]DimRange{"N": {Min: 1, Opt: 1, Max: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	if kernelsWith(res, "QConv") != 1 || kernelsWith(res, "QPool") != 1 || kernelsWith(res, "QLut") != 1 {
		t.Errorf("kernels %v", res.Kernels)
	}
	e, err := Load(res)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	q := newQTest(t, "feeds", 62)
	for _, batch := range []int64{1, 3, 4, 2} {
		feeds := map[string]*ir.Tensor{"x": q.bytesTensor(ir.Uint8, batch, 8, 10, 10)}
		want := runRef(t, build(false), feeds)
		for _, threads := range []int{1, 2} {
			got, err := e.Run(feeds, threads, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"pool", "lut"} {
				compareQuantized(t, got[name], want[name])
			}
		}
	}
}

// TestQTies: power-of-two scales put half the sums exactly on ties (here
// y = (x - 128)·w/2 with w of ±1), which must round half to even before
// the output's zero point (odd here) is added, as QuantizeLinear does: the
// float body and the integer kernel agree exactly.
func TestQTies(t *testing.T) {
	for _, zp := range []int64{3, -5, 0, 8} {
		q := newQTest(t, "ties", 71)
		x := q.dq(q.input("x", ir.Uint8, 40, 1), 1, 128)
		w := make([]int8, 18)
		for i := range w {
			w[i] = int8(1 - 2*(i%2))
		}
		wv := q.g.AddInitializer("w", ir.FromSlice(ir.Int8, []int64{1, 18}, w))
		wf := q.g.Apply("DequantizeLinear", []*ir.Value{wv, q.scalar(1)})
		y := q.g.Apply("MatMul", []*ir.Value{x, wf})
		y = q.g.Apply("QuantizeLinear", []*ir.Value{y, q.scalar(2), q.zp(ir.Int8, zp)})
		q.run(y, "qmatmul", []string{"dq-input", "dq-weight", "base", "q-output"}, "QMatMul", Options{})
	}
}
