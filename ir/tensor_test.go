package ir

import (
	"encoding/binary"
	"math"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func aligned8(b []byte) bool {
	return len(b) == 0 || uintptr(unsafe.Pointer(&b[0]))%8 == 0
}

func TestNewTensorSizes(t *testing.T) {
	for _, c := range allDTypes {
		for _, dims := range [][]int64{{3, 5}, {4}, {1}, {}, {2, 0}} {
			n := Product(dims)
			tn := NewTensor(c.d, dims...)
			assert.Equal(t, dims, tn.Dims)
			assert.Equal(t, n, tn.Len())
			if c.d == String {
				assert.Len(t, tn.Strings, int(n))
				assert.Nil(t, tn.Raw)
				continue
			}
			var want int
			if c.size < 0 {
				want = int(n*int64(c.bits)+7) / 8 // packed, rounded up to whole bytes
			} else {
				want = int(n) * c.size
			}
			require.Lenf(t, tn.Raw, want, "%s%v", c.d, dims)
			assert.Equal(t, want, RawLen(c.d, n))
			assert.Truef(t, aligned8(tn.Raw), "%s%v is not 8-byte aligned", c.d, dims)
			for _, b := range tn.Raw {
				require.Zero(t, b)
			}
			assert.True(t, tn.Type().Equal(TensorType(c.d, S(dims...))))
		}
	}
	assert.Equal(t, 8, RawLen(Int4, 15))
	assert.Equal(t, 8, RawLen(Uint4, 16))
	assert.Equal(t, 1, RawLen(Int4, 1))
	assert.Equal(t, 0, RawLen(Int4, 0))
}

func TestNewTensorCopiesDims(t *testing.T) {
	dims := []int64{2, 3}
	tn := NewTensor(Float32, dims...)
	dims[0] = 9
	assert.Equal(t, []int64{2, 3}, tn.Dims)
}

func TestFromSliceSharesMemory(t *testing.T) {
	data := []float32{1, 2, 3, 4, 5, 6}
	tn := FromSlice(Float32, []int64{2, 3}, data)
	require.Len(t, tn.Raw, 24)
	assert.Same(t, &data[0], &tn.Float32s()[0])

	data[1] = -2.5
	assert.Equal(t, math.Float32bits(-2.5), binary.LittleEndian.Uint32(tn.Raw[4:]))
	assert.Equal(t, float32(-2.5), Data[float32](tn)[1])

	Data[float32](tn)[5] = 42
	assert.Equal(t, float32(42), data[5])
	binary.LittleEndian.PutUint32(tn.Raw[0:], math.Float32bits(7))
	assert.Equal(t, float32(7), data[0])

	// float16 data is its bit patterns, viewed as uint16.
	h := FromSlice(Float16, []int64{2}, []uint16{0x3c00, 0xc000})
	assert.Equal(t, []uint16{0x3c00, 0xc000}, Data[uint16](h))
	assert.Equal(t, 1.0, h.Float64At(0))

	b := FromSlice(Bool, []int64{3}, []bool{true, false, true})
	assert.Equal(t, []byte{1, 0, 1}, b.Raw)

	e := FromSlice(Int64, []int64{0}, []int64{})
	assert.Equal(t, []byte{}, e.Raw)
	assert.Equal(t, []int64{}, e.Int64s())
}

func TestFromSlicePanics(t *testing.T) {
	assert.PanicsWithValue(t, "ir.FromSlice: float64 does not match float",
		func() { FromSlice(Float32, []int64{1}, []float64{1}) })
	assert.Panics(t, func() { FromSlice(Int4, []int64{2}, []uint8{1, 2}) })
	assert.PanicsWithValue(t, "ir.FromSlice: 3 elements for shape [2 2]",
		func() { FromSlice(Int32, []int64{2, 2}, []int32{1, 2, 3}) })
}

func TestDataViewsAndPanics(t *testing.T) {
	tn := NewTensor(Int32, 4)
	v := Data[int32](tn)
	v[2] = -5
	assert.Equal(t, int32(-5), Data[int32](tn)[2], "Data is a view, not a copy")
	assert.Equal(t, uint32(0xfffffffb), Data[uint32](tn)[2], "any T of the same size may view")

	for _, c := range []struct {
		name string
		f    func()
		msg  string
	}{
		{"wider", func() { Data[float64](NewTensor(Float32, 2)) }, "ir.Data: cannot view float as float64"},
		{"narrower", func() { Data[uint8](NewTensor(Float16, 2)) }, "ir.Data: cannot view float16 as uint8"},
		{"packed", func() { Data[uint8](NewTensor(Int4, 2)) }, "ir.Data: cannot view int4 as uint8"},
		{"string", func() { Data[uint8](NewTensor(String, 2)) }, "ir.Data: cannot view string as uint8"},
		{"Float32s", func() { NewTensor(Int64, 1).Float32s() }, "ir.Data: cannot view int64 as float32"},
		{"Int64s", func() { NewTensor(Float32, 1).Int64s() }, "ir.Data: cannot view float as int64"},
	} {
		assert.PanicsWithValue(t, c.msg, c.f, c.name)
	}
}

// misaligned returns a copy of b whose first byte is not 8-byte aligned.
func misaligned(t *testing.T, b []byte, off int) []byte {
	buf := make([]uint64, len(b)/8+2)
	all := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(buf)*8)
	out := all[off : off+len(b)]
	copy(out, b)
	require.NotZero(t, uintptr(unsafe.Pointer(&out[0]))%8)
	return out
}

func TestFromRawAligns(t *testing.T) {
	for _, n := range []int{1, 7, 8, 13, 64} {
		for off := 1; off < 8; off++ {
			want := make([]byte, n)
			for i := range want {
				want[i] = byte(i*37 + off)
			}
			src := misaligned(t, want, off)
			tn := FromRaw(Uint8, []int64{int64(n)}, src)
			require.Equal(t, want, tn.Raw)
			require.Truef(t, aligned8(tn.Raw), "n=%d off=%d", n, off)
			src[0]++
			assert.Equal(t, want[0], tn.Raw[0], "FromRaw must copy")
		}
	}
	// An int64 tensor read from misaligned bytes views correctly.
	var raw [16]byte
	binary.LittleEndian.PutUint64(raw[:], uint64(1)<<40+3)
	binary.LittleEndian.PutUint64(raw[8:], math.MaxUint64) // -1
	tn := FromRaw(Int64, []int64{2}, misaligned(t, raw[:], 3))
	assert.Equal(t, []int64{1<<40 + 3, -1}, tn.Int64s())
	assert.Equal(t, []byte{}, FromRaw(Float32, []int64{0}, nil).Raw)
}

func TestDataRealignsForeignBytes(t *testing.T) {
	var raw [24]byte
	for i, f := range []float64{1.5, -2, math.Pi} {
		binary.LittleEndian.PutUint64(raw[8*i:], math.Float64bits(f))
	}
	src := misaligned(t, raw[:], 5)
	tn := &Tensor{DType: Float64, Dims: []int64{3}, Raw: src}
	assert.Equal(t, []float64{1.5, -2, math.Pi}, Data[float64](tn))
	assert.True(t, aligned8(tn.Raw))
	assert.Equal(t, raw[:], tn.Raw)
}

// leTensor builds a tensor of one element per value, encoding with
// encoding/binary rather than the package's own views.
func leTensor(d DType, vals ...uint64) *Tensor {
	size := d.Size()
	raw := make([]byte, 0, len(vals)*size)
	for _, v := range vals {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], v)
		raw = append(raw, b[:size]...)
	}
	return FromRaw(d, []int64{int64(len(vals))}, raw)
}

func TestFloat64AtInt64At(t *testing.T) {
	neg := func(x int64) uint64 { return uint64(x) }
	for _, c := range []struct {
		d   DType
		raw []uint64
		f64 []float64
		i64 []int64
	}{
		{Int8, []uint64{0x80, 0xff, 0x7f}, []float64{-128, -1, 127}, []int64{-128, -1, 127}},
		{Uint8, []uint64{0x80, 0xff, 0}, []float64{128, 255, 0}, []int64{128, 255, 0}},
		{Int16, []uint64{0x8000, 0xfffe, 300}, []float64{-32768, -2, 300}, []int64{-32768, -2, 300}},
		{Uint16, []uint64{0x8000, 0xffff}, []float64{32768, 65535}, []int64{32768, 65535}},
		{Int32, []uint64{0x80000000, neg(-7)}, []float64{math.MinInt32, -7}, []int64{math.MinInt32, -7}},
		{Uint32, []uint64{0xffffffff, 1}, []float64{math.MaxUint32, 1}, []int64{math.MaxUint32, 1}},
		{Int64, []uint64{neg(-1 << 53), 1<<62 + 1}, []float64{-1 << 53, 1 << 62}, []int64{-1 << 53, 1<<62 + 1}},
		{Uint64, []uint64{1<<53 + 1, 12}, []float64{1 << 53, 12}, []int64{1<<53 + 1, 12}},
		{Bool, []uint64{0, 1, 2}, []float64{0, 1, 1}, []int64{0, 1, 2}},
		{Float32, []uint64{uint64(math.Float32bits(-2.75)), uint64(math.Float32bits(1e10))}, []float64{-2.75, 1e10}, []int64{-2, 1e10}},
		{Float64, []uint64{math.Float64bits(-0.1), math.Float64bits(3.9)}, []float64{-0.1, 3.9}, []int64{0, 3}},
		{Float16, []uint64{0x3c00, 0xc500, 0x0001, 0x7bff}, []float64{1, -5, 0x1p-24, 65504}, []int64{1, -5, 0, 65504}},
		{BFloat16, []uint64{0x3f80, 0xc040, 0x4049}, []float64{1, -3, 3.140625}, []int64{1, -3, 3}},
		{Float8E5M2, []uint64{0x3c, 0xc5}, []float64{1, -5}, []int64{1, -5}},
		{Float8E4M3FN, []uint64{0x7e, 0x39}, []float64{448, 1.125}, []int64{448, 1}},
	} {
		tn := leTensor(c.d, c.raw...)
		for i := range c.f64 {
			assert.Equal(t, c.f64[i], tn.Float64At(i), "%s Float64At(%d)", c.d, i)
			assert.Equal(t, c.i64[i], tn.Int64At(i), "%s Int64At(%d)", c.d, i)
		}
	}
	for _, d := range []DType{String, Complex64} {
		assert.Panics(t, func() { NewTensor(d, 2).Float64At(0) }, d)
		assert.Panics(t, func() { NewTensor(d, 2).Int64At(0) }, d)
	}
}

func TestTensorEqual(t *testing.T) {
	mk := func() *Tensor {
		tn := FromSlice(Float32, []int64{2}, []float32{1, float32(math.NaN())})
		tn.Name = "w"
		return tn
	}
	require.True(t, mk().Equal(mk()), "NaNs with the same bits are equal")
	var nilT *Tensor
	assert.True(t, nilT.Equal(nil))
	assert.False(t, mk().Equal(nil))
	assert.False(t, nilT.Equal(mk()))

	for name, change := range map[string]func(*Tensor){
		"name":       func(x *Tensor) { x.Name = "v" },
		"dtype":      func(x *Tensor) { x.DType = Int32 },
		"dims":       func(x *Tensor) { x.Dims = []int64{1, 2} },
		"dim value":  func(x *Tensor) { x.Dims[0] = 3 },
		"raw":        func(x *Tensor) { x.Raw[7] ^= 1 }, // another NaN payload
		"raw length": func(x *Tensor) { x.Raw = x.Raw[:4] },
		"doc":        func(x *Tensor) { x.DocString = "d" },
		"strings":    func(x *Tensor) { x.Strings = []string{"a"} },
	} {
		b := mk()
		change(b)
		assert.False(t, mk().Equal(b), name)
		assert.False(t, b.Equal(mk()), name)
	}

	s1, s2 := NewTensor(String, 2), NewTensor(String, 2)
	s1.Strings[1], s2.Strings[1] = "x", "x"
	assert.True(t, s1.Equal(s2))
	s2.Strings[1] = "y"
	assert.False(t, s1.Equal(s2))
}

func TestTensorCloneIsIndependent(t *testing.T) {
	data := []int16{1, -2, 3, -4, 5, -6}
	orig := FromSlice(Int16, []int64{3, 2}, data)
	orig.Name, orig.DocString = "a", "doc"
	c := orig.Clone()
	require.True(t, c.Equal(orig))
	require.True(t, aligned8(c.Raw))

	Data[int16](c)[0] = 100
	c.Dims[0] = 6
	c.Dims = append(c.Dims, 1)
	assert.Equal(t, []int16{1, -2, 3, -4, 5, -6}, data)
	assert.Equal(t, []int64{3, 2}, orig.Dims)

	s := NewTensor(String, 2)
	s.Strings[0] = "p"
	sc := s.Clone()
	sc.Strings[0] = "q"
	assert.Equal(t, "p", s.Strings[0])
	assert.Nil(t, sc.Raw)
	assert.Nil(t, orig.Clone().Strings)
}

func TestScalarAndShape(t *testing.T) {
	s := Scalar(Int64, int64(-9))
	assert.Empty(t, s.Dims)
	assert.Equal(t, int64(1), s.Len())
	assert.Equal(t, int64(-9), s.Int64At(0))
	assert.Equal(t, "int64", s.Type().String())
	assert.Equal(t, "[4,1]", NewTensor(Bool, 4, 1).Shape().String())
	assert.Equal(t, "bool[4,1]", NewTensor(Bool, 4, 1).Type().String())
}
