package ir

import "fmt"

// AttrKind is the kind of an attribute value, numbered as ONNX's
// AttributeProto.AttributeType.
type AttrKind int32

// Attribute kinds.
const (
	AttrUndefined     AttrKind = 0
	AttrFloat         AttrKind = 1
	AttrInt           AttrKind = 2
	AttrString        AttrKind = 3
	AttrTensor        AttrKind = 4
	AttrGraph         AttrKind = 5
	AttrFloats        AttrKind = 6
	AttrInts          AttrKind = 7
	AttrStrings       AttrKind = 8
	AttrTensors       AttrKind = 9
	AttrGraphs        AttrKind = 10
	AttrSparseTensor  AttrKind = 11
	AttrSparseTensors AttrKind = 12
	AttrTypeProto     AttrKind = 13
	AttrTypeProtos    AttrKind = 14
)

var attrKindNames = map[AttrKind]string{
	AttrFloat: "float", AttrInt: "int", AttrString: "string", AttrTensor: "tensor",
	AttrGraph: "graph", AttrFloats: "floats", AttrInts: "ints", AttrStrings: "strings",
	AttrTensors: "tensors", AttrGraphs: "graphs", AttrSparseTensor: "sparse_tensor",
	AttrSparseTensors: "sparse_tensors", AttrTypeProto: "type_proto", AttrTypeProtos: "type_protos",
}

func (k AttrKind) String() string {
	if s, ok := attrKindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("attrkind(%d)", int32(k))
}

// Attribute is a named node attribute. Exactly the field matching Kind is set.
type Attribute struct {
	Name string
	Kind AttrKind

	F             float32
	I             int64
	S             string
	T             *Tensor
	G             *Graph
	Sparse        *SparseTensor
	TP            *Type
	Floats        []float32
	Ints          []int64
	Strings       []string
	Tensors       []*Tensor
	Graphs        []*Graph
	SparseTensors []*SparseTensor
	TypeProtos    []Type

	// RefAttrName is set inside function bodies; kiln rejects functions, but
	// keeps the field so a reader can say so precisely.
	RefAttrName string
	DocString   string
}

// AttrF makes a float attribute.
func AttrF(name string, v float32) *Attribute { return &Attribute{Name: name, Kind: AttrFloat, F: v} }

// AttrI makes an int attribute.
func AttrI(name string, v int64) *Attribute { return &Attribute{Name: name, Kind: AttrInt, I: v} }

// AttrS makes a string attribute.
func AttrS(name, v string) *Attribute { return &Attribute{Name: name, Kind: AttrString, S: v} }

// AttrT makes a tensor attribute.
func AttrT(name string, t *Tensor) *Attribute { return &Attribute{Name: name, Kind: AttrTensor, T: t} }

// AttrG makes a graph attribute.
func AttrG(name string, g *Graph) *Attribute { return &Attribute{Name: name, Kind: AttrGraph, G: g} }

// AttrFs makes a floats attribute.
func AttrFs(name string, v ...float32) *Attribute {
	return &Attribute{Name: name, Kind: AttrFloats, Floats: v}
}

// AttrIs makes an ints attribute.
func AttrIs(name string, v ...int64) *Attribute {
	return &Attribute{Name: name, Kind: AttrInts, Ints: v}
}

// AttrSs makes a strings attribute.
func AttrSs(name string, v ...string) *Attribute {
	return &Attribute{Name: name, Kind: AttrStrings, Strings: v}
}
