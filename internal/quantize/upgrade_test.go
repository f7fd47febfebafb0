package quantize

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/internal/dataset"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
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
			_, m := modelBytes(t, ir.NewModel(g, c.opset))
			require.NoError(t, upgradeOpset(m, qdqOpset, false))
			assert.Equal(t, int64(qdqOpset), m.Opset(""))
			_, m = modelBytes(t, m) // a valid ONNX file at 13
			require.NoError(t, m.Graph.Verify())
			_, err := ops.InferShapes(m)
			require.NoError(t, err)
			for _, n := range m.Graph.Nodes {
				s, err := ops.Lookup("", n.OpType, qdqOpset)
				require.NoError(t, err)
				require.NoError(t, s.CheckNode(n), "%s", n)
			}
			rng := rand.New(rand.NewPCG(uint64(i), 27))
			for range 3 {
				feeds := map[string]*ir.Tensor{"x": randn(rng, 1, c.x...)}
				want := runReference(t, old, feeds)["y"]
				got := runReference(t, m, feeds)["y"]
				require.Equal(t, want.Dims, got.Dims)
				assert.InDeltaSlice(t, want.Float32s(), got.Float32s(), 1e-6)
			}
		})
	}
}

// A node whose op changed on the way to 13 in a way the upgrader has no
// rewrite for is refused naming the node, the op's versions and opsets.
func TestUpgradeRefusesUnknownChange(t *testing.T) {
	// Scan-8 scans a batch of sequences; Scan-9 lost the batch axis.
	body := ir.NewGraph("body")
	state := body.AddInput("state", ir.TensorType(ir.Float32, ir.S(2)))
	elem := body.AddInput("elem", ir.TensorType(ir.Float32, ir.S(2)))
	body.SetOutputs(body.Apply("Add", []*ir.Value{state, elem}))
	g := ir.NewGraph("scan")
	init := g.AddInput("init", ir.TensorType(ir.Float32, ir.S(1, 2)))
	xs := g.AddInput("xs", ir.TensorType(ir.Float32, ir.S(1, 3, 2)))
	n := g.AddNode("Scan", []*ir.Value{nil, init, xs}, 1, ir.AttrG("body", body), ir.AttrI("num_scan_inputs", 1))
	n.Name = "scan"
	g.SetOutputs(n.Outputs[0])
	_, err := Quantize(ir.NewModel(g, 8), nil, Options{Method: Method{Name: "minmax"}})
	require.Error(t, err)
	for _, s := range []string{`node "scan" (Scan)`, "the model imports opset 8 and per-channel weight scales need opset 13", "Scan-8 at opset 8 is Scan-11 at opset 13", "cannot rewrite this node", "re-export the model at opset 13"} {
		assert.Contains(t, err.Error(), s)
	}
	assert.NotContains(t, err.Error(), "--per-tensor", "per tensor needs opset 10 too")

	// A rewrite that cannot say the old meaning at 13 says why.
	g = ir.NewGraph("resize")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 1, 4, 4)))
	scales := g.AddInput("scales", ir.TensorType(ir.Float32, ir.S(4)))
	g.SetOutputs(g.Apply("Resize", []*ir.Value{x, scales}, ir.AttrS("mode", "nearest")))
	err = upgradeOpset(ir.NewModel(g, 10), qdqOpset, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not constant")
	assert.Contains(t, err.Error(), "re-export the model at opset 13")

	// Dropout-7's mask has the data's type, Dropout-10's is bool.
	g = ir.NewGraph("dropout")
	x = g.AddInput("x", ir.TensorType(ir.Float32, ir.S(2, 3)))
	d := g.AddNode("Dropout", []*ir.Value{x}, 2)
	g.SetOutputs(d.Outputs...)
	err = upgradeOpset(ir.NewModel(g, 9), qdqOpset, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "mask output is read")

	// A node not valid at the model's own opset: its meaning there is
	// unknown.
	g = ir.NewGraph("maxpool")
	x = g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 1, 4, 4)))
	g.SetOutputs(g.Apply("MaxPool", []*ir.Value{x}, ir.AttrIs("kernel_shape", 2, 2), ir.AttrI("ceil_mode", 1)))
	err = upgradeOpset(ir.NewModel(g, 9), qdqOpset, false)
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
	require.NoError(t, upgradeOpset(m, qdqOpset, false))
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

// The digits CNN (Conv, Relu, MaxPool, Flatten, Gemm), its opset import
// rewritten to 9 and to 11, quantizes per channel at 13 and keeps the
// float model's top-1 accuracy on the held-out digits and its agreement
// on the calibration data; so does it written as Caffe2-era exporters
// write (IR version 3, every initializer also a graph input), whose
// weights must still quantize as constants.
func TestDigitsAtOldOpsets(t *testing.T) {
	const data = "../../testdata/data"
	src, err := os.ReadFile("../../testdata/models/digits_cnn.onnx")
	require.NoError(t, err)
	for _, c := range []struct {
		opset  int64
		caffe2 bool
	}{{9, false}, {11, false}, {9, true}} {
		opset := c.opset
		t.Run(fmt.Sprint("opset ", opset, " caffe2 ", c.caffe2), func(t *testing.T) {
			_, m := modelBytesOf(t, src)
			m.OpsetImports = []ir.OpsetImport{{Domain: "", Version: opset}}
			if opset < 10 { // MaxPool-8 has no ceil_mode; the model's is the default
				for _, n := range m.Graph.Nodes {
					if a := takeAttr(n, "ceil_mode"); a != nil {
						require.Zero(t, a.I)
					}
				}
			}
			_, float := modelBytes(t, m)
			if c.caffe2 {
				m.IRVersion = 3
				m.Graph.Inputs = append(m.Graph.Inputs, m.Graph.Initializers...)
			}
			old, m := modelBytes(t, m)
			res := quantizeOnReference(t, m, old, Options{Data: []string{filepath.Join(data, "digits_calib", "x.pb")}})
			assert.Equal(t, opset, res.UpgradedFrom)
			assert.Equal(t, int64(qdqOpset), res.Model.Opset(""))
			assert.NotEmpty(t, res.Units)
			perChannel := false
			for _, n := range res.Model.Graph.Nodes {
				perChannel = perChannel || n.OpType == "DequantizeLinear" && n.Attr("axis") != nil
			}
			assert.True(t, perChannel, "per-channel weight scales")
			w, ok := res.Worst()
			require.True(t, ok)
			assert.False(t, w.Bad(), "agreement with the float model on the calibration data: %+v", w)

			inputs, err := runInputs(float)
			require.NoError(t, err)
			test, err := dataset.Read([]string{filepath.Join(data, "digits_test", "x.pb")}, inputs, ir.Limits{})
			require.NoError(t, err)
			labels, err := dataset.ReadLabels(filepath.Join(data, "digits_test", "y.pb"), ir.Limits{})
			require.NoError(t, err)
			out := float.Graph.Outputs[0].Name
			fp32 := top1(t, referenceRun(t, float), out, test, labels)
			int8 := top1(t, referenceRun(t, res.Model), out, test, labels)
			t.Logf("opset %d: top-1 fp32 %.4f, int8 %.4f", opset, fp32, int8)
			assert.Greater(t, fp32, 0.97)
			assert.InDelta(t, fp32, int8, 0.005)
		})
	}
}

// Per tensor, opsets 10 to 12 need no upgrade: QuantizeLinear-10 has
// every per-tensor form; opset 9 has no QuantizeLinear and is raised.
func TestPerTensorKeepsOpset(t *testing.T) {
	m9 := convNet(5)
	m9.OpsetImports[0].Version = 9
	src9, m9 := modelBytes(t, m9)
	calib9 := writeTensor(t, t.TempDir(), "x.pb", randn(rand.New(rand.NewPCG(3, 3)), 1, 4, 3, 8, 8))
	res9 := quantizeOnReference(t, m9, src9, Options{Data: []string{calib9}, PerTensor: true, QuantizeAll: true})
	assert.Equal(t, int64(9), res9.UpgradedFrom)
	assert.Equal(t, int64(qdqOpset), res9.Model.Opset(""))

	m := convNet(5)
	m.OpsetImports[0].Version = 11
	src, m := modelBytes(t, m)
	calib := writeTensor(t, t.TempDir(), "x.pb", randn(rand.New(rand.NewPCG(3, 3)), 1, 4, 3, 8, 8))
	res := quantizeOnReference(t, m, src, Options{Data: []string{calib}, PerTensor: true, QuantizeAll: true})
	assert.Zero(t, res.UpgradedFrom)
	assert.Equal(t, int64(11), res.Model.Opset(""))
	_, back := modelBytes(t, res.Model)
	_, err := ops.InferShapes(back)
	require.NoError(t, err)
	w, ok := res.Worst()
	require.True(t, ok)
	assert.False(t, w.Bad())
}

// The upgrade table agrees with kiln's registry: each step starts at a
// row (or an unregistered op's version) and moves forward, and from every
// opset 7 to 12 each registered ONNX op reaches its opset-13 row, but for
// the few with no rewrite (refused, naming them). A registry row added
// between 7 and 13 fails here until the table says what it changed.
func TestUpgradeTableCoversTheRegistry(t *testing.T) {
	for _, s := range upgrades {
		v, err := versionAt(s.op, s.from)
		require.NoError(t, err, "%s-%d", s.op, s.from)
		assert.Equal(t, s.from, v, "%s: no row of version %d", s.op, s.from)
		assert.Greater(t, s.to, s.from, "%s-%d", s.op, s.from)
	}
	unreachable := map[string]bool{}
	seen := map[string]bool{}
	for _, row := range ops.All() {
		if row.Domain != "" || seen[row.Name] {
			continue
		}
		seen[row.Name] = true
		target, err := versionAt(row.Name, qdqOpset)
		if err != nil {
			continue
		}
		for opset := int64(7); opset < qdqOpset; opset++ {
			cur, err := versionAt(row.Name, opset)
			for err == nil && cur != target {
				step, ok := findUpgrade(row.Name, cur)
				if !ok {
					unreachable[fmt.Sprintf("%s-%d", row.Name, cur)] = true
					break
				}
				cur, err = versionAt(row.Name, step.to)
			}
		}
	}
	assert.Equal(t, map[string]bool{
		// Quantized already: refused before any upgrade.
		"QuantizeLinear-10": true, "DequantizeLinear-10": true,
		// Scan-9 dropped Scan-8's batch axis: no rewrite here.
		"Scan-8": true,
	}, unreachable)
}
