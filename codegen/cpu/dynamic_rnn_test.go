package cpu

import (
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/ir"
)

// exporterModel reads an exporter's model from testdata/exporters.
func exporterModel(t testing.TB, path string) *ir.Model {
	t.Helper()
	m, err := onnx.ReadFile(filepath.Join("..", "..", "testdata", "exporters", path, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// randMask is a random Bool tensor, mostly true, with the first entry
// of every row true (a row that masks everything out has no softmax).
func randMask(r *rand.Rand, dims ...int64) *ir.Tensor {
	m := ir.NewTensor(ir.Bool, dims...)
	b := ir.Data[uint8](m)
	row := dims[len(dims)-1]
	for i := range b {
		if i%int(row) == 0 || r.Float64() < 0.7 {
			b[i] = 1
		}
	}
	return m
}

// TestDynamicRNN builds recurrent and attention models whose sequence
// length (and batch) are known only at run time once each, and runs the
// engine at several sizes, 1 among them, against the reference.
func TestDynamicRNN(t *testing.T) {
	needLLC(t)
	zoo := func(name string, axes map[int]string) func(testing.TB) *ir.Model {
		return func(t testing.TB) *ir.Model {
			m, _, _ := zooModel(t, name)
			return withDynamicDims(m, axes)
		}
	}
	exported := func(path string) func(testing.TB) *ir.Model {
		return func(t testing.TB) *ir.Model { return exporterModel(t, path) }
	}
	cases := []struct {
		name    string
		load    func(testing.TB) *ir.Model
		profile map[string]DimRange
		sizes   [][]int64 // the first input's shape per run
	}{
		{"lstm_small/N,T", zoo("lstm_small", map[int]string{0: "N", 1: "T"}), map[string]DimRange{"N": {1, 1, 4}, "T": {1, 32, 40}},
			[][]int64{{1, 32, 64}, {2, 1, 64}, {3, 17, 64}, {1, 40, 64}}},
		{"torch113/lstm_gru", exported("torch113/lstm_gru"), map[string]DimRange{"N": {1, 2, 4}, "T": {1, 8, 24}},
			[][]int64{{1, 1, 16}, {2, 8, 16}, {4, 24, 16}, {3, 5, 16}}},
		{"torch113/attention", exported("torch113/attention"), map[string]DimRange{"N": {1, 2, 4}, "S": {1, 8, 24}},
			[][]int64{{1, 1, 32}, {2, 8, 32}, {4, 24, 32}, {3, 5, 32}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := compileLoad(t, optimize(t, tc.load(t)), Options{Profile: tc.profile})
			r := rand.New(rand.NewSource(13))
			inputs := tc.load(t).Graph.Inputs
			var feeds []map[string]*ir.Tensor
			for _, dims := range tc.sizes {
				in := map[string]*ir.Tensor{}
				for _, v := range inputs {
					switch {
					case v.IsConst():
					case v.Type.Elem == ir.Bool:
						in[v.Name] = randMask(r, dims[:2]...)
					default:
						in[v.Name] = randTensor(r, dims...)
					}
				}
				feeds = append(feeds, in)
			}
			checkAtSizes(t, e, func() *ir.Model { return tc.load(t) }, feeds)
		})
	}
}
