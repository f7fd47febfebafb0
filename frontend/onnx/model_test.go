package onnx

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/ir"
	"google.golang.org/protobuf/encoding/protowire"
)

// featureModel uses every part of the format kiln keeps: header fields,
// metadata, doc strings, symbolic/unknown dims with denotations, compound
// types, value_info, an initializer that is also an input, a sparse
// initializer, every attribute kind, and an If whose branches read an outer
// value.
func featureModel() *ir.Model {
	g := ir.NewGraph("main")
	g.DocString = "graph doc"
	g.Metadata = []ir.StringPair{{Key: "gk", Value: "gv"}}
	batch := ir.Sym("N")
	batch.Denotation = "DATA_BATCH"
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.ShapeOf(batch, ir.D(3), ir.UnknownDim())))
	x.DocString = "the input"
	cond := g.AddInput("cond", ir.TensorType(ir.Bool, ir.S()))
	scale := g.AddInput("scale", ir.TensorType(ir.Float16, ir.S(2)))
	scale.Const = ir.FromSlice(ir.Float16, []int64{2}, []uint16{0x3c00, 0xc000})
	scale.Const.Name = "scale"
	g.Initializers = append(g.Initializers, scale)
	w := g.AddInitializer("w", ir.FromSlice(ir.Float32, []int64{3}, []float32{1, -2, 3.5}))
	g.AddInitializer("names", &ir.Tensor{DType: ir.String, Dims: []int64{2}, Strings: []string{"a", ""}, DocString: "tensor doc"})
	g.AddInitializer("i4", &ir.Tensor{DType: ir.Int4, Dims: []int64{3}, Raw: []byte{0x21, 0x03}})
	g.SparseInitializers = []*ir.SparseTensor{{
		Values:  &ir.Tensor{Name: "sp", DType: ir.Float32, Dims: []int64{1}, Raw: []byte{0, 0, 128, 63}},
		Indices: &ir.Tensor{DType: ir.Int64, Dims: []int64{1}, Raw: make([]byte, 8)},
		Dims:    []int64{4},
	}}

	mul := g.AddNode("Mul", []*ir.Value{x, w}, 1)
	mul.Outputs[0].Type = ir.TensorType(ir.Float32, ir.ShapeOf(batch, ir.D(3), ir.UnknownDim()))
	mul.DocString = "node doc"
	mul.Metadata = []ir.StringPair{{Key: "nk", Value: "nv"}}
	g.ValueInfo = append(g.ValueInfo, mul.Outputs[0])

	branch := func(name, op string) *ir.Graph {
		b := ir.NewGraph(name)
		b.SetOutputs(b.Apply(op, []*ir.Value{mul.Outputs[0]}))
		b.Outputs[0].Type = ir.TensorType(ir.Float32, ir.Shape{})
		return b
	}
	iff := g.AddNode("If", []*ir.Value{cond}, 1, ir.AttrG("then_branch", branch("then", "Relu")), ir.AttrG("else_branch", branch("else", "Neg")))
	seqT := ir.Type{Kind: ir.SequenceKind, Inner: &ir.Type{Kind: ir.TensorKind, Elem: ir.Int64, Shape: ir.S(2)}}
	mapT := ir.Type{Kind: ir.MapKind, Elem: ir.String, Inner: &ir.Type{Kind: ir.OptionalKind, Inner: &seqT}, Denotation: "TENSOR"}
	sparseT := ir.Type{Kind: ir.SparseTensorKind, Elem: ir.Float64, Shape: ir.S(4, 4)}
	custom := g.AddNode("Custom", []*ir.Value{iff.Outputs[0], nil, scale}, 2,
		ir.AttrF("f", -0.5), ir.AttrI("i", -7), ir.AttrS("s", "\x00bytes"),
		ir.AttrT("t", ir.Scalar(ir.Int64, int64(42))), ir.AttrFs("fs", 1, 2), ir.AttrIs("is", -1, 1<<40),
		ir.AttrSs("ss", "p", ""),
		&ir.Attribute{Name: "ts", Kind: ir.AttrTensors, Tensors: []*ir.Tensor{ir.Scalar(ir.Int8, int8(-1))}},
		&ir.Attribute{Name: "gs", Kind: ir.AttrGraphs, Graphs: []*ir.Graph{branch("g0", "Abs")}},
		&ir.Attribute{Name: "sp", Kind: ir.AttrSparseTensor, Sparse: g.SparseInitializers[0]},
		&ir.Attribute{Name: "sps", Kind: ir.AttrSparseTensors, SparseTensors: g.SparseInitializers},
		&ir.Attribute{Name: "tp", Kind: ir.AttrTypeProto, TP: &mapT},
		&ir.Attribute{Name: "tps", Kind: ir.AttrTypeProtos, TypeProtos: []ir.Type{seqT, sparseT}, DocString: "attr doc"},
		&ir.Attribute{Name: "empty", Kind: ir.AttrInts},
	)
	custom.Domain, custom.Overload = "com.example", "v2"
	custom.Outputs[1] = nil // an omitted optional output
	custom.Outputs[0].Type = mapT
	g.SetOutputs(custom.Outputs[0], w)

	m := ir.NewModel(g, 17)
	m.OpsetImports = append(m.OpsetImports, ir.OpsetImport{Domain: "com.example", Version: 1})
	m.ProducerVersion, m.Domain, m.ModelVersion, m.DocString = "1.0", "org.kiln", 3, "model doc"
	m.Metadata = []ir.StringPair{{Key: "k", Value: "v"}, {Key: "", Value: ""}}
	return m
}

func TestRoundTripFeatures(t *testing.T) {
	m := featureModel()
	if err := m.Verify(); err != nil {
		t.Fatalf("test model is invalid: %v", err)
	}
	b, err := Write(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Read(b, "")
	if err != nil {
		t.Fatal(err)
	}
	if d := ir.Diff(m, got); d != "" {
		t.Fatal(d)
	}
	if err := got.Verify(); err != nil {
		t.Fatal(err)
	}
	// The If branches must read the outer Mul's output itself, not a copy.
	mul := got.Graph.Nodes[0]
	if then := got.Graph.Nodes[1].Attr("then_branch").G; then.Nodes[0].Inputs[0] != mul.Outputs[0] {
		t.Fatal("subgraph does not point at the outer value")
	}
	if got.Graph.Inputs[2] != got.Graph.Initializers[0] {
		t.Fatal("an initializer that is also an input should be one value")
	}
}

func TestWriteFileReadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.onnx")
	m := featureModel()
	if err := WriteFile(path, m); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := ir.Diff(m, got); d != "" {
		t.Fatal(d)
	}
}

func TestNodesOutOfOrderAreSorted(t *testing.T) {
	g := ir.NewGraph("g")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1)))
	y := g.Apply("Relu", []*ir.Value{x})
	g.SetOutputs(g.Apply("Neg", []*ir.Value{y}))
	g.Nodes[0], g.Nodes[1] = g.Nodes[1], g.Nodes[0]
	b, err := Write(ir.NewModel(g, 17))
	if err != nil {
		t.Fatal(err)
	}
	m, err := Read(b, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(); err != nil {
		t.Fatal(err)
	}
	if ops := m.Graph.Nodes[0].OpType + m.Graph.Nodes[1].OpType; ops != "ReluNeg" {
		t.Fatalf("nodes in order %s", ops)
	}
}

func TestReadErrors(t *testing.T) {
	valid, err := Write(featureModel())
	if err != nil {
		t.Fatal(err)
	}
	undefined := ir.NewGraph("g")
	ghost := &ir.Value{Name: "ghost", Type: ir.TensorType(ir.Float32, ir.S(1))}
	undefined.SetOutputs(undefined.Apply("Relu", []*ir.Value{ghost}))
	undefinedModel, err := Write(ir.NewModel(undefined, 17))
	if err != nil {
		t.Fatal(err)
	}
	// withField is a model with a graph and an empty field num.
	withField := func(num protowire.Number) []byte {
		b := appendMessage(nil, modelGraph, func(b []byte) []byte { return appendString(b, graphName, "g") })
		return appendMessage(b, num, func(b []byte) []byte { return b })
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "no graph"},
		{"truncated", valid[:len(valid)/2], "not an ONNX model: byte 36: field 7 claims 1066 bytes, the file has 529 after it"},
		{"garbage", []byte("this is not an ONNX model at all"), "not an ONNX model: byte 0: field 14 has wire type 4, ModelProto's has 2"},
		{"wrong wire type", protowire.AppendString(protowire.AppendTag(nil, modelIRVersion, protowire.BytesType), "8"), "wire type"},
		{"undefined input", undefinedModel, `node "Relu" (Relu): input "ghost" is not defined`},
		{"functions", withField(modelFunctions), "model-local functions are not supported"},
		{"training_info", withField(modelTrainingInfo), "training_info"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(tc.data, "")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestReadFileMissing(t *testing.T) {
	_, err := ReadFile(filepath.Join(t.TempDir(), "nope.onnx"))
	if !os.IsNotExist(err) {
		t.Fatalf("got %v, want a not-exist error", err)
	}
}
