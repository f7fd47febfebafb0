package ir

import "fmt"

// TypeKind says which of ONNX's value types a Type is.
type TypeKind uint8

// Value-type kinds, as in ONNX's TypeProto.
const (
	UnknownKind TypeKind = iota // no type information
	TensorKind
	SequenceKind
	MapKind
	OptionalKind
	SparseTensorKind
)

// Type is the type of a value: a tensor (element type + shape) or one of
// ONNX's compound types. kiln reads, prints and writes all of them, but only
// computes with tensors.
type Type struct {
	Kind TypeKind
	// Elem is the element type of a tensor or sparse tensor, and the key
	// type of a map.
	Elem DType
	// Shape of a tensor or sparse tensor; the zero Shape means unknown rank.
	Shape Shape
	// Inner is the element type of a sequence or optional, and the value
	// type of a map.
	Inner *Type
	// Denotation is ONNX's optional type denotation.
	Denotation string
}

// TensorType returns the type of a tensor.
func TensorType(elem DType, shape Shape) Type {
	return Type{Kind: TensorKind, Elem: elem, Shape: shape}
}

// IsTensor reports whether t is a dense tensor type.
func (t Type) IsTensor() bool { return t.Kind == TensorKind }

// Clone returns a deep copy.
func (t Type) Clone() Type {
	c := t
	c.Shape = t.Shape.Clone()
	if t.Inner != nil {
		inner := t.Inner.Clone()
		c.Inner = &inner
	}
	return c
}

// Equal compares two types fully.
func (t Type) Equal(o Type) bool {
	if t.Kind != o.Kind || t.Elem != o.Elem || t.Denotation != o.Denotation || !t.Shape.Equal(o.Shape) {
		return false
	}
	if (t.Inner == nil) != (o.Inner == nil) {
		return false
	}
	return t.Inner == nil || t.Inner.Equal(*o.Inner)
}

// String prints the type in ONNX text syntax, e.g. "float[1,3,N]",
// "seq(int64[])", "map(string, float)".
func (t Type) String() string {
	switch t.Kind {
	case TensorKind:
		// As in the text syntax: "float" is a scalar, "float[]" has
		// unknown rank.
		switch {
		case !t.Shape.Ranked:
			return t.Elem.String() + "[]"
		case len(t.Shape.Dims) == 0:
			return t.Elem.String()
		}
		return t.Elem.String() + t.Shape.String()
	case SparseTensorKind:
		s := "sparse_tensor(" + t.Elem.String()
		if t.Shape.Ranked {
			s += t.Shape.String()
		}
		return s + ")"
	case SequenceKind:
		return "seq(" + t.innerString() + ")"
	case OptionalKind:
		return "optional(" + t.innerString() + ")"
	case MapKind:
		return fmt.Sprintf("map(%s, %s)", t.Elem, t.innerString())
	}
	return "?"
}

func (t Type) innerString() string {
	if t.Inner == nil {
		return "?"
	}
	return t.Inner.String()
}

// Layers are t's sequence and optional layers, outermost first, and the
// tensor type inside them: seq(optional(float[N])) is [SequenceKind,
// OptionalKind] and float[N]. A layer of unknown contents holds an
// unknown tensor type.
func (t Type) Layers() ([]TypeKind, Type) {
	var kinds []TypeKind
	for t.Kind == SequenceKind || t.Kind == OptionalKind {
		kinds = append(kinds, t.Kind)
		if t.Inner == nil {
			return kinds, Type{Kind: TensorKind, Elem: t.Elem}
		}
		t = *t.Inner
	}
	return kinds, t
}

// Layered is inner inside the layers kinds (Layers' inverse).
func Layered(kinds []TypeKind, inner Type) Type {
	for i := len(kinds) - 1; i >= 0; i-- {
		in := inner
		inner = Type{Kind: kinds[i], Inner: &in}
	}
	return inner
}
