package version

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/conformance"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// oldOpsetModels build small models at an opset before 13 whose nodes
// change form on the way to 13; each has input x of the given dims.
var oldOpsetModels = []struct {
	name  string
	opset int64
	x     []int64
	build func(g *ir.Graph, x *ir.Value) *ir.Value
}{
	{"Squeeze-11 and Unsqueeze-11 axes attributes, negative ones too", 11, []int64{2, 1, 3, 1}, func(g *ir.Graph, x *ir.Value) *ir.Value {
		sq := g.Apply("Squeeze", []*ir.Value{x}, ir.AttrIs("axes", 1, -1))
		return g.Apply("Unsqueeze", []*ir.Value{sq}, ir.AttrIs("axes", 0))
	}},
	{"Clip-6 min and max, Squeeze-1 axes attribute", 10, []int64{2, 1, 3, 1}, func(g *ir.Graph, x *ir.Value) *ir.Value {
		c := g.Apply("Clip", []*ir.Value{x}, ir.AttrF("min", -0.5), ir.AttrF("max", 0.7))
		c = g.Apply("Clip", []*ir.Value{c}, ir.AttrF("max", 0.6))
		return g.Apply("Squeeze", []*ir.Value{c}, ir.AttrIs("axes", 1, 3))
	}},
	{"Softmax-1 over a 4-D input's axis 1, Slice-1, Pad-2", 9, []int64{2, 3, 4, 5}, func(g *ir.Graph, x *ir.Value) *ir.Value {
		s := g.Apply("Softmax", []*ir.Value{x}, ir.AttrI("axis", 1))
		sl := g.Apply("Slice", []*ir.Value{s}, ir.AttrIs("starts", 1, 0), ir.AttrIs("ends", 3, -1), ir.AttrIs("axes", 2, 3))
		return g.Apply("Pad", []*ir.Value{sl}, ir.AttrIs("pads", 0, 0, 1, 2, 0, 0, 0, 1), ir.AttrF("value", 0.25))
	}},
	{"TopK-1, ReduceSum-1 axes, Split-2 split, Dropout-7 ratio", 9, []int64{3, 8}, func(g *ir.Graph, x *ir.Value) *ir.Value {
		top := g.AddNode("TopK", []*ir.Value{x}, 2, ir.AttrI("k", 6))
		parts := g.AddNode("Split", []*ir.Value{top.Outputs[0]}, 2, ir.AttrI("axis", 1), ir.AttrIs("split", 2, 4))
		d := g.Apply("Dropout", []*ir.Value{parts.Outputs[1]}, ir.AttrF("ratio", 0.3))
		r := g.Apply("ReduceSum", []*ir.Value{d}, ir.AttrIs("axes", 1), ir.AttrI("keepdims", 1))
		return g.Apply("Add", []*ir.Value{r, parts.Outputs[0]})
	}},
	{"If-11 branches holding Squeeze-11 and Unsqueeze-11", 11, []int64{2, 1, 3}, func(g *ir.Graph, x *ir.Value) *ir.Value {
		sum := g.Apply("ReduceSum", []*ir.Value{x}, ir.AttrI("keepdims", 0))
		cond := g.Apply("Greater", []*ir.Value{sum, g.AddInitializer("zero", ir.Scalar(ir.Float32, float32(0)))})
		branch := func(name, op string) *ir.Graph {
			b := ir.NewGraph(name)
			v := b.Apply(op, []*ir.Value{x})
			b.SetOutputs(b.Apply("Unsqueeze", []*ir.Value{b.Apply("Squeeze", []*ir.Value{v}, ir.AttrIs("axes", 1))}, ir.AttrIs("axes", 0)))
			return b
		}
		return g.Apply("If", []*ir.Value{cond}, ir.AttrG("then_branch", branch("then", "Neg")), ir.AttrG("else_branch", branch("else", "Abs")))
	}},
	{"LogSoftmax-1 on the last axis stays as it is", 12, []int64{2, 3, 4}, func(g *ir.Graph, x *ir.Value) *ir.Value {
		return g.Apply("LogSoftmax", []*ir.Value{x}, ir.AttrI("axis", 2))
	}},
	{"ReduceMax-1 and ReduceMean-1 axes attributes, Split-13 into equal parts", 13, []int64{2, 6, 3}, func(g *ir.Graph, x *ir.Value) *ir.Value {
		parts := g.AddNode("Split", []*ir.Value{x}, 2, ir.AttrI("axis", 1))
		a := g.Apply("ReduceMax", []*ir.Value{parts.Outputs[0]}, ir.AttrIs("axes", 1, -1), ir.AttrI("keepdims", 0))
		b := g.Apply("ReduceMean", []*ir.Value{parts.Outputs[1]}, ir.AttrIs("axes", 1), ir.AttrI("keepdims", 0))
		return g.Apply("Add", []*ir.Value{a, g.Apply("ReduceSumSquare", []*ir.Value{b}, ir.AttrIs("axes", 1), ir.AttrI("keepdims", 1))})
	}},
	{"BatchNormalization-7, Upsample-7 nearest", 8, []int64{1, 3, 4, 4}, func(g *ir.Graph, x *ir.Value) *ir.Value {
		rng := rand.New(rand.NewPCG(9, 9))
		p := func(name string, shift float64) *ir.Value {
			v := randn(rng, 0.3, 3)
			for i := range v.Float32s() {
				v.Float32s()[i] += float32(shift)
			}
			return g.AddInitializer(name, v)
		}
		bn := g.Apply("BatchNormalization", []*ir.Value{x, p("scale", 1), p("bias", 0), p("mean", 0), p("var", 1)}, ir.AttrF("epsilon", 1e-3))
		return g.Apply("Upsample", []*ir.Value{bn}, ir.AttrS("mode", "nearest"), ir.AttrFs("scales", 1, 1, 2, 3))
	}},
	{"GroupNormalization-18 scale and bias per group", 18, []int64{2, 6, 3, 2}, func(g *ir.Graph, x *ir.Value) *ir.Value {
		rng := rand.New(rand.NewPCG(18, 18))
		scale := g.AddInitializer("scale", randn(rng, 1, 3))
		bias := g.AddInitializer("bias", randn(rng, 1, 3))
		return g.Apply("GroupNormalization", []*ir.Value{x, scale, bias}, ir.AttrI("num_groups", 3))
	}},
	{"GridSample-16 bilinear and bicubic", 16, []int64{1, 2, 5, 4}, func(g *ir.Graph, x *ir.Value) *ir.Value {
		grid := g.AddInitializer("grid", randn(rand.New(rand.NewPCG(16, 16)), 0.6, 1, 3, 3, 2))
		a := g.Apply("GridSample", []*ir.Value{x, grid}, ir.AttrS("mode", "bicubic"))
		b := g.Apply("GridSample", []*ir.Value{x, grid}, ir.AttrI("align_corners", 1))
		return g.Apply("Add", []*ir.Value{a, b})
	}},
	{"DFT-17 along axis 1 by default", 17, []int64{2, 8, 3, 1}, func(g *ir.Graph, x *ir.Value) *ir.Value {
		return g.Apply("DFT", []*ir.Value{x}, ir.AttrI("onesided", 1))
	}},
	{"RoiAlign-10 samples as output_half_pixel", 10, []int64{1, 2, 6, 6}, func(g *ir.Graph, x *ir.Value) *ir.Value {
		rois := g.AddInitializer("rois", ir.FromSlice(ir.Float32, []int64{2, 4}, []float32{0.5, 0.7, 4.2, 5.1, 1, 0, 3, 2.5}))
		idx := g.AddInitializer("idx", ir.FromSlice(ir.Int64, []int64{2}, []int64{0, 0}))
		return g.Apply("RoiAlign", []*ir.Value{x, rois, idx}, ir.AttrI("output_height", 3), ir.AttrI("output_width", 2), ir.AttrI("sampling_ratio", 2))
	}},
}

// Each model, raised to opset 13, verifies there and gives what it gave
// at its own opset on the reference executor, on random inputs.
func TestUpgradeMatchesReference(t *testing.T) {
	for i, c := range oldOpsetModels {
		t.Run(c.name, func(t *testing.T) {
			g := ir.NewGraph("old")
			x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(c.x...)))
			y := c.build(g, x)
			y.Name = "y"
			g.SetOutputs(y)
			_, old := modelBytes(t, ir.NewModel(g, c.opset))
			newest, _ := ops.NewestOpset("")
			for _, to := range []int64{13, 18, 21, newest} {
				if to <= c.opset {
					continue
				}
				_, m := modelBytes(t, ir.NewModel(g, c.opset))
				require.NoError(t, Convert(m, to, Reason{}), "to %d", to)
				assert.Equal(t, to, m.Opset(""))
				_, m = modelBytes(t, m) // a valid ONNX file at to
				require.NoError(t, m.Graph.Verify())
				_, err := ops.InferShapes(m)
				require.NoError(t, err)
				for _, n := range m.Graph.Nodes {
					s, err := ops.Lookup("", n.OpType, to)
					require.NoError(t, err)
					require.NoError(t, s.CheckNode(n), "%s", n)
				}
				rng := rand.New(rand.NewPCG(uint64(i), 27))
				for range 3 {
					feeds := map[string]*ir.Tensor{"x": randn(rng, 1, c.x...)}
					want := runReference(t, old, feeds)["y"]
					got := runReference(t, m, feeds)["y"]
					require.Equal(t, want.Dims, got.Dims, "to %d", to)
					assert.InDeltaSlice(t, want.Float32s(), got.Float32s(), 1e-5, "to %d", to)
				}
			}
		})
	}
}

// A node whose op changed on the way in a way the converter has no
// rewrite for is refused naming the node, the op's versions and opsets.
func TestUpgradeRefusesUnknownChange(t *testing.T) {
	// Scan-8 scans a batch of sequences; Scan-9 lost the batch axis, which
	// only a batch of one can lose.
	body := ir.NewGraph("body")
	state := body.AddInput("state", ir.TensorType(ir.Float32, ir.S(2)))
	elem := body.AddInput("elem", ir.TensorType(ir.Float32, ir.S(2)))
	body.SetOutputs(body.Apply("Add", []*ir.Value{state, elem}))
	g := ir.NewGraph("scan")
	init := g.AddInput("init", ir.TensorType(ir.Float32, ir.S(2, 2)))
	xs := g.AddInput("xs", ir.TensorType(ir.Float32, ir.S(2, 3, 2)))
	n := g.AddNode("Scan", []*ir.Value{nil, init, xs}, 1, ir.AttrG("body", body), ir.AttrI("num_scan_inputs", 1))
	n.Name = "scan"
	g.SetOutputs(n.Outputs[0])
	err := Convert(ir.NewModel(g, 8), 13, Reason{Why: "per-channel weight scales need opset 13", Hint: "re-export the model at opset 13"})
	require.Error(t, err)
	for _, s := range []string{`node "scan" (Scan)`, "the model imports opset 8 and per-channel weight scales need opset 13", "no form at 13 that means the same", "batch is not statically 1", "(re-export the model at opset 13)"} {
		assert.Contains(t, err.Error(), s)
	}

	// To an older opset, only ops that did not change convert.
	g = ir.NewGraph("reduce")
	x0 := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(2, 3)))
	axes := g.AddInitializer("axes", int64s([]int64{1}))
	g.SetOutputs(g.Apply("ReduceMax", []*ir.Value{x0, axes}))
	err = Convert(ir.NewModel(g, 18), 13, Reason{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ReduceMax-18 at opset 18 is ReduceMax-1 at opset 13, and kiln converts to an older opset only where the op did not change")
	g = ir.NewGraph("relu")
	x0 = g.AddInput("x", ir.TensorType(ir.Float32, ir.S(2, 3)))
	g.SetOutputs(g.Apply("Relu", []*ir.Value{x0}))
	m := ir.NewModel(g, 18)
	require.NoError(t, Convert(m, 13, Reason{}))
	assert.Equal(t, int64(13), m.Opset(""))

	// A rewrite that cannot say the old meaning at 13 says why.
	g = ir.NewGraph("resize")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 1, 4, 4)))
	scales := g.AddInput("scales", ir.TensorType(ir.Float32, ir.S(4)))
	g.SetOutputs(g.Apply("Resize", []*ir.Value{x, scales}, ir.AttrS("mode", "nearest")))
	err = Convert(ir.NewModel(g, 10), 13, Reason{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not constant")
	assert.Contains(t, err.Error(), "opset 13 was asked for")

	// Dropout-7's mask has the data's type, Dropout-10's is bool.
	g = ir.NewGraph("dropout")
	x = g.AddInput("x", ir.TensorType(ir.Float32, ir.S(2, 3)))
	d := g.AddNode("Dropout", []*ir.Value{x}, 2)
	g.SetOutputs(d.Outputs...)
	err = Convert(ir.NewModel(g, 9), 13, Reason{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "mask output is read")

	// A node not valid at the model's own opset: its meaning there is
	// unknown.
	g = ir.NewGraph("maxpool")
	x = g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 1, 4, 4)))
	g.SetOutputs(g.Apply("MaxPool", []*ir.Value{x}, ir.AttrIs("kernel_shape", 2, 2), ir.AttrI("ceil_mode", 1)))
	err = Convert(ir.NewModel(g, 9), 13, Reason{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "at the model's opset 9")
	assert.Contains(t, err.Error(), "ceil_mode")
}

// Upsample (opset 9, which kiln's registry lacks) becomes Resize-13 with
// Upsample's meaning: each value repeated by the scale, asymmetric.
func TestUpsampleBecomesResize(t *testing.T) {
	g := ir.NewGraph("up")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 2, 2, 3)))
	sc := g.AddInitializer("scales", ir.FromSlice(ir.Float32, []int64{4}, []float32{1, 1, 2, 3}))
	y := g.Apply("Upsample", []*ir.Value{x, sc}, ir.AttrS("mode", "nearest"))
	y.Name = "y"
	g.SetOutputs(y)
	m := ir.NewModel(g, 9)
	require.NoError(t, Convert(m, 13, Reason{}))
	_, m = modelBytes(t, m)
	in := randn(rand.New(rand.NewPCG(5, 5)), 1, 1, 2, 2, 3)
	got := runReference(t, m, map[string]*ir.Tensor{"x": in})["y"]
	require.Equal(t, []int64{1, 2, 4, 9}, got.Dims)
	xs, ys := in.Float32s(), got.Float32s()
	for c := range 2 {
		for h := range 4 {
			for w := range 9 {
				assert.Equal(t, xs[c*6+h/2*3+w/3], ys[c*36+h*9+w])
			}
		}
	}
}

// The table agrees with kiln's registry: each step starts at a row and
// moves forward to one, and from every opset from 7 to every later one up
// to the newest, each registered ONNX op reaches its row there, but for
// the few with no rewrite (refused, naming them). A registry row added
// fails here until the table says what it changed.
func TestTableCoversTheRegistry(t *testing.T) {
	for _, s := range steps {
		v, err := versionAt(s.op, s.from)
		require.NoError(t, err, "%s-%d", s.op, s.from)
		assert.Equal(t, s.from, v, "%s: no row of version %d", s.op, s.from)
		assert.Greater(t, s.to, s.from, "%s-%d", s.op, s.from)
		if s.rewrite == nil {
			v, err := versionAt(s.op, s.to)
			require.NoError(t, err, "%s-%d", s.op, s.to)
			assert.Equal(t, s.to, v, "%s: no row of version %d", s.op, s.to)
		}
	}
	newest, _ := ops.NewestOpset("")
	unreachable := map[string]bool{}
	seen := map[string]bool{}
	for _, row := range ops.All() {
		if row.Domain != "" || seen[row.Name] {
			continue
		}
		seen[row.Name] = true
		for to := int64(8); to <= newest; to++ {
			target, err := versionAt(row.Name, to)
			if err != nil {
				continue
			}
			for opset := int64(7); opset < to; opset++ {
				cur, err := versionAt(row.Name, opset)
				for err == nil && cur != target {
					step, ok := findStep(row.Name, cur)
					if !ok {
						unreachable[fmt.Sprintf("%s-%d", row.Name, cur)] = true
						break
					}
					cur, err = versionAt(row.Name, step.to)
				}
			}
		}
	}
	assert.Empty(t, unreachable)
}

// modelBytes is m as an ONNX file's bytes, and a fresh copy of m read
// back from them.
func modelBytes(t *testing.T, m *ir.Model) ([]byte, *ir.Model) {
	t.Helper()
	buf, err := onnx.Write(m)
	require.NoError(t, err)
	c, err := onnx.Read(buf, "")
	require.NoError(t, err)
	return buf, c
}

func runReference(t *testing.T, m *ir.Model, feeds map[string]*ir.Tensor) map[string]*ir.Tensor {
	t.Helper()
	ex, err := reference.New(m)
	require.NoError(t, err)
	out, err := ex.Run(feeds)
	require.NoError(t, err)
	return out
}

func randn(rng *rand.Rand, sd float64, dims ...int64) *ir.Tensor {
	x := ir.NewTensor(ir.Float32, dims...)
	xs := x.Float32s()
	for i := range xs {
		xs[i] = float32(rng.NormFloat64() * sd)
	}
	return x
}

// Every in-scope ONNX node test older than the newest opset, converted to
// it (and those at 13 or older to 13), gives its expected outputs on the reference wherever the
// unconverted model does.
func TestNodeTestsConverted(t *testing.T) {
	const suite = "../../../shared/onnx-node"
	scope, err := os.ReadFile(suite + ".scope.tsv")
	if err != nil {
		t.Skipf("no node tests: %v", err)
	}
	newest, _ := ops.NewestOpset("")
	tol := conformance.DefaultTolerance
	plain := conformance.Reference{}
	converted := 0
	for _, line := range strings.Split(strings.TrimSpace(string(scope)), "\n")[1:] {
		f := strings.Split(line, "\t")
		opset, _ := strconv.ParseInt(f[3], 10, 64)
		if f[1] != "in" || opset >= newest {
			continue
		}
		dir := filepath.Join(suite, f[0])
		want := conformance.RunTest(dir, plain, tol)
		if want.Status != conformance.Pass {
			continue
		}
		targets := []int64{newest}
		if opset <= 13 {
			targets = append(targets, 13)
		}
		for _, to := range targets {
			b := conformance.Reference{Rewrite: func(m *ir.Model) error {
				if err := Convert(m, to, Reason{}); err != nil {
					return err
				}
				if m.Opset("") != 0 && m.Opset("") != to {
					return fmt.Errorf("opset %d after converting to %d", m.Opset(""), to)
				}
				return nil
			}}
			got := conformance.RunTest(dir, b, tol)
			assert.Equal(t, conformance.Pass, got.Status, "%s at opset %d: %s", f[0], to, got.Detail)
			converted++
		}
	}
	t.Logf("%d conversions of node tests pass", converted)
	assert.Greater(t, converted, 1000)
}
