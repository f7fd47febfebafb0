package quantize

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/internal/dataset"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// cc quantize raises models older than opset 13 through ir/version; these
// tests hold what that gives a quantized model (ir/version tests the
// conversion itself).

// A node the converter cannot raise is refused with quantizing's reason
// and what else the user can do.
func TestQuantizeRefusesWhatCannotRise(t *testing.T) {
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
	_, err := Quantize(ir.NewModel(g, 8), nil, Options{Method: Method{Name: "minmax"}})
	require.Error(t, err)
	for _, s := range []string{`node "scan" (Scan)`, "the model imports opset 8 and per-channel weight scales need opset 13", "no form at 13 that means the same", "batch is not statically 1", "re-export the model at opset 13"} {
		assert.Contains(t, err.Error(), s)
	}
	assert.NotContains(t, err.Error(), "--per-tensor", "per tensor needs opset 10 too")
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
					for i, a := range n.Attrs {
						if a.Name == "ceil_mode" {
							require.Zero(t, a.I)
							n.Attrs = slices.Delete(n.Attrs, i, i+1)
							break
						}
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
