package build

import (
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/frontend/text"
	"github.com/kiln-ml/kiln/internal/conformance"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/engine"
	"github.com/kiln-ml/kiln/runtime/reference"
)

func normalTensor(rng *rand.Rand, dims ...int64) *ir.Tensor {
	t := ir.NewTensor(ir.Float32, dims...)
	for i := range ir.Data[float32](t) {
		ir.Data[float32](t)[i] = float32(rng.NormFloat64())
	}
	return t
}

// TestMarkOutputsAll builds digits_cnn (static, and with a dynamic batch)
// with every stored tensor marked: the model's output is bit for bit the
// unmarked engine's, and each debug output is the reference executor's
// value of that name in the source model.
func TestMarkOutputsAll(t *testing.T) {
	needLLC(t)
	for _, c := range []struct {
		path  string
		batch int64
	}{{"../../testdata/models/digits_cnn.onnx", 1}, {"../../testdata/models/digits_cnn_dynamic/model.onnx", 3}} {
		t.Run(filepath.Base(filepath.Dir(c.path))+"/"+filepath.Base(c.path), func(t *testing.T) {
			// One timing cache: both builds make the same Winograd choices,
			// which measurements on a busy machine could otherwise differ on.
			cache := filepath.Join(t.TempDir(), "timing.cache")
			plain, err := Build(c.path, Options{OptLevel: 2, TimingCache: cache})
			require.NoError(t, err)
			marked, err := Build(c.path, Options{OptLevel: 2, TimingCache: cache, MarkOutputs: []string{MarkAll}})
			require.NoError(t, err)
			pe, err := runtime.LoadBytes(plain.Engine)
			require.NoError(t, err)
			me, err := runtime.LoadBytes(marked.Engine)
			require.NoError(t, err)
			assert.Contains(t, me.Meta.BuildFlags, "--mark-outputs=all")

			x := normalTensor(rand.New(rand.NewSource(1)), c.batch, 1, 8, 8)
			feeds := map[string]*ir.Tensor{"input": x}
			run := func(e *runtime.Engine) map[string]*ir.Tensor {
				ctx, err := e.NewContext(runtime.Options{Threads: 2})
				require.NoError(t, err)
				out, err := ctx.Run(feeds)
				require.NoError(t, err)
				return out
			}
			want, got := run(pe), run(me)
			assert.Equal(t, want["output"].Raw, got["output"].Raw, "marking changes what the engine computes")

			var debug []engine.Binding
			for _, b := range me.Outputs() {
				if b.IsDebug() {
					debug = append(debug, b)
				}
			}
			// digits_cnn stores 7 tensors besides its input and output:
			// 3 conv groups, 2 MaxPools, the Flatten and the first Gemm's group.
			require.Len(t, debug, 7)
			byName := map[string]engine.Binding{}
			for _, b := range debug {
				byName[b.Name] = b
				assert.Equal(t, b.Name, b.Debug.Value)
				assert.Empty(t, b.Debug.Scale)
			}
			assert.Equal(t, "/features/features.0/Conv", byName["/features/features.2/Relu_output_0"].Debug.Node, "a group's base op")
			assert.Equal(t, "/features/features.6/MaxPool", byName["/features/features.6/MaxPool_output_0"].Debug.Node)

			// The reference executor computes the same values in the source model.
			m, err := ReadModel(c.path)
			require.NoError(t, err)
			values := map[string]*ir.Value{}
			for _, n := range m.Graph.Nodes {
				for _, v := range n.Outputs {
					values[v.Name] = v
				}
			}
			for _, b := range debug {
				require.Contains(t, values, b.Name)
				m.Graph.Outputs = append(m.Graph.Outputs, values[b.Name])
			}
			ref, err := reference.New(m)
			require.NoError(t, err)
			refOut, err := ref.Run(feeds)
			require.NoError(t, err)
			for _, b := range debug {
				assert.Equal(t, refOut[b.Name].Dims, got[b.Name].Dims, b.Name)
				detail, ok := conformance.Compare(refOut[b.Name], got[b.Name], conformance.Tolerance{RelL2: 1e-5})
				assert.True(t, ok, "%s: %s", b.Name, detail)
			}
		})
	}
}

// Names are marked one by one; what cannot be marked is refused, saying why.
func TestMarkOutputsNamed(t *testing.T) {
	needLLC(t)
	path := "../../testdata/models/digits_cnn.onnx"
	out, err := Build(path, Options{OptLevel: 2, MarkOutputs: []string{"/features/features.6/MaxPool_output_0"}})
	require.NoError(t, err)
	e, err := runtime.LoadBytes(out.Engine)
	require.NoError(t, err)
	require.Len(t, e.Outputs(), 2)
	assert.False(t, e.Outputs()[0].IsDebug())
	assert.Equal(t, "/features/features.6/MaxPool_output_0", e.Outputs()[1].Name)
	assert.True(t, e.Outputs()[1].IsDebug())

	for _, c := range []struct{ mark, want string }{
		{"/features/features.0/Conv_output_0", `"/features/features.0/Conv_output_0" is computed inside the fused node "/features/features.2/Relu" (kind conv) and never stored: mark its output "/features/features.2/Relu_output_0" instead`},
		{"input", `"input" is an input of the model`},
		{"onnx::Conv_42", `"onnx::Conv_42" is a constant of the model`},
		{"output", `"output" is already an output of the model`},
		{"nothing", `the optimized graph has no value "nothing"`},
	} {
		_, err := Build(path, Options{OptLevel: 2, MarkOutputs: []string{c.mark}})
		require.Error(t, err, c.mark)
		assert.Contains(t, err.Error(), "--mark-outputs: "+c.want)
	}
	_, err = Build(path, Options{OptLevel: 2, MarkOutputs: []string{MarkAll, "output"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"all" marks every tensor; give it alone`)
}

// quantizedGraph is the shape of graph the INT8 passes leave (int8
// contract §2): a QuantizeLinear of the input, a MaxPool on uint8 and a
// qconv group whose q-output quantizes the Relu's output; then a Conv and
// Relu whose output an unfused QuantizeLinear quantizes.
const quantizedGraph = `<ir_version: 8, opset_import: ["" : 13, "kiln" : 1]>
g (float[1,2,4,4] x) => (float[1,3,2,2] z)
<
  float x_scale = {0.05}, uint8 x_zp = {128},
  int8[3,2,1,1] w = {1, -2, 3, 4, -5, 6}, float[3] w_scale = {0.1, 0.2, 0.3}, int8[3] w_zp = {0, 0, 0},
  float y_scale = {0.02}, uint8 y_zp = {0}, float[3,3,1,1] w2 = {1, 0, 0, 0, 1, 0, 0, 0, 1}
>
{
  ["quant_x"] xq = QuantizeLinear (x, x_scale, x_zp)
  ["pool"] p_quantized = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (xq)
  ["relu"] yq = kiln.FusionGroup (p_quantized, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp) <
    kind = "qconv",
    body = qconv () => (uint8[1,3,2,2] yq_body)
    {
      ["dq_x"] pf = DequantizeLinear (p_quantized, x_scale, x_zp)
      ["dq_w"] wf = DequantizeLinear <axis = 0> (w, w_scale, w_zp)
      ["conv"] conv_out = Conv (pf, wf)
      ["relu"] relu_out = Relu (conv_out)
      ["q_relu"] yq_body = QuantizeLinear (relu_out, y_scale, y_zp)
    },
    roles = ["dq-input", "dq-weight", "base", "activation", "q-output"]
  >
  ["dq_y"] y = DequantizeLinear (yq, y_scale, y_zp)
  ["conv2"] c2 = Conv (y, w2)
  ["relu2"] r2 = Relu (c2)
  ["q2"] r2q = QuantizeLinear (r2, y_scale, y_zp)
  ["dq2"] z = DequantizeLinear (r2q, y_scale, y_zp)
}
`

// A quantized tensor holds its QuantizeLinear's input, quantized: marked,
// it names that value, the node that computed it (a group's base op) and
// its scale and zero point; a MaxPool's uint8 output keeps its input's
// parameters, and holds the value its name says (p_quantized: p).
func TestMarkOutputsQuantized(t *testing.T) {
	m, err := text.Parse("q.onnxtxt", []byte(quantizedGraph))
	require.NoError(t, err)
	_, err = ops.InferShapes(m)
	require.NoError(t, err)
	debug, err := markOutputs(m.Graph, []string{MarkAll})
	require.NoError(t, err)
	names := []string{}
	for _, v := range m.Graph.Outputs[1:] {
		names = append(names, v.Name)
	}
	assert.Equal(t, []string{"xq", "p_quantized", "yq", "y", "c2", "r2", "r2q"}, names, "every stored tensor but the model's output, in order")
	assert.Equal(t, &engine.Debug{Value: "x", Scale: []float32{0.05}, ZeroPoint: []int32{128}}, debug["xq"], "a model input: no node computed it")
	assert.Equal(t, &engine.Debug{Value: "p", Node: "pool", Scale: []float32{0.05}, ZeroPoint: []int32{128}, Layout: true}, debug["p_quantized"])
	assert.Equal(t, &engine.Debug{Value: "relu_out", Node: "conv", Scale: []float32{0.02}, ZeroPoint: []int32{0}}, debug["yq"])
	assert.Equal(t, &engine.Debug{Value: "r2", Node: "conv2", Scale: []float32{0.02}, ZeroPoint: []int32{0}}, debug["r2q"], "the Conv the Relu follows")
	assert.Equal(t, &engine.Debug{Value: "y", Node: "dq_y"}, debug["y"])
	assert.Equal(t, &engine.Debug{Value: "r2", Node: "conv2"}, debug["r2"])

	// The descriptions pass the engine metadata's checks.
	meta := engine.Metadata{KilnVersion: "0", Precision: "int8", Target: engine.Target{Triple: "x86_64-unknown-linux-gnu"},
		Inputs: []engine.Binding{{Name: "x", DType: "float", Shape: []int64{1, 2, 4, 4}, Index: 0}},
		Outputs: []engine.Binding{{Name: "z", DType: "float", Shape: []int64{1, 3, 2, 2}, Index: 1},
			{Name: "yq", DType: "uint8", Shape: []int64{1, 3, 2, 2}, Index: 2, Debug: debug["yq"]}}}
	require.NoError(t, meta.Validate())
	meta.Outputs[0].Debug = &engine.Debug{Value: "z", Scale: []float32{0.1}}
	assert.ErrorContains(t, meta.Validate(), `output "z": a float tensor has a dequantization scale`)
	meta.Outputs[0].Debug = nil
	meta.Outputs[1].Debug = &engine.Debug{Value: "relu_out", Scale: []float32{0.1, 0.2}, Axis: 1}
	assert.ErrorContains(t, meta.Validate(), "2 dequantization scales along axis 1 of shape [1 3 2 2]")
	meta.Outputs[1].Debug = &engine.Debug{Value: "relu_out", Scale: []float32{-1}}
	assert.ErrorContains(t, meta.Validate(), "scale -1 is not a positive finite number")
	meta.Outputs[1].Debug = nil
	meta.Inputs[0].Debug = &engine.Debug{Value: "x"}
	assert.ErrorContains(t, meta.Validate(), "an input cannot be a debug output")
}

func TestFloatName(t *testing.T) {
	for name, want := range map[string]string{
		"P_quantized": "P", "P_quantized_2": "P", "relu_out_QuantizeLinear_Output": "relu_out",
		"P": "P", "_quantized": "_quantized", "conv_2": "conv_2", "x_quantized_a": "x_quantized_a",
	} {
		assert.Equal(t, want, floatName(name), name)
	}
}
