package cpuabi

import (
	"fmt"
	"math"

	"github.com/kiln-ml/kiln/ir"
)

// HostStep is a node the runtime computes between runs of the code
// (ops.OnHost: strings, image decoding). The code ends its run where the
// step goes (kiln_run returns 0 there); the runtime computes the node,
// then runs the code again from part Resume. Host steps are in the
// order the graph runs them, each after the parts before its Resume.
type HostStep struct {
	Resume int64       `json:"resume"`
	Node   HostNode    `json:"node"`
	In     []HostValue `json:"in"`
	Out    []HostValue `json:"out"`
}

// HostNode is a host step's node: its op, opset and attributes.
type HostNode struct {
	Name   string     `json:"name,omitempty"`
	Domain string     `json:"domain,omitempty"`
	Op     string     `json:"op"`
	Opset  int64      `json:"opset"`
	Attrs  []HostAttr `json:"attrs,omitempty"`
}

// Where a host step's value is.
const (
	InHostTable = "host"  // the runtime's values by name: strings, and what a host step computes at a shape only the data gives
	InArenaAt   = "arena" // the arena, at Off
	InSlot      = "io"    // the io slot Slot: a graph input or output
	AsConst     = "const" // Const, known at compile time
)

// HostValue is an input or output of a host step and where its bytes are.
// An input left out (an optional one) has no Name. Dims and DimNames are
// as in Slot: a value of the code at a dynamic shape names its dims'
// expressions.
type HostValue struct {
	Name     string      `json:"name,omitempty"`
	DType    int         `json:"dtype"` // ir.DType (ONNX's TensorProto.DataType)
	Dims     []int64     `json:"dims,omitempty"`
	DimNames []string    `json:"dim_names,omitempty"`
	Where    string      `json:"where,omitempty"`
	Off      int64       `json:"off,omitempty"`
	Slot     int         `json:"slot,omitempty"`
	Const    *HostTensor `json:"const,omitempty"`
	// Kinds, for a value in the host table, are its sequence and
	// optional layers (as Slot's).
	Kinds []int `json:"kinds,omitempty"`
}

// Kinds are type t's sequence and optional layers as a record holds them,
// and its element type.
func Kinds(t ir.Type) ([]int, ir.DType) {
	layers, inner := t.Layers()
	var kinds []int
	for _, k := range layers {
		kinds = append(kinds, int(k))
	}
	return kinds, inner.Elem
}

// TypeOf is the type a record's kinds and dtype name, at shape.
func TypeOf(kinds []int, dtype ir.DType, shape ir.Shape) ir.Type {
	layers := make([]ir.TypeKind, len(kinds))
	for i, k := range kinds {
		layers[i] = ir.TypeKind(k)
	}
	return ir.Layered(layers, ir.TensorType(dtype, shape))
}

// HostTensor is a tensor value of a host step's record.
type HostTensor struct {
	DType   int      `json:"dtype"`
	Dims    []int64  `json:"dims,omitempty"`
	Raw     []byte   `json:"raw,omitempty"`
	Strings []string `json:"strings,omitempty"`
}

// HostAttr is an attribute of a host node. Floats are stored by their
// bits: JSON has no NaN or infinities.
type HostAttr struct {
	Name    string        `json:"name"`
	Kind    ir.AttrKind   `json:"kind"`
	I       int64         `json:"i,omitempty"`
	F       uint32        `json:"f,omitempty"`
	S       string        `json:"s,omitempty"`
	T       *HostTensor   `json:"t,omitempty"`
	Ints    []int64       `json:"ints,omitempty"`
	Floats  []uint32      `json:"floats,omitempty"`
	Strings []string      `json:"strings,omitempty"`
	Tensors []*HostTensor `json:"tensors,omitempty"`
}

// NewHostTensor records tensor t (a plain tensor: no sequence or optional).
func NewHostTensor(t *ir.Tensor) (*HostTensor, error) {
	if !t.IsTensor() {
		return nil, fmt.Errorf("a %s value", t.Type())
	}
	return &HostTensor{DType: int(t.DType), Dims: t.Dims, Raw: t.Raw, Strings: t.Strings}, nil
}

// Tensor is the recorded tensor, checked: its dtype known and its data
// the size its dims say.
func (h *HostTensor) Tensor() (*ir.Tensor, error) {
	d := ir.DType(h.DType)
	if !d.Valid() || d == ir.Undefined {
		return nil, fmt.Errorf("a tensor of unknown dtype %d", h.DType)
	}
	n, ok := elements(h.Dims)
	if !ok {
		return nil, fmt.Errorf("a %s tensor of dims %v", d, h.Dims)
	}
	t := &ir.Tensor{DType: d, Dims: h.Dims, Raw: h.Raw, Strings: h.Strings}
	if d == ir.String {
		if int64(len(h.Strings)) != n || len(h.Raw) != 0 {
			return nil, fmt.Errorf("a string tensor of dims %v holds %d strings", h.Dims, len(h.Strings))
		}
		return t, nil
	}
	if len(h.Raw) != ir.RawLen(d, n) || len(h.Strings) != 0 {
		return nil, fmt.Errorf("a %s tensor of dims %v holds %d bytes", d, h.Dims, len(h.Raw))
	}
	return t, nil
}

// NewHostNode records node n at opset for a host step; its attributes may
// be of every kind but graphs, sparse tensors and types (no host op has
// them).
func NewHostNode(n *ir.Node, opset int64) (HostNode, error) {
	h := HostNode{Name: n.Name, Domain: n.Domain, Op: n.OpType, Opset: opset}
	for _, a := range n.Attrs {
		r := HostAttr{Name: a.Name, Kind: a.Kind, I: a.I, F: math.Float32bits(a.F), S: a.S, Ints: a.Ints, Strings: a.Strings}
		switch a.Kind {
		case ir.AttrGraph, ir.AttrGraphs, ir.AttrSparseTensor, ir.AttrSparseTensors, ir.AttrTypeProto, ir.AttrTypeProtos:
			return HostNode{}, fmt.Errorf("attribute %q: a host step takes no %s attributes", a.Name, a.Kind)
		}
		for _, f := range a.Floats {
			r.Floats = append(r.Floats, math.Float32bits(f))
		}
		var err error
		if a.T != nil {
			if r.T, err = NewHostTensor(a.T); err != nil {
				return HostNode{}, fmt.Errorf("attribute %q: %w", a.Name, err)
			}
		}
		for _, t := range a.Tensors {
			ht, err := NewHostTensor(t)
			if err != nil {
				return HostNode{}, fmt.Errorf("attribute %q: %w", a.Name, err)
			}
			r.Tensors = append(r.Tensors, ht)
		}
		h.Attrs = append(h.Attrs, r)
	}
	return h, nil
}

// Attributes are the node's attributes, checked as NewHostNode writes
// them.
func (h HostNode) Attributes() ([]*ir.Attribute, error) {
	var out []*ir.Attribute
	for _, r := range h.Attrs {
		a := &ir.Attribute{Name: r.Name, Kind: r.Kind, I: r.I, F: math.Float32frombits(r.F), S: r.S, Ints: r.Ints, Strings: r.Strings}
		switch r.Kind {
		case ir.AttrFloat, ir.AttrInt, ir.AttrString, ir.AttrTensor, ir.AttrFloats, ir.AttrInts, ir.AttrStrings, ir.AttrTensors:
		default:
			return nil, fmt.Errorf("attribute %q of kind %s", r.Name, r.Kind)
		}
		for _, f := range r.Floats {
			a.Floats = append(a.Floats, math.Float32frombits(f))
		}
		var err error
		if r.T != nil {
			if a.T, err = r.T.Tensor(); err != nil {
				return nil, fmt.Errorf("attribute %q: %w", r.Name, err)
			}
		}
		for _, ht := range r.Tensors {
			t, err := ht.Tensor()
			if err != nil {
				return nil, fmt.Errorf("attribute %q: %w", r.Name, err)
			}
			a.Tensors = append(a.Tensors, t)
		}
		out = append(out, a)
	}
	return out, nil
}

// elements is the product of dims, false for a negative dim or one past
// 2^40 elements (no tensor of a host step's record is that large).
func elements(dims []int64) (int64, bool) {
	n := int64(1)
	for _, d := range dims {
		if d < 0 || d > 1<<40 || n > (1<<40)/max(d, 1) {
			return 0, false
		}
		n *= d
	}
	return n, true
}
