package ops

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// naiveMatmul is the triple loop over one pair of row-major matrices.
func naiveMatmul(a, b []float64, m, k, n int) []float64 {
	c := make([]float64, m*n)
	for i := range m {
		for j := range n {
			for p := range k {
				c[i*n+j] += a[i*k+p] * b[p*n+j]
			}
		}
	}
	return c
}

// bcastAt is the flat index, into a tensor of dims that broadcasts to a
// larger shape, of the element at the larger shape's coordinate c.
func bcastAt(dims, c []int64) int {
	c = c[len(c)-len(dims):]
	var f int64
	for i, st := range Strides(dims) {
		if dims[i] != 1 {
			f += c[i] * st
		}
	}
	return int(f)
}

func TestMatMulAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	a, b := randTensor(rng, ir.Float64, 3, 1, 4, 5), randTensor(rng, ir.Float64, 2, 5, 6)
	out, err := callKernel(t, "MatMul", 13, []*ir.Tensor{a, b}, 1)
	require.NoError(t, err)
	require.Equal(t, []int64{3, 2, 4, 6}, out[0].Dims)
	av, bv, got := Float64s(a), Float64s(b), Float64s(out[0])
	for i := range 3 {
		for j := range 2 {
			want := naiveMatmul(av[i*20:(i+1)*20], bv[j*30:(j+1)*30], 4, 5, 6)
			assertClose(t, want, got[(i*2+j)*24:(i*2+j+1)*24], 1e-12, 1e-12, "batch", i, j)
		}
	}
	// 1-D operands: vector·matrix, matrix·vector, dot product.
	v := randTensor(rng, ir.Float64, 5)
	for _, tc := range []struct {
		x, y *ir.Tensor
		dims []int64
		want []float64
	}{
		{v, b, []int64{2, 6}, append(naiveMatmul(Float64s(v), bv[:30], 1, 5, 6), naiveMatmul(Float64s(v), bv[30:], 1, 5, 6)...)},
		{a, v, []int64{3, 1, 4}, func() []float64 {
			var w []float64
			for i := range 3 {
				w = append(w, naiveMatmul(av[i*20:(i+1)*20], Float64s(v), 4, 5, 1)...)
			}
			return w
		}()},
		{v, v, []int64{}, naiveMatmul(Float64s(v), Float64s(v), 1, 5, 1)},
	} {
		out, err := callKernel(t, "MatMul", 13, []*ir.Tensor{tc.x, tc.y}, 1)
		require.NoError(t, err)
		assert.Equal(t, tc.dims, out[0].Dims)
		assertClose(t, tc.want, Float64s(out[0]), 1e-12, 1e-12)
	}
}

func TestMatMulIntegers(t *testing.T) {
	// int32 wraps like ONNX Runtime: 2^31-1 · 2 = -2 (mod 2^32).
	a := ir.FromSlice(ir.Int32, []int64{1, 2}, []int32{2147483647, 3})
	b := ir.FromSlice(ir.Int32, []int64{2, 1}, []int32{2, -5})
	out, err := callKernel(t, "MatMul", 9, []*ir.Tensor{a, b}, 1)
	require.NoError(t, err)
	assert.Equal(t, []int32{-2 - 15}, ir.Data[int32](out[0]))
	ua := ir.FromSlice(ir.Uint64, []int64{2}, []uint64{1 << 40, 3})
	out, err = callKernel(t, "MatMul", 9, []*ir.Tensor{ua, ua}, 1)
	require.NoError(t, err)
	assert.Equal(t, []uint64{9}, ir.Data[uint64](out[0]), "(2^40)^2 wraps to 0 in 64 bits")
	s, err := Lookup("", "MatMul", 8)
	require.NoError(t, err)
	assert.False(t, s.SupportsType(ir.Int32))
}

func TestGemmAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	const M, K, N = 4, 5, 3
	a, b := randTensor(rng, ir.Float64, M, K), randTensor(rng, ir.Float64, K, N)
	prod := naiveMatmul(Float64s(a), Float64s(b), M, K, N)
	at := FromFloat64s(ir.Float64, []int64{K, M}, transpose2(Float64s(a), M, K))
	bt := FromFloat64s(ir.Float64, []int64{N, K}, transpose2(Float64s(b), K, N))
	for _, cd := range [][]int64{nil, {}, {1}, {N}, {M, 1}, {M, N}} {
		var c *ir.Tensor
		ins := []*ir.Tensor{at, bt}
		if cd != nil {
			c = randTensor(rng, ir.Float64, cd...)
			ins = append(ins, c)
		}
		out, err := callKernel(t, "Gemm", 13, ins, 1, ir.AttrF("alpha", 0.5), ir.AttrF("beta", -2),
			ir.AttrI("transA", 1), ir.AttrI("transB", 1))
		require.NoError(t, err, cd)
		want := make([]float64, M*N)
		for i := range M {
			for j := range N {
				want[i*N+j] = 0.5 * prod[i*N+j]
				if c != nil {
					want[i*N+j] += -2 * Float64s(c)[bcastAt(cd, []int64{int64(i), int64(j)})]
				}
			}
		}
		assertClose(t, want, Float64s(out[0]), 1e-12, 1e-12, cd)
	}
	// Before v11 C is required; v1 broadcasts it only with broadcast=1.
	_, err := callKernel(t, "Gemm", 9, []*ir.Tensor{a, b}, 1)
	assert.ErrorContains(t, err, "has 2 inputs")
	c := randTensor(rng, ir.Float64, N)
	_, err = callKernel(t, "Gemm", 1, []*ir.Tensor{a, b, c}, 1)
	assert.ErrorContains(t, err, "does not broadcast")
	_, err = callKernel(t, "Gemm", 1, []*ir.Tensor{a, b, c}, 1, ir.AttrI("broadcast", 1))
	assert.NoError(t, err)
}

func TestGemmIntegers(t *testing.T) {
	a := ir.FromSlice(ir.Int64, []int64{2, 2}, []int64{1, 2, 3, 4})
	c := ir.FromSlice(ir.Int64, []int64{1}, []int64{10})
	out, err := callKernel(t, "Gemm", 11, []*ir.Tensor{a, a, c}, 1, ir.AttrF("alpha", 2), ir.AttrF("beta", 3))
	require.NoError(t, err)
	assert.Equal(t, []int64{2*7 + 30, 2*10 + 30, 2*15 + 30, 2*22 + 30}, ir.Data[int64](out[0]))
	out, err = callKernel(t, "Gemm", 11, []*ir.Tensor{a, a}, 1, ir.AttrF("alpha", 0.5))
	require.NoError(t, err)
	assert.Equal(t, []int64{3, 5, 7, 11}, ir.Data[int64](out[0]), "non-integral alpha truncates")
}

func TestEinsum(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	a, b := randTensor(rng, ir.Float64, 2, 3, 4), randTensor(rng, ir.Float64, 2, 4, 5)
	av := Float64s(a)
	mm, err := callKernel(t, "MatMul", 13, []*ir.Tensor{a, b}, 1)
	require.NoError(t, err)
	sq := randTensor(rng, ir.Float64, 3, 3)
	sqv := Float64s(sq)
	v, w := randTensor(rng, ir.Float64, 4), randTensor(rng, ir.Float64, 5)
	for _, tc := range []struct {
		eq   string
		ins  []*ir.Tensor
		dims []int64
		want []float64
	}{
		{"bij,bjk->bik", []*ir.Tensor{a, b}, []int64{2, 3, 5}, Float64s(mm[0])},
		{"...ij,...jk", []*ir.Tensor{a, b}, []int64{2, 3, 5}, Float64s(mm[0])},
		{"bij , bjk -> bki", []*ir.Tensor{a, b}, []int64{2, 5, 3}, func() []float64 {
			m := Float64s(mm[0])
			return append(transpose2(m[:15], 3, 5), transpose2(m[15:], 3, 5)...)
		}()},
		{"ii->i", []*ir.Tensor{sq}, []int64{3}, []float64{sqv[0], sqv[4], sqv[8]}},
		{"ii", []*ir.Tensor{sq}, []int64{}, []float64{sqv[0] + sqv[4] + sqv[8]}},
		{"ij->", []*ir.Tensor{sq}, []int64{}, []float64{func() float64 {
			var s float64
			for _, x := range sqv {
				s += x
			}
			return s
		}()}},
		{"ji", []*ir.Tensor{sq}, []int64{3, 3}, transpose2(sqv, 3, 3)},
		{"i,i", []*ir.Tensor{v, v}, []int64{}, naiveMatmul(Float64s(v), Float64s(v), 1, 4, 1)},
		{"i,j->ij", []*ir.Tensor{v, v}, []int64{4, 4}, naiveMatmul(Float64s(v), Float64s(v), 4, 1, 4)},
		// The ellipsis broadcasts: [2,3,4] against [4] sums over k.
		{"...k,k->...", []*ir.Tensor{a, v}, []int64{2, 3}, naiveMatmul(av, Float64s(v), 6, 4, 1)},
		{"bij,bjk,k->bi", []*ir.Tensor{a, b, w}, []int64{2, 3}, naiveMatmul(Float64s(mm[0]), Float64s(w), 6, 5, 1)},
	} {
		out, err := callKernel(t, "Einsum", 12, tc.ins, 1, ir.AttrS("equation", tc.eq))
		require.NoError(t, err, tc.eq)
		assert.Equal(t, tc.dims, out[0].Dims, tc.eq)
		assertClose(t, tc.want, Float64s(out[0]), 1e-12, 1e-12, tc.eq)
	}
	ints := ir.FromSlice(ir.Int32, []int64{2, 2}, []int32{1, 2, 3, 4})
	out, err := callKernel(t, "Einsum", 12, []*ir.Tensor{ints, ints}, 1, ir.AttrS("equation", "ij,jk"))
	require.NoError(t, err)
	assert.Equal(t, []int32{7, 10, 15, 22}, ir.Data[int32](out[0]))
}

func TestEinsumErrors(t *testing.T) {
	f := ir.Float32
	for eq, msg := range map[string]string{
		"ij,jk->ik": "2 operands, the node 1 inputs",
		"ijk":       "does not fit an operand of rank 2",
		"i1":        "is not a letter",
		"ij->ik":    "not in any operand",
		"ij->ii":    "repeated",
		"ij->...":   "ellipsis the operands lack",
	} {
		_, err := callInfer("Einsum", 12, []ir.Type{tt(f, 2, 3)}, nil, 1, ir.AttrS("equation", eq))
		assert.ErrorContains(t, err, msg, eq)
	}
	_, err := callInfer("Einsum", 12, []ir.Type{tt(f, 2, 3), tt(f, 4, 5)}, nil, 1, ir.AttrS("equation", "ij,jk"))
	assert.ErrorContains(t, err, "label j is 3 in one operand and 4 in another")
}

func TestLinalgShapesGolden(t *testing.T) {
	f := ir.Float32
	eq := func(s string) []*ir.Attribute { return []*ir.Attribute{ir.AttrS("equation", s)} }
	checkShapeGolden(t, "linalg", []shapeCase{
		{op: "MatMul", opset: 13, ins: []ir.Type{sym(f, "B", "S", 768), tt(f, 768, 3072)}, nOut: 1},
		{op: "MatMul", opset: 13, ins: []ir.Type{sym(f, "B", 1, "S", 64), sym(f, 12, 64, "T")}, nOut: 1},
		{op: "MatMul", opset: 13, ins: []ir.Type{tt(f, 5), sym(f, 3, 5, "N")}, nOut: 1},
		{op: "MatMul", opset: 13, ins: []ir.Type{tt(f, 2, 3, 5), tt(f, 5)}, nOut: 1},
		{op: "MatMul", opset: 13, ins: []ir.Type{tt(f, 5), tt(f, 5)}, nOut: 1},
		{op: "MatMul", opset: 13, ins: []ir.Type{ir.TensorType(f, ir.Shape{}), tt(f, 5, 2)}, nOut: 1},
		{op: "MatMul", opset: 13, ins: []ir.Type{tt(f, 2, 3), tt(f, 4, 5)}, nOut: 1},
		{op: "MatMul", opset: 13, ins: []ir.Type{tt(f, 2, 2, 3), tt(f, 3, 3, 5)}, nOut: 1},
		{op: "MatMul", opset: 13, ins: []ir.Type{tt(f), tt(f, 3)}, nOut: 1},
		{op: "MatMul", opset: 13, ins: []ir.Type{tt(f, 2, 3), tt(ir.Float64, 3, 5)}, nOut: 1},
		{op: "Gemm", opset: 13, ins: []ir.Type{sym(f, "N", 2048), tt(f, 1000, 2048), tt(f, 1000)}, nOut: 1,
			attrs: []*ir.Attribute{ir.AttrI("transB", 1)}},
		{op: "Gemm", opset: 11, ins: []ir.Type{tt(ir.Int32, 4, 3), tt(ir.Int32, 4, 5)}, nOut: 1,
			attrs: []*ir.Attribute{ir.AttrI("transA", 1)}},
		{op: "Gemm", opset: 13, ins: []ir.Type{tt(f, 3, 4), tt(f, 5, 6), {}}, nOut: 1},
		{op: "Gemm", opset: 13, ins: []ir.Type{tt(f, 3, 4), tt(f, 4, 6), tt(f, 2, 6)}, nOut: 1},
		{op: "Gemm", opset: 1, ins: []ir.Type{tt(f, 3, 4), tt(f, 4, 6), tt(f, 6)}, nOut: 1},
		{op: "Gemm", opset: 13, ins: []ir.Type{tt(f, 3, 4, 1), tt(f, 4, 6)}, nOut: 1},
		{op: "Einsum", opset: 12, ins: []ir.Type{sym(f, "B", "H", "S", 64), sym(f, "B", "H", "T", 64)}, nOut: 1, attrs: eq("bhsd,bhtd->bhst")},
		{op: "Einsum", opset: 12, ins: []ir.Type{sym(f, "N", 1, 4, 5), tt(f, 3, 5, 6)}, nOut: 1, attrs: eq("...ij,...jk")},
		{op: "Einsum", opset: 12, ins: []ir.Type{tt(f, 3, 3)}, nOut: 1, attrs: eq("ii->i")},
		{op: "Einsum", opset: 12, ins: []ir.Type{tt(f, 2, 3), ir.TensorType(f, ir.Shape{})}, nOut: 1, attrs: eq("ij,jk->ik")},
		{op: "Einsum", opset: 12, ins: []ir.Type{tt(ir.Int64, 2, 3)}, nOut: 1, attrs: eq("ij->ji")},
		// Symbolic broadcasting: a dim against 1 is the dim; min(512, S)
		// against S is S; two unrelated symbols are unknown.
		{op: "MatMul", opset: 13, ins: []ir.Type{sym(f, "N", 1, "S", 8), sym(f, 1, "H", 8, "S")}, nOut: 1},
		{op: "MatMul", opset: 13, ins: []ir.Type{sym(f, "min(512, S)", "S", 8), sym(f, "S", 8, 4)}, nOut: 1},
		{op: "MatMul", opset: 13, ins: []ir.Type{sym(f, "N", "S", 8), sym(f, "M", 8, 4)}, nOut: 1},
		{op: "MatMul", opset: 13, ins: []ir.Type{sym(f, "B*S", 8), tt(f, 8, 4)}, nOut: 1},
		{op: "Gemm", opset: 13, ins: []ir.Type{sym(f, "B*S", 64), sym(f, 64, "V")}, nOut: 1},
		{op: "Einsum", opset: 12, ins: []ir.Type{sym(f, "B", "S", "4*D"), sym(f, "4*D", "E")}, nOut: 1, attrs: eq("bsd,de->bse")},
	})
}
