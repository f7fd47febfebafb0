package build

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/frontend/text"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// QDQ models as other tools write them compile to integer kernels and
// compute what their QDQ graph says (the reference executor runs it):
//   - tensorrt: TensorRT's quantization-aware training export — symmetric
//     int8 activations, weights as float initializers behind
//     QuantizeLinear → DequantizeLinear, BatchNormalization after each
//     Conv, QDQ on both inputs of the residual Add and nothing after a
//     Conv;
//   - onnxruntime: ORT's static quantizer — uint8 activations with zero
//     points, int8 per-channel weights, int32 biases, a QDQ pair after
//     each Relu.
var qdqModels = map[string]string{
	"tensorrt": `<ir_version: 8, opset_import: ["" : 13]>
g (float[1,8,10,10] X) => (float[1,8,10,10] Y)
<float sa = {0.04}, int8 za = {0}, float sb = {0.05}, float sr = {0.06},
 float[8] sw = {0.004, 0.005, 0.006, 0.007, 0.003, 0.004, 0.005, 0.006}, int8[8] zw = {0, 0, 0, 0, 0, 0, 0, 0},
 float[8] S = {1.2, 0.8, -1.1, 1.0, 0.9, 1.3, 0.7, -0.6}, float[8] T = {0.1, -0.2, 0.3, 0, 0.05, -0.1, 0.2, 0.1},
 float[8] M = {0.05, -0.02, 0.1, 0, 0.03, 0.01, -0.04, 0.02}, float[8] V = {1.1, 0.9, 1.3, 1, 0.8, 1.2, 1.05, 0.95}> {
  Xq = QuantizeLinear(X, sa, za)
  Xd = DequantizeLinear(Xq, sa, za)
  Wq = QuantizeLinear<axis = 0>(W, sw, zw)
  Wd = DequantizeLinear<axis = 0>(Wq, sw, zw)
  C = Conv<pads = [1, 1, 1, 1]>(Xd, Wd)
  B = BatchNormalization(C, S, T, M, V)
  R = Relu(B)
  Rq = QuantizeLinear(R, sb, za)
  Rd = DequantizeLinear(Rq, sb, za)
  W2q = QuantizeLinear<axis = 0>(W2, sw, zw)
  W2d = DequantizeLinear<axis = 0>(W2q, sw, zw)
  C2 = Conv<pads = [1, 1, 1, 1]>(Rd, W2d)
  B2 = BatchNormalization(C2, S, T, M, V)
  B2q = QuantizeLinear(B2, sr, za)
  B2d = DequantizeLinear(B2q, sr, za)
  Sum = Add(B2d, Xd)
  Y = Relu(Sum)
}`,
	"onnxruntime": `<ir_version: 8, opset_import: ["" : 13]>
g (float[1,8,10,10] X) => (float[1,8,10,10] Y)
<float sa = {0.03}, uint8 za = {120}, float sb = {0.02}, uint8 zb = {0},
 float[8] sw = {0.004, 0.005, 0.006, 0.007, 0.003, 0.004, 0.005, 0.006}, int8[8] zw = {0, 0, 0, 0, 0, 0, 0, 0},
 float[8] sbias = {0.00012, 0.00015, 0.00018, 0.00021, 0.00009, 0.00012, 0.00015, 0.00018}> {
  Xq = QuantizeLinear(X, sa, za)
  Xd = DequantizeLinear(Xq, sa, za)
  Wq = QuantizeLinear<axis = 0>(W, sw, zw)
  Wd = DequantizeLinear<axis = 0>(Wq, sw, zw)
  Bd = DequantizeLinear<axis = 0>(Bias, sbias)
  C = Conv<pads = [1, 1, 1, 1]>(Xd, Wd, Bd)
  R = Relu(C)
  Rq = QuantizeLinear(R, sb, zb)
  Rd = DequantizeLinear(Rq, sb, zb)
  P = MaxPool<kernel_shape = [3, 3], pads = [1, 1, 1, 1]>(Rd)
  Pq = QuantizeLinear(P, sb, zb)
  Y = DequantizeLinear(Pq, sb, zb)
}`,
}

func TestForeignQDQModels(t *testing.T) {
	needLLC(t)
	for name, src := range qdqModels {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 5))
			weights := func(dims ...int64) string { // a text initializer of N(0, 0.1²) values
				s := ""
				for i := range ir.Product(dims) {
					if i > 0 {
						s += ", "
					}
					s += ftoa(rng.NormFloat64() * 0.1)
				}
				return s
			}
			text := src[:len(src)-1] // the graph's closing brace comes after the weights
			text = replaceOnce(t, text, "> {\n", ",\n float[8,8,3,3] W = {"+weights(8, 8, 3, 3)+"}, float[8,8,3,3] W2 = {"+weights(8, 8, 3, 3)+
				"}, int32[8] Bias = {100, -200, 300, -50, 0, 75, -125, 250}> {\n")
			text += "}"
			path := filepath.Join(t.TempDir(), name+".onnxtxt")
			require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
			out, err := Build(path, Options{OptLevel: 2, Verify: true})
			require.NoError(t, err)
			kinds := map[string]int{}
			for _, n := range out.Model.Graph.Nodes {
				if n.OpType == ops.FusionGroup {
					kinds[n.Attr("kind").S]++
				}
			}
			assert.Equal(t, 2-strings.Count(name, "onnxruntime"), kinds["qconv"], "integer convolutions: %v", kinds)
			t.Logf("groups: %v", kinds)
			eng, err := runtime.LoadBytes(out.Engine)
			require.NoError(t, err)
			defer eng.Close()
			assert.Equal(t, "int8", eng.Meta.Precision)

			m := readText(t, path)
			ref, err := reference.New(m)
			require.NoError(t, err)
			ctx, err := eng.NewContext(runtime.Options{Threads: 2})
			require.NoError(t, err)
			step := 0.06 // the largest output quantization step
			for seed := range 3 {
				x := ir.NewTensor(ir.Float32, 1, 8, 10, 10)
				r := rand.New(rand.NewPCG(uint64(seed), 1))
				for i := range x.Float32s() {
					x.Float32s()[i] = float32(r.NormFloat64())
				}
				want, err := ref.Run(map[string]*ir.Tensor{"X": x})
				require.NoError(t, err)
				got, err := ctx.Run(map[string]*ir.Tensor{"X": x})
				require.NoError(t, err)
				w, g := want["Y"].Float32s(), got["Y"].Float32s()
				differ := 0
				for i := range w {
					if d := math.Abs(float64(w[i] - g[i])); d > 1e-6 {
						differ++
						require.LessOrEqual(t, d, 2*step+1e-5, "element %d: %g, want %g", i, g[i], w[i])
					}
				}
				t.Logf("seed %d: %d of %d outputs differ from the reference (by a quantization step or two)", seed, differ, len(w))
				assert.Less(t, differ, len(w)/20)
			}
		})
	}
}

func ftoa(v float64) string { return strconv.FormatFloat(v, 'g', 6, 32) }

func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	require.Equal(t, 1, strings.Count(s, old), "%q", old)
	return strings.Replace(s, old, new, 1)
}

func readText(t *testing.T, path string) *ir.Model {
	t.Helper()
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	m, err := text.Parse(path, src)
	require.NoError(t, err)
	return m
}
