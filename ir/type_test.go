package ir

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDim(t *testing.T) {
	for _, c := range []struct {
		d                Dim
		static, symbolic bool
		str              string
	}{
		{D(3), true, false, "3"},
		{D(0), true, false, "0"},
		{Sym("N"), false, true, "N"},
		{UnknownDim(), false, false, "?"},
		{Dim{Value: 5, Param: "N"}, false, true, "N"}, // the name wins
		{Dim{Value: -7}, false, false, "?"},
	} {
		assert.Equal(t, c.static, c.d.IsStatic(), "%+v", c.d)
		assert.Equal(t, c.symbolic, c.d.IsSymbolic(), "%+v", c.d)
		assert.Equal(t, c.str, c.d.String(), "%+v", c.d)
	}
}

func TestShapeHelpers(t *testing.T) {
	for _, c := range []struct {
		name   string
		s      Shape
		rank   int
		static bool
		ints   []int64
		n      int64
		str    string
	}{
		{"unranked", Shape{}, -1, false, nil, -1, "[?...]"},
		{"scalar", S(), 0, true, []int64{}, 1, "[]"},
		{"static", S(2, 3, 4), 3, true, []int64{2, 3, 4}, 24, "[2,3,4]"},
		{"empty", S(5, 0), 2, true, []int64{5, 0}, 0, "[5,0]"},
		{"symbolic", ShapeOf(D(1), Sym("N"), D(3)), 3, false, nil, -1, "[1,N,3]"},
		{"unknown dim", ShapeOf(UnknownDim(), D(2)), 2, false, nil, -1, "[?,2]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.rank, c.s.Rank())
			assert.Equal(t, c.static, c.s.IsStatic())
			ints, ok := c.s.Ints()
			assert.Equal(t, c.static, ok)
			assert.Equal(t, c.ints, ints)
			assert.Equal(t, c.n, c.s.NumElements())
			assert.Equal(t, c.str, c.s.String())
		})
	}
	assert.Equal(t, int64(1), Product(nil))
	assert.Equal(t, int64(-6), Product([]int64{2, -3}))
}

func TestShapeEqual(t *testing.T) {
	withDen := ShapeOf(Dim{Value: 1, Denotation: "DATA_BATCH"}, D(3))
	for _, c := range []struct {
		a, b Shape
		eq   bool
	}{
		{S(1, 2), S(1, 2), true},
		{S(), Shape{Ranked: true}, true}, // empty and nil dims are both scalars
		{Shape{}, Shape{}, true},
		{S(), Shape{}, false}, // scalar vs unknown rank
		{S(1, 2), S(2, 1), false},
		{S(1, 2), S(1, 2, 1), false},
		{ShapeOf(Sym("N")), ShapeOf(Sym("N")), true},
		{ShapeOf(Sym("N")), ShapeOf(Sym("M")), false},
		{ShapeOf(Sym("N")), ShapeOf(UnknownDim()), false},
		{withDen, S(1, 3), false},
		{withDen, withDen.Clone(), true},
	} {
		assert.Equal(t, c.eq, c.a.Equal(c.b), "%v vs %v", c.a, c.b)
		assert.Equal(t, c.eq, c.b.Equal(c.a), "%v vs %v (reversed)", c.b, c.a)
	}
}

func TestShapeOwnsItsDims(t *testing.T) {
	dims := []Dim{D(1), D(2)}
	s := ShapeOf(dims...)
	dims[0] = D(9)
	assert.Equal(t, "[1,2]", s.String(), "ShapeOf must copy its dims")

	c := s.Clone()
	c.Dims[1] = Sym("K")
	assert.Equal(t, "[1,2]", s.String(), "Clone must copy the dims")
	assert.Equal(t, "[1,K]", c.String())
	assert.False(t, Shape{}.Clone().Ranked)
}

func TestTypeString(t *testing.T) {
	f := TensorType(Float32, S())
	i64 := TensorType(Int64, Shape{})
	for _, c := range []struct {
		t    Type
		want string
	}{
		{TensorType(Float32, ShapeOf(D(1), D(3), Sym("N"))), "float[1,3,N]"},
		{TensorType(Float64, ShapeOf(UnknownDim(), D(2))), "double[?,2]"},
		{f, "float"},     // scalar
		{i64, "int64[]"}, // unknown rank
		{TensorType(Float16, S(0)), "float16[0]"},
		{Type{Kind: SparseTensorKind, Elem: Float32, Shape: S(4, 4)}, "sparse_tensor(float[4,4])"},
		{Type{Kind: SparseTensorKind, Elem: Int8}, "sparse_tensor(int8)"},
		{Type{Kind: SequenceKind, Inner: &i64}, "seq(int64[])"},
		{Type{Kind: SequenceKind}, "seq(?)"},
		{Type{Kind: OptionalKind, Inner: &Type{Kind: SequenceKind, Inner: &f}}, "optional(seq(float))"},
		{Type{Kind: MapKind, Elem: String, Inner: &f}, "map(string, float)"},
		{Type{Kind: MapKind, Elem: Int64, Inner: &Type{Kind: SequenceKind, Inner: &f}}, "map(int64, seq(float))"},
		{Type{}, "?"},
	} {
		assert.Equal(t, c.want, c.t.String())
	}
	assert.True(t, f.IsTensor())
	assert.False(t, Type{Kind: SparseTensorKind, Elem: Float32}.IsTensor())
}

func TestTypeEqual(t *testing.T) {
	inner := TensorType(Float32, S(2))
	base := Type{Kind: SequenceKind, Inner: &inner}
	otherInner := TensorType(Float32, S(3))
	for _, c := range []struct {
		name string
		a, b Type
		eq   bool
	}{
		{"same", TensorType(Int32, S(1, 2)), TensorType(Int32, S(1, 2)), true},
		{"elem", TensorType(Int32, S(1, 2)), TensorType(Int64, S(1, 2)), false},
		{"shape", TensorType(Int32, S(1, 2)), TensorType(Int32, S(1, 3)), false},
		{"kind", TensorType(Int32, S(1)), Type{Kind: SparseTensorKind, Elem: Int32, Shape: S(1)}, false},
		{"denotation", TensorType(Int32, S(1)), Type{Kind: TensorKind, Elem: Int32, Shape: S(1), Denotation: "IMAGE"}, false},
		{"inner equal, distinct pointers", base, base.Clone(), true},
		{"inner differs", base, Type{Kind: SequenceKind, Inner: &otherInner}, false},
		{"inner nil", base, Type{Kind: SequenceKind}, false},
	} {
		assert.Equal(t, c.eq, c.a.Equal(c.b), c.name)
		assert.Equal(t, c.eq, c.b.Equal(c.a), c.name+" (reversed)")
	}
}

func TestTypeCloneIsDeep(t *testing.T) {
	leaf := TensorType(Float32, ShapeOf(D(2), Sym("T")))
	mid := Type{Kind: SequenceKind, Inner: &leaf}
	orig := Type{Kind: OptionalKind, Inner: &mid, Denotation: "d"}
	want := orig.String()

	c := orig.Clone()
	require.True(t, c.Equal(orig))
	require.NotSame(t, orig.Inner, c.Inner)
	require.NotSame(t, orig.Inner.Inner, c.Inner.Inner)

	c.Inner.Inner.Shape.Dims[0] = D(7)
	c.Inner.Inner.Elem = Int8
	c.Inner.Kind = OptionalKind
	assert.Equal(t, want, orig.String(), "mutating the clone changed the original")
	assert.Equal(t, "optional(optional(int8[7,T]))", c.String())
	assert.False(t, c.Equal(orig))

	tt := TensorType(Int64, S(3, 4))
	tc := tt.Clone()
	tc.Shape.Dims[0] = D(1)
	assert.Equal(t, "int64[3,4]", tt.String())
}
