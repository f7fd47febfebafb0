package ir

import (
	"fmt"
	"math"
	"unsafe"
)

// Tensor is a constant n-dimensional array: an initializer, an attribute
// value, or a runtime value in the reference executor.
//
// Numeric data lives in Raw as little-endian bytes laid out like ONNX's
// raw_data (float16/bfloat16 as their 16-bit patterns, bool as one byte).
// Raw is always 8-byte aligned when it comes from this package, so the typed
// views below are free. Strings live in Strings.
type Tensor struct {
	Name    string
	DType   DType
	Dims    []int64
	Raw     []byte
	Strings []string
	// DocString is ONNX's tensor doc_string.
	DocString string
	// Kind is SequenceKind or OptionalKind for the reference executor's
	// values of those types (ONNX's SequenceProto and OptionalProto), which
	// travel where tensors do (kernel inputs and outputs, subgraph
	// arguments); the zero value is a plain tensor. Elems then holds the
	// sequence's values in order, or the optional's value (none when it is
	// empty); DType is their element type and Dims, Raw and Strings are
	// unused.
	Kind  TypeKind
	Elems []*Tensor
}

// NewSequence makes a sequence value of elements of type dtype; it shares
// elems.
func NewSequence(dtype DType, elems []*Tensor) *Tensor {
	return &Tensor{Kind: SequenceKind, DType: dtype, Elems: elems}
}

// NewOptional makes an optional value holding elem, or none when elem is
// nil (dtype is then the type it would hold).
func NewOptional(dtype DType, elem *Tensor) *Tensor {
	t := &Tensor{Kind: OptionalKind, DType: dtype}
	if elem != nil {
		t.Elems = []*Tensor{elem}
	}
	return t
}

// IsTensor reports whether t is a plain tensor, not a sequence or optional.
func (t *Tensor) IsTensor() bool { return t.Kind == UnknownKind || t.Kind == TensorKind }

// Numeric is the set of Go types a tensor's elements can be viewed as.
type Numeric interface {
	~float32 | ~float64 | ~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~bool
}

// NewTensor allocates a zeroed tensor. Its size must have been checked
// (Limits.CheckTensor): a negative dim or a size that overflows is a
// programming error here, not a silently wrapped allocation.
func NewTensor(dtype DType, dims ...int64) *Tensor {
	t := &Tensor{DType: dtype, Dims: append([]int64{}, dims...)}
	size, err := ByteSize(dtype, dims)
	if err != nil {
		panic(fmt.Sprintf("ir.NewTensor(%s%v): %v", dtype, dims, err))
	}
	if dtype == String {
		t.Strings = make([]string, Product(dims))
		return t
	}
	t.Raw = AlignedBytes(int(size))
	return t
}

// RawLen is the byte length of n elements of dtype in raw form.
func RawLen(dtype DType, n int64) int {
	switch s := dtype.Size(); {
	case s > 0:
		return int(n) * s
	case s < 0: // PerByte elements per byte, the last byte padded
		k := dtype.PerByte()
		return int((n + k - 1) / k)
	}
	return 0
}

// AlignedBytes returns n zeroed bytes whose start is 8-byte aligned.
func AlignedBytes(n int) []byte {
	if n == 0 {
		return []byte{}
	}
	words := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n)
}

// FromSlice makes a tensor that shares data's memory.
func FromSlice[T Numeric](dtype DType, dims []int64, data []T) *Tensor {
	var zero T
	if int(unsafe.Sizeof(zero)) != dtype.Size() {
		panic(fmt.Sprintf("ir.FromSlice: %T does not match %s", zero, dtype))
	}
	if int64(len(data)) != Product(dims) {
		panic(fmt.Sprintf("ir.FromSlice: %d elements for shape %v", len(data), dims))
	}
	t := &Tensor{DType: dtype, Dims: append([]int64{}, dims...)}
	if len(data) == 0 {
		t.Raw = []byte{}
	} else {
		t.Raw = unsafe.Slice((*byte)(unsafe.Pointer(&data[0])), len(data)*int(unsafe.Sizeof(zero)))
	}
	return t
}

// FromRaw makes a tensor from little-endian bytes, copying them into aligned
// memory (the one copy a model's weights go through when read).
func FromRaw(dtype DType, dims []int64, raw []byte) *Tensor {
	t := &Tensor{DType: dtype, Dims: append([]int64{}, dims...)}
	t.Raw = AlignedBytes(len(raw))
	copy(t.Raw, raw)
	return t
}

// Scalar makes a rank-0 tensor.
func Scalar[T Numeric](dtype DType, v T) *Tensor {
	return FromSlice(dtype, nil, []T{v})
}

// Data views a numeric tensor's elements as a []T without copying. T must
// have the dtype's size; float16/bfloat16 view as uint16.
func Data[T Numeric](t *Tensor) []T {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if size != t.DType.Size() {
		panic(fmt.Sprintf("ir.Data: cannot view %s as %T", t.DType, zero))
	}
	if len(t.Raw) == 0 {
		return []T{}
	}
	if uintptr(unsafe.Pointer(&t.Raw[0]))%uintptr(size) != 0 {
		// Realign once; tensors built by this package never get here.
		t.Raw = append(AlignedBytes(len(t.Raw))[:0], t.Raw...)
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&t.Raw[0])), len(t.Raw)/size)
}

// Len returns the number of elements.
func (t *Tensor) Len() int64 { return Product(t.Dims) }

// Shape returns the tensor's static shape.
func (t *Tensor) Shape() Shape { return S(t.Dims...) }

// Type returns the tensor's type. A sequence's element type has the dims
// its elements share (unknown where they differ, no rank where their ranks
// do); an empty sequence's or optional's has no rank.
func (t *Tensor) Type() Type {
	if t.IsTensor() {
		return TensorType(t.DType, t.Shape())
	}
	inner := TensorType(t.DType, Shape{})
	for i, e := range t.Elems {
		if i == 0 {
			inner = e.Type()
			continue
		}
		inner = commonType(inner, e.Type())
	}
	return Type{Kind: t.Kind, Inner: &inner}
}

// commonType is the type that holds a value of a or b, of the same element
// type: dims equal in both stay.
func commonType(a, b Type) Type {
	if a.Kind != TensorKind || b.Kind != TensorKind {
		return a // nested sequences: the first element's type
	}
	if !a.Shape.Ranked || !b.Shape.Ranked || len(a.Shape.Dims) != len(b.Shape.Dims) {
		return TensorType(a.Elem, Shape{})
	}
	dims := make([]Dim, len(a.Shape.Dims))
	for i, d := range a.Shape.Dims {
		if d.IsStatic() && b.Shape.Dims[i].IsStatic() && d.Value == b.Shape.Dims[i].Value {
			dims[i] = d
		} else {
			dims[i] = UnknownDim()
		}
	}
	return TensorType(a.Elem, ShapeOf(dims...))
}

// Float32s views a float32 tensor's data.
func (t *Tensor) Float32s() []float32 { return Data[float32](t) }

// Int64s views an int64 tensor's data.
func (t *Tensor) Int64s() []int64 { return Data[int64](t) }

// Clone returns a deep copy.
func (t *Tensor) Clone() *Tensor {
	c := *t
	c.Dims = append([]int64{}, t.Dims...)
	if t.Raw != nil {
		c.Raw = AlignedBytes(len(t.Raw))
		copy(c.Raw, t.Raw)
	}
	if t.Strings != nil {
		c.Strings = append([]string{}, t.Strings...)
	}
	if t.Elems != nil {
		c.Elems = make([]*Tensor, len(t.Elems))
		for i, e := range t.Elems {
			c.Elems[i] = e.Clone()
		}
	}
	return &c
}

// Float64At returns element i converted to float64, for any numeric dtype
// (the 8-, 4- and 2-bit types included: smallfloat.go).
func (t *Tensor) Float64At(i int) float64 {
	switch t.DType {
	case Float32:
		return float64(Data[float32](t)[i])
	case Float64:
		return Data[float64](t)[i]
	case Float16:
		return float64(HalfToFloat32(Data[uint16](t)[i]))
	case BFloat16:
		return float64(BFloat16ToFloat32(Data[uint16](t)[i]))
	case Int8:
		return float64(Data[int8](t)[i])
	case Uint8:
		return float64(Data[uint8](t)[i])
	case Int16:
		return float64(Data[int16](t)[i])
	case Uint16:
		return float64(Data[uint16](t)[i])
	case Int32:
		return float64(Data[int32](t)[i])
	case Uint32:
		return float64(Data[uint32](t)[i])
	case Int64:
		return float64(Data[int64](t)[i])
	case Uint64:
		return float64(Data[uint64](t)[i])
	case Bool:
		if Data[uint8](t)[i] != 0 {
			return 1
		}
		return 0
	}
	switch {
	case t.DType.IsSmallFloat():
		return DecodeSmallFloat(t.DType, t.Code(i))
	case t.DType.IsPackedInt():
		return float64(t.packedIntAt(i))
	}
	panic(fmt.Sprintf("ir.Tensor.Float64At: %s is not numeric", t.DType))
}

// Int64At returns element i of an integer or bool tensor as int64.
func (t *Tensor) Int64At(i int) int64 {
	switch t.DType {
	case Int8:
		return int64(Data[int8](t)[i])
	case Uint8, Bool:
		return int64(Data[uint8](t)[i])
	case Int16:
		return int64(Data[int16](t)[i])
	case Uint16:
		return int64(Data[uint16](t)[i])
	case Int32:
		return int64(Data[int32](t)[i])
	case Uint32:
		return int64(Data[uint32](t)[i])
	case Int64:
		return Data[int64](t)[i]
	case Uint64:
		return int64(Data[uint64](t)[i])
	}
	if t.DType.IsPackedInt() {
		return t.packedIntAt(i)
	}
	return int64(t.Float64At(i))
}

// Equal reports whether two tensors have the same name, dtype, dims and
// bytes (NaNs with equal bits compare equal).
func (t *Tensor) Equal(o *Tensor) bool {
	if t == nil || o == nil {
		return t == o
	}
	if t.Name != o.Name || t.DType != o.DType || t.DocString != o.DocString || len(t.Dims) != len(o.Dims) ||
		t.IsTensor() != o.IsTensor() || !t.IsTensor() && t.Kind != o.Kind || len(t.Elems) != len(o.Elems) {
		return false
	}
	for i := range t.Elems {
		if !t.Elems[i].Equal(o.Elems[i]) {
			return false
		}
	}
	for i := range t.Dims {
		if t.Dims[i] != o.Dims[i] {
			return false
		}
	}
	if string(t.Raw) != string(o.Raw) || len(t.Strings) != len(o.Strings) {
		return false
	}
	for i := range t.Strings {
		if t.Strings[i] != o.Strings[i] {
			return false
		}
	}
	return true
}

// HalfToFloat32 converts IEEE 754 binary16 bits to float32.
func HalfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: value = mant * 2^-24.
		f := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// Float32ToHalf converts float32 to binary16 bits, rounding to nearest even.
func Float32ToHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 // quiet NaN
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - e)
		half := uint32(1) << (shift - 1)
		rounded := mant >> shift
		rem := mant & ((1 << shift) - 1)
		if rem > half || (rem == half && rounded&1 == 1) {
			rounded++
		}
		return sign | uint16(rounded)
	}
	rounded := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && rounded&1 == 1) {
		rounded++ // may carry into the exponent, which is right
	}
	return sign | uint16(rounded)
}

// BFloat16ToFloat32 converts bfloat16 bits to float32.
func BFloat16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// Float32ToBFloat16 converts float32 to bfloat16 bits, rounding to nearest even.
func Float32ToBFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40 // quiet NaN
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}
