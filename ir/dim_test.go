package ir

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir/dimexpr"
)

func TestDimArithmetic(t *testing.T) {
	N, S, u := Sym("N"), Sym("S"), UnknownDim()
	for _, c := range []struct {
		got  Dim
		want string
	}{
		{DimMul(D(3), D(4)), "12"},
		{DimMul(N, D(4)), "4*N"},
		{DimMul(N, S), "N*S"},
		{DimMul(N, u), "?"},
		{DimAdd(N, S), "N + S"},
		{DimAdd(D(2), D(5)), "7"},
		{DimSub(N, N), "0"},
		{DimSub(D(2), D(5)), "?"}, // not a dim
		{DimSub(N, D(1)), "N - 1"},
		{DimFloorDiv(DimAdd(N, D(1)), D(2)), "(N + 1)//2"},
		{DimFloorDiv(D(7), D(2)), "3"},
		{DimFloorDiv(N, D(0)), "?"},
		{DimFloorDiv(DimMul(N, S), S), "N"},
		{DimFloorDiv(N, S), "?"},
		{DimCeilDiv(N, D(4)), "(N + 3)//4"},
		{DimExactDiv(DimMul(N, D(6)), D(4)), "?"},
		{DimExactDiv(DimMul(N, D(6)), D(3)), "2*N"},
		{DimProduct(N, D(3), S), "3*N*S"},
		{DimProduct(), "1"},
		{DimMin(N, D(1)), "1"},
		{DimMax(DimSub(N, D(1)), D(0)), "N - 1"},
		{DimMul(Sym("batch size"), D(2)), `2*"batch size"`},
		{DimMul(D(math.MaxInt64), D(2)), "?"}, // overflow
	} {
		assert.Equal(t, c.want, c.got.String())
	}
	// A one-symbol expression is the plain name: files keep their dim_params.
	assert.Equal(t, Sym("batch size"), DimOf(dimexpr.Sym("batch size")))
	assert.Equal(t, D(4), DimOf(dimexpr.Const(4)))
	assert.Equal(t, UnknownDim(), DimOf(dimexpr.Const(-1)))
	assert.Equal(t, UnknownDim(), DimOf(nil))
	assert.True(t, DimEqual(Sym("N*2"), DimMul(D(2), N)))
	assert.True(t, DimEqual(D(3), D(3)))
	assert.False(t, DimEqual(u, u))
	assert.False(t, DimEqual(N, S))
}

func TestDimEval(t *testing.T) {
	env := map[string]int64{"N": 4, "H": 225}
	s := ShapeOf(Sym("N"), D(64), DimFloorDiv(DimAdd(Sym("H"), D(1)), D(2)))
	want := []int64{4, 64, 113}
	for i, d := range s.Dims {
		v, err := d.Eval(env)
		require.NoError(t, err)
		assert.Equal(t, want[i], v)
	}
	_, err := UnknownDim().Eval(env)
	assert.Error(t, err)
	_, err = Sym("S").Eval(env)
	assert.ErrorContains(t, err, "symbol S has no value")
	e, ok := DimExpr(Sym("(H + 1)//2"))
	require.True(t, ok)
	assert.Equal(t, []string{"H"}, e.Symbols())
}
