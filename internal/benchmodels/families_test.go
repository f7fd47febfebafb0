package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// testSize is the input height and width the tests build at: small enough
// to run every family on the reference executor in seconds (the weights
// are full size whatever the input).
const testSize = 32

// torchvisionParams are torchvision's parameter counts (trainable
// parameters: batch norms' weights and biases, not their running
// statistics) for the families that follow torchvision's topology.
var torchvisionParams = map[string]int64{
	"resnet50":           25_557_032,
	"efficientnet_b0":    5_288_548,
	"mobilenet_v3_small": 2_542_856,
}

// Each family builds, verifies, shape-infers and runs on the reference
// executor; the whole model's output equals the node-by-node evaluation
// the builder calibrated on; it is O(1), finite and depends on the input;
// the topology matches torchvision's parameter count where it follows
// torchvision; and the family's characteristic ops are there.
func TestFamilies(t *testing.T) {
	wantOps := map[string][]string{
		"resnet50":           {"BatchNormalization", "Conv", "Relu", "Add", "MaxPool", "GlobalAveragePool", "Flatten", "Gemm"},
		"efficientnet_b0":    {"Conv", "Sigmoid", "Mul", "Add", "GlobalAveragePool", "Gemm"},
		"googlenet":          {"Conv", "Relu", "MaxPool", "Concat", "GlobalAveragePool", "Gemm"},
		"mobilenet_v3_small": {"Conv", "HardSwish", "HardSigmoid", "Relu", "Mul", "Add", "GlobalAveragePool", "Gemm"},
		"convnext_tiny_s12":  {"Conv", "Transpose", "LayerNormalization", "MatMul", "Erf", "Div", "Mul", "Add", "Gemm"},
		"vgg16_112":          {"Conv", "Relu", "MaxPool", "Flatten", "Gemm"},
	}
	for i, f := range families {
		t.Run(f.name, func(t *testing.T) {
			gen, err := generate(f, int64(100+i), testSize)
			if err != nil {
				t.Fatal(err)
			}
			m := gen.model
			if err := m.Verify(); err != nil {
				t.Fatal(err)
			}
			for _, n := range m.Graph.Nodes {
				for _, o := range n.Outputs {
					if !o.Type.Shape.IsStatic() {
						t.Fatalf("%s: output %q has no static shape after inference: %s", n, o.Name, o.Type)
					}
				}
			}
			if got := m.Graph.Outputs[0].Type; !got.Equal(ir.TensorType(ir.Float32, ir.S(1, 1000))) {
				t.Fatalf("output type %s, want float[1,1000]", got)
			}
			// Folding scales the builder's conv outputs where the model scales
			// the weights: the two round differently, and float32 rounding
			// through 80 layers at 1×1 and 2×2 pixels (nothing to average
			// it out) reaches 3e-4; a fold left out would be O(1).
			if d := relL2(gen.net.val[m.Graph.Outputs[0]].Float32s(), gen.output.Float32s()); d > 1e-3 {
				t.Errorf("the reference executor's output differs from the builder's node-by-node evaluation by rel. L2 %.3g", d)
			}
			checkScale(t, gen.output.Float32s())

			// A second input gives a different output: the logits are not
			// the biases alone.
			e, err := reference.New(m)
			if err != nil {
				t.Fatal(err)
			}
			other := gen.net.normal(1, gen.input.Dims...)
			res, err := e.Run(map[string]*ir.Tensor{"input": other})
			if err != nil {
				t.Fatal(err)
			}
			if d := relL2(res["output"].Float32s(), gen.output.Float32s()); d < 0.05 {
				t.Errorf("another input changes the output by rel. L2 %.3g: it barely depends on the input", d)
			}

			ops := map[string]int{}
			for _, n := range m.Graph.Nodes {
				ops[n.OpType]++
			}
			for _, op := range wantOps[f.name] {
				if ops[op] == 0 {
					t.Errorf("no %s node; ops: %v", op, ops)
				}
			}
			if want, ok := torchvisionParams[f.name]; ok {
				// Folding a batch norm turns its weight and bias into the
				// conv's bias (one per channel); a BatchNormalization node
				// adds its running mean and variance (two).
				got := params(m) + gen.net.bnChannels
				if !gen.net.foldBN {
					got = params(m) - 2*gen.net.bnChannels
				}
				if got != want {
					t.Errorf("%d torchvision-equivalent parameters, want %d", got, want)
				}
			}
			for _, v := range m.Graph.Initializers {
				if allZero(v.Const) {
					t.Errorf("initializer %q is all zeros", v.Name)
				}
			}
		})
	}
}

// checkScale fails unless the logits are finite with a standard deviation
// between 0.05 and 50: neither blown up nor vanished through the depth.
func checkScale(t *testing.T, y []float32) {
	t.Helper()
	var sum, sq float64
	for _, v := range y {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("output holds %v", v)
		}
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	n := float64(len(y))
	std := math.Sqrt(sq/n - (sum/n)*(sum/n))
	if std < 0.05 || std > 50 {
		t.Errorf("output std %.3g, want O(1)", std)
	}
}

func relL2(a, b []float32) float64 {
	var d, n float64
	for i := range a {
		d += float64(a[i]-b[i]) * float64(a[i]-b[i])
		n += float64(b[i]) * float64(b[i])
	}
	return math.Sqrt(d / n)
}

func allZero(t *ir.Tensor) bool {
	for i := 0; i < int(t.Len()); i++ {
		if t.Float64At(i) != 0 {
			return false
		}
	}
	return true
}

// write lays a family out as the zoo does, and what it wrote reads back:
// the model is the generated one, the test data its input and reference
// output; the same seed writes the same bytes.
func TestWrite(t *testing.T) {
	f, _ := familyByName("mobilenet_v3_small")
	dir := t.TempDir()
	if _, err := write(dir, f, 7, testSize); err != nil {
		t.Fatal(err)
	}
	m, err := onnx.ReadFile(filepath.Join(dir, f.name, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := onnx.ReadTensorFile(filepath.Join(dir, f.name, "test_data_set_0", "input_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := onnx.ReadTensorFile(filepath.Join(dir, f.name, "test_data_set_0", "output_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := reference.New(m)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Run(map[string]*ir.Tensor{m.Graph.Inputs[0].Name: in})
	if err != nil {
		t.Fatal(err)
	}
	if got := res[m.Graph.Outputs[0].Name]; !slices.Equal(got.Dims, want.Dims) || !bytes.Equal(got.Raw, want.Raw) {
		t.Errorf("the read-back model's output differs from output_0.pb")
	}
	meta, _ := os.ReadFile(filepath.Join(dir, f.name, "meta.json"))
	if !bytes.Contains(meta, []byte(`"shape": [`)) || !bytes.Contains(meta, []byte(`"dtype": "float32"`)) {
		t.Errorf("meta.json lacks the input's dtype and shape:\n%s", meta)
	}

	first, _ := os.ReadFile(filepath.Join(dir, f.name, "model.onnx"))
	if _, err := write(dir, f, 7, testSize); err != nil {
		t.Fatal(err)
	}
	again, _ := os.ReadFile(filepath.Join(dir, f.name, "model.onnx"))
	if !bytes.Equal(first, again) {
		t.Errorf("the same seed wrote a different model")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the folder holds %d entries after two writes, want 1 (no temporary folders left)", len(entries))
	}
}

func TestMakeDivisible(t *testing.T) {
	for _, c := range []struct{ v, want int64 }{{4, 8}, {18, 24}, {24, 24}, {60, 64}, {30, 32}, {36, 40}, {72, 72}, {144, 144}} {
		if got := makeDivisible(c.v, 8); got != c.want {
			t.Errorf("makeDivisible(%d, 8) = %d, want %d", c.v, got, c.want)
		}
	}
}

// A node the reference executor cannot run stops the build with an error
// naming it; the nodes after it do not panic on the missing values.
func TestBuildErrorNamesTheNode(t *testing.T) {
	b, x := newNet("bad", 1, true, 1, 3, 8, 8)
	y := b.op("NoSuchOp", []*ir.Value{x})
	y = b.relu(b.convBN(y, 4, 3, 1, 1))
	_, err := b.model(b.classifier(b.flatten(b.globalAvgPool(y)), 10))
	if err == nil || !strings.Contains(err.Error(), "NoSuchOp") {
		t.Fatalf("got %v, want an error naming NoSuchOp", err)
	}
}
