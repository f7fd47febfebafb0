package ir

import (
	"strconv"
	"strings"
)

// Dim is one dimension of a shape: a static size, a symbolic name
// (ONNX dim_param), or unknown (neither).
type Dim struct {
	Value int64  // the size, when Param is empty and Value >= 0
	Param string // symbolic name, e.g. "N"
	// Denotation is ONNX's optional semantic tag ("DATA_BATCH", ...).
	Denotation string
}

// D returns a static dimension.
func D(n int64) Dim { return Dim{Value: n} }

// Sym returns a symbolic dimension.
func Sym(name string) Dim { return Dim{Param: name, Value: -1} }

// UnknownDim returns a dimension with neither a size nor a name.
func UnknownDim() Dim { return Dim{Value: -1} }

// IsStatic reports whether the dimension has a known size.
func (d Dim) IsStatic() bool { return d.Param == "" && d.Value >= 0 }

// IsSymbolic reports whether the dimension is named.
func (d Dim) IsSymbolic() bool { return d.Param != "" }

// String prints the size, the name, or "?".
func (d Dim) String() string {
	switch {
	case d.Param != "":
		return d.Param
	case d.Value >= 0:
		return strconv.FormatInt(d.Value, 10)
	}
	return "?"
}

// Shape is a tensor shape. The zero Shape has unknown rank; a ranked shape
// with no dims is a scalar.
type Shape struct {
	Dims   []Dim
	Ranked bool
}

// S returns a static, ranked shape.
func S(dims ...int64) Shape {
	s := Shape{Ranked: true, Dims: make([]Dim, len(dims))}
	for i, n := range dims {
		s.Dims[i] = D(n)
	}
	return s
}

// ShapeOf returns a ranked shape with the given dims.
func ShapeOf(dims ...Dim) Shape {
	return Shape{Ranked: true, Dims: append([]Dim{}, dims...)}
}

// Rank returns the number of dims, or -1 when the rank is unknown.
func (s Shape) Rank() int {
	if !s.Ranked {
		return -1
	}
	return len(s.Dims)
}

// IsStatic reports whether the rank and every dim are known.
func (s Shape) IsStatic() bool {
	if !s.Ranked {
		return false
	}
	for _, d := range s.Dims {
		if !d.IsStatic() {
			return false
		}
	}
	return true
}

// Ints returns the dims of a static shape, and false when it is not static.
func (s Shape) Ints() ([]int64, bool) {
	if !s.IsStatic() {
		return nil, false
	}
	out := make([]int64, len(s.Dims))
	for i, d := range s.Dims {
		out[i] = d.Value
	}
	return out, true
}

// NumElements returns the element count of a static shape, or -1 when the
// shape is not static or the count overflows int64.
func (s Shape) NumElements() int64 {
	dims, ok := s.Ints()
	if !ok {
		return -1
	}
	n, err := ElementCount(dims)
	if err != nil {
		return -1
	}
	return n
}

// Clone returns a deep copy.
func (s Shape) Clone() Shape {
	return Shape{Ranked: s.Ranked, Dims: append([]Dim(nil), s.Dims...)}
}

// Equal compares two shapes dim by dim (names, sizes and denotations).
func (s Shape) Equal(o Shape) bool {
	if s.Ranked != o.Ranked || len(s.Dims) != len(o.Dims) {
		return false
	}
	for i := range s.Dims {
		if s.Dims[i] != o.Dims[i] {
			return false
		}
	}
	return true
}

// String prints "[1,3,N,?]", or "[?...]" for unknown rank.
func (s Shape) String() string {
	if !s.Ranked {
		return "[?...]"
	}
	parts := make([]string, len(s.Dims))
	for i, d := range s.Dims {
		parts[i] = d.String()
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// Product multiplies dims; the product of no dims is 1.
func Product(dims []int64) int64 {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	return n
}
