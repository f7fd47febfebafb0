package cpu

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/ir"
)

// withDynamicDims renames the given axes of the model's (non-constant)
// inputs and outputs to symbols, as an export with dynamic axes names
// them, and drops the intermediate types the export recorded at its size.
func withDynamicDims(m *ir.Model, axes map[int]string) *ir.Model {
	for _, v := range append(slices.Clone(m.Graph.Inputs), m.Graph.Outputs...) {
		if v.IsConst() {
			continue
		}
		for a, name := range axes {
			if a < v.Type.Shape.Rank() {
				v.Type.Shape.Dims[a] = ir.Sym(name)
			}
		}
	}
	return m
}

// sizeGenericBert rewrites the zoo's tiny_bert, whose trace baked its
// batch (1) and sequence (128) into the attention's Reshape targets, into
// the export a dynamic-axes trace gives: [S, N*heads, 64] as [0, -1, 64],
// [S*N, 256] as [-1, 256], and [S, N, 256] read from the layer's input by
// Shape. (The graph is [S, N, E] inside: nn.MultiheadAttention's layout.)
func sizeGenericBert(t testing.TB, m *ir.Model) *ir.Model {
	t.Helper()
	g := m.Graph
	byName := map[string]*ir.Value{}
	for _, n := range g.Nodes {
		for _, o := range n.Outputs {
			byName[o.Name] = o
		}
	}
	targets := map[string][]int64{"[128 4 64]": {0, -1, 64}, "[128 256]": {-1, 256}}
	var shapes []*ir.Node
	for _, n := range g.Nodes {
		if n.OpType != "Reshape" {
			continue
		}
		target := constantValue(n.Inputs[1])
		if target == nil {
			t.Fatalf("%s: shape is not constant", n.Name)
		}
		key := fmt.Sprint(target.Int64s())
		if v, ok := targets[key]; ok {
			n.Inputs[1] = g.AddInitializer(g.UniqueName(n.Name+"/target"), ir.FromSlice(ir.Int64, []int64{int64(len(v))}, v))
			continue
		}
		if key != "[128 1 256]" {
			t.Fatalf("%s: unexpected Reshape target %s", n.Name, key)
		}
		layer := n.Name[:len(n.Name)-len("/Reshape_4")]
		in := byName[layer+"/Transpose_output_0"]
		if in == nil {
			t.Fatalf("%s: no layer input %s/Transpose_output_0", n.Name, layer)
		}
		sh := &ir.Node{Name: layer + "/ShapeOfInput", OpType: "Shape", Inputs: []*ir.Value{in}}
		sh.Outputs = []*ir.Value{{Name: sh.Name + "_output_0", Producer: sh}}
		shapes = append(shapes, sh)
		n.Inputs[1] = sh.Outputs[0]
	}
	g.Nodes = append(g.Nodes, shapes...)
	if err := g.TopoSort(); err != nil {
		t.Fatal(err)
	}
	return m
}

// constantValue is v's value when an initializer or a Constant node gives it.
func constantValue(v *ir.Value) *ir.Tensor {
	if v.IsConst() {
		return v.Const
	}
	if p := v.Producer; p != nil && p.OpType == "Constant" {
		if a := p.Attr("value"); a != nil {
			return a.T
		}
	}
	return nil
}

// visionExport is a model of testdata rather than of the zoo.
const visionExport = "../../testdata/exporters/torch113/vision/model.onnx"

// loadDynamicCase reads a zoo model by name, or a model file by path.
func loadDynamicCase(t testing.TB, model string) *ir.Model {
	t.Helper()
	if !strings.HasSuffix(model, ".onnx") {
		m, _, _ := zooModel(t, model)
		return m
	}
	m, err := onnx.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDynamicZoo builds zoo models with dynamic axes once each and runs
// every engine at several sizes in its range against the reference.
func TestDynamicZoo(t *testing.T) {
	needLLC(t)
	cases := []struct {
		name, model string
		axes        map[int]string
		profile     map[string]DimRange
		sizes       [][]int64 // the input's shape per run
		fix         func(testing.TB, *ir.Model) *ir.Model
	}{
		{"digits_cnn/N", "digits_cnn", map[int]string{0: "N"}, map[string]DimRange{"N": {1, 1, 4}}, [][]int64{{1, 1, 8, 8}, {4, 1, 8, 8}, {3, 1, 8, 8}}, nil},
		{"lstm_small/N", "lstm_small", map[int]string{0: "N"}, map[string]DimRange{"N": {1, 1, 4}}, [][]int64{{1, 32, 64}, {4, 32, 64}, {3, 32, 64}}, nil},
		{"tiny_bert/N", "tiny_bert", map[int]string{0: "N"}, map[string]DimRange{"N": {1, 1, 3}}, [][]int64{{1, 128, 256}, {3, 128, 256}, {2, 128, 256}}, sizeGenericBert},
		{"tiny_bert/N,S", "tiny_bert", map[int]string{0: "N", 1: "S"}, map[string]DimRange{"N": {1, 1, 3}, "S": {1, 32, 160}},
			[][]int64{{1, 128, 256}, {2, 32, 256}, {1, 1, 256}, {3, 160, 256}, {2, 77, 256}}, sizeGenericBert},
		{"squeezenet1_1/N,H,W", "squeezenet1_1", map[int]string{0: "N", 2: "H", 3: "W"},
			map[string]DimRange{"N": {1, 1, 2}, "H": {48, 64, 112}, "W": {48, 64, 112}},
			[][]int64{{1, 3, 64, 64}, {2, 3, 96, 80}, {1, 3, 112, 112}, {1, 3, 49, 51}}, nil},
		{"resnet18/H,W", "resnet18", map[int]string{2: "H", 3: "W"},
			map[string]DimRange{"H": {32, 64, 112}, "W": {32, 64, 112}},
			[][]int64{{1, 3, 64, 64}, {1, 3, 96, 80}, {1, 3, 33, 47}}, nil},
		// The U-Net (MaxPool, ConvTranspose upsampling, skip Concats) over
		// dynamic N, H and W: ConvTranspose gathers its taps.
		{"unet_small/N,H,W", "../../testdata/models/unet_small.onnx", map[int]string{0: "N", 2: "H", 3: "W"},
			map[string]DimRange{"N": {1, 1, 2}, "H": {8, 16, 32}, "W": {8, 16, 32}},
			[][]int64{{1, 3, 16, 16}, {2, 3, 32, 24}, {1, 3, 8, 32}}, nil},
		// A PyTorch export with dynamic axes N, H, W (already symbolic):
		// strided Conv, InstanceNormalization, DepthToSpace, Resize and
		// GlobalAveragePool over sizes known only at run time.
		{"torch113_vision/N,H,W", visionExport, nil,
			map[string]DimRange{"N": {1, 1, 2}, "H": {8, 16, 64}, "W": {8, 16, 64}},
			[][]int64{{1, 3, 16, 16}, {2, 3, 24, 20}, {1, 3, 9, 13}, {2, 3, 64, 64}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			load := func() *ir.Model {
				m := loadDynamicCase(t, tc.model)
				if tc.fix != nil {
					m = tc.fix(t, m)
				}
				return withDynamicDims(m, tc.axes)
			}
			e := compileLoad(t, optimize(t, load()), Options{Profile: tc.profile})
			r := rand.New(rand.NewSource(11))
			name := load().Graph.Inputs[0].Name
			var feeds []map[string]*ir.Tensor
			for _, dims := range tc.sizes {
				feeds = append(feeds, map[string]*ir.Tensor{name: randTensor(r, dims...)})
			}
			checkAtSizes(t, e, load, feeds)
		})
	}
}

// checkAtSizes runs engine e on each feed at 1 and 2 threads and
// compares every output with the reference's run of model().
func checkAtSizes(t *testing.T, e *Engine, model func() *ir.Model, feeds []map[string]*ir.Tensor) {
	t.Helper()
	for _, in := range feeds {
		want := runRef(t, model(), in)
		for _, threads := range []int{1, 2} {
			got, err := e.Run(in, threads, nil)
			if err != nil {
				t.Fatalf("%v: %v", shapesOf(in), err)
			}
			for out, w := range want {
				if err := compareOut(got[out], w); err != nil {
					t.Errorf("%v, %d threads, %s: %v", shapesOf(in), threads, out, err)
				}
			}
		}
	}
}

// shapesOf lists the feeds' dims, for messages.
func shapesOf(in map[string]*ir.Tensor) map[string][]int64 {
	s := map[string][]int64{}
	for k, v := range in {
		s[k] = v.Dims
	}
	return s
}
