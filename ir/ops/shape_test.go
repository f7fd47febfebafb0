package ops

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/dimexpr"
)

// The shape family's tests: inference (static, symbolic, errors, the
// compile-time values of Shape and Size) and kernels against coordinate
// formulas written out independently of the index-map helpers.

// movableTypes are the dtypes the element-moving kernels must all handle.
var movableTypes = []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16, ir.Int8, ir.Uint8, ir.Int16,
	ir.Uint16, ir.Int32, ir.Uint32, ir.Int64, ir.Uint64, ir.Bool}

// strs makes a string tensor.
func strs(dims []int64, v ...string) *ir.Tensor {
	t := ir.NewTensor(ir.String, dims...)
	copy(t.Strings, v)
	return t
}

// inferOne runs inference and returns the InferContext, to see values.
func inferOne(t *testing.T, op string, opset int64, ins []ir.Type, consts []*ir.Tensor, attrs ...*ir.Attribute) *InferContext {
	t.Helper()
	s, err := Lookup("", op, opset)
	require.NoError(t, err)
	n := &ir.Node{OpType: op, Attrs: attrs, Outputs: []*ir.Value{{Name: "y"}}}
	for range ins {
		n.Inputs = append(n.Inputs, &ir.Value{})
	}
	consts = append(consts, make([]*ir.Tensor, len(ins))...)[:len(ins)]
	c := NewInferContext(s, n, opset, ins, consts)
	require.NoError(t, s.Infer(c))
	return c
}

func TestShapeAndSizeValues(t *testing.T) {
	f := ir.Float32
	c := inferOne(t, "Shape", 13, []ir.Type{tt(f, 2, 3, 4)}, nil)
	require.NotNil(t, c.Values[0], "a static shape is a compile-time value")
	assert.Equal(t, []int64{2, 3, 4}, c.Values[0].Int64s())

	// Shape-15 slices the dims; only the selected ones need be static.
	c = inferOne(t, "Shape", 15, []ir.Type{sym(f, "N", 3, 4)}, nil, ir.AttrI("start", 1))
	require.NotNil(t, c.Values[0])
	assert.Equal(t, []int64{3, 4}, c.Values[0].Int64s())
	c = inferOne(t, "Shape", 15, []ir.Type{sym(f, "N", 3, 4)}, nil, ir.AttrI("end", -1))
	assert.Nil(t, c.Values[0])
	assert.Equal(t, "int64[2]", c.Outputs[0].String())

	c = inferOne(t, "Size", 13, []ir.Type{tt(f, 2, 3, 4)}, nil)
	require.NotNil(t, c.Values[0])
	assert.Equal(t, []int64{24}, c.Values[0].Int64s())
	c = inferOne(t, "Size", 13, []ir.Type{sym(f, "N", 3)}, nil)
	assert.Nil(t, c.Values[0])

	// The kernels agree, including clamped and empty ranges.
	x := ir.NewTensor(ir.String, 2, 3, 4, 5)
	for _, tc := range []struct {
		start, end int64
		want       []int64
	}{{0, 4, []int64{2, 3, 4, 5}}, {-10, 2, []int64{2, 3}}, {1, 100, []int64{3, 4, 5}}, {3, 1, []int64{}}, {-1, 4, []int64{5}}} {
		out, err := callKernel(t, "Shape", 15, []*ir.Tensor{x}, 1, ir.AttrI("start", tc.start), ir.AttrI("end", tc.end))
		require.NoError(t, err)
		assert.Equal(t, tc.want, out[0].Int64s(), "start %d end %d", tc.start, tc.end)
	}
	out, err := callKernel(t, "Size", 13, []*ir.Tensor{x}, 1)
	require.NoError(t, err)
	assert.Equal(t, []int64{120}, out[0].Int64s())
}

func TestReshapeInference(t *testing.T) {
	f := ir.Float32
	for _, tc := range []struct {
		in     ir.Type
		target []int64
		allow  int64
		want   string
	}{
		{tt(f, 2, 3, 4), []int64{4, -1}, 0, "float[4,6]"},
		{tt(f, 2, 3, 4), []int64{0, 0, -1, 1}, 0, "float[2,3,4,1]"},
		{sym(f, "N", 12), []int64{0, -1, 4}, 0, "float[N,3,4]"}, // N cancels
		{sym(f, "N", 12), []int64{-1, 6}, 0, "float[2*N,6]"},    // 12*N/6
		{sym(f, "B", "S", 256), []int64{0, 0, 4, 64}, 0, "float[B,S,4,64]"},
		{tt(f, 0, 3), []int64{0, 3}, 1, "float[0,3]"},
		{tt(f, 2, 3), []int64{3, 0}, 1, "error"}, // allowzero: 0 is 0
		{tt(f, 2, 3), []int64{-1, -1}, 0, "error"},
		{tt(f, 2, 3), []int64{4, -1}, 0, "error"},
		{tt(f, 2, 3), []int64{0, 0, 0}, 0, "error"},
		{tt(f, 2, 3), []int64{-2, 3}, 0, "error"},
		{tt(f, 0, 3), []int64{0, -1}, 1, "error"},
	} {
		outs, err := callInfer("Reshape", 14, []ir.Type{tc.in, tt(ir.Int64, int64(len(tc.target)))},
			[]*ir.Tensor{nil, i64s(tc.target...)}, 1, ir.AttrI("allowzero", tc.allow))
		if tc.want == "error" {
			assert.Error(t, err, "%s -> %v", tc.in, tc.target)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.want, outs[0].String(), "%s -> %v", tc.in, tc.target)
	}
	// An unknown shape input of known length gives the rank.
	outs, err := callInfer("Reshape", 13, []ir.Type{tt(f, 2, 3), tt(ir.Int64, 3)}, nil, 1)
	require.NoError(t, err)
	assert.Equal(t, "float[?,?,?]", outs[0].String())
}

func TestTransposeAgainstCoordinates(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 10))
	for _, perm := range [][]int64{{0, 1, 2, 3}, {3, 2, 1, 0}, {0, 2, 3, 1}, {1, 3, 0, 2}} {
		x := randTensor(rng, ir.Float32, 2, 3, 4, 5)
		out, err := callKernel(t, "Transpose", 13, []*ir.Tensor{x}, 1, ir.AttrIs("perm", perm...))
		require.NoError(t, err)
		y := out[0]
		xs, ys := x.Float32s(), y.Float32s()
		eachCoord(y.Dims, func(c []int64) {
			src := make([]int64, 4)
			for a, p := range perm {
				src[p] = c[a]
			}
			if ys[flatAt(y.Dims, c)] != xs[flatAt(x.Dims, src)] {
				t.Fatalf("perm %v: y%v differs from x%v", perm, c, src)
			}
		})
	}
	// Default perm reverses, and strings move too.
	out, err := callKernel(t, "Transpose", 13, []*ir.Tensor{strs([]int64{2, 3}, "a", "b", "c", "d", "e", "f")}, 1)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "d", "b", "e", "c", "f"}, out[0].Strings)
	_, err = callKernel(t, "Transpose", 13, []*ir.Tensor{randTensor(rng, ir.Float32, 2, 3)}, 1, ir.AttrIs("perm", 0, 0))
	assert.ErrorContains(t, err, "not a permutation")
}

// TestMovingKernelsAllTypes runs the element-moving kernels on every dtype
// and checks them against the float32 result.
func TestMovingKernelsAllTypes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 11))
	type call struct {
		op    string
		opset int64
		extra []*ir.Tensor
		nOut  int
		attrs []*ir.Attribute
	}
	calls := []call{
		{"Transpose", 13, nil, 1, []*ir.Attribute{ir.AttrIs("perm", 2, 0, 1)}},
		{"Reshape", 14, []*ir.Tensor{i64s(4, -1)}, 1, nil},
		{"Flatten", 13, nil, 1, []*ir.Attribute{ir.AttrI("axis", 2)}},
		{"Unsqueeze", 13, []*ir.Tensor{i64s(0, -1)}, 1, nil},
		{"Expand", 13, []*ir.Tensor{i64s(2, 1, 3, 4)}, 1, nil},
		{"Concat", 13, nil, 1, []*ir.Attribute{ir.AttrI("axis", 1)}},
		{"Split", 13, []*ir.Tensor{i64s(1, 2)}, 2, []*ir.Attribute{ir.AttrI("axis", 1)}},
		{"Tile", 13, []*ir.Tensor{i64s(2, 1, 2)}, 1, nil},
		{"Slice", 13, []*ir.Tensor{i64s(-1, 0), i64s(-100, 3), i64s(0, 2), i64s(-1, 2)}, 1, nil},
		{"Gather", 13, []*ir.Tensor{i64s(2, -1, 0)}, 1, []*ir.Attribute{ir.AttrI("axis", 2)}},
		{"Pad", 13, []*ir.Tensor{i64s(0, 1, 2, 1, 0, 1)}, 1, []*ir.Attribute{ir.AttrS("mode", "reflect")}},
		{"Trilu", 14, nil, 1, []*ir.Attribute{ir.AttrI("upper", 0)}},
		{"DepthToSpace", 13, nil, 1, []*ir.Attribute{ir.AttrI("blocksize", 1)}},
	}
	base := randTensor(rng, ir.Float32, 2, 3, 4)
	for _, cl := range calls {
		var want []float64
		for _, dt := range movableTypes {
			x := FromFloat64s(dt, base.Dims, Float64s(base))
			ins := append([]*ir.Tensor{x}, cl.extra...)
			if cl.op == "Concat" {
				ins = []*ir.Tensor{x, x}
			}
			if cl.op == "DepthToSpace" {
				ins = []*ir.Tensor{withDims(x, []int64{1, 2, 3, 4})}
			}
			out, err := callKernel(t, cl.op, cl.opset, ins, cl.nOut, cl.attrs...)
			require.NoError(t, err, "%s %s", cl.op, dt)
			got := Float64s(out[cl.nOut-1])
			if dt == ir.Float32 {
				want = got
				continue
			}
			// Converting the float32 result gives the same values: the
			// kernel moved elements without touching them.
			conv := Float64s(FromFloat64s(dt, out[cl.nOut-1].Dims, want))
			assert.Equal(t, conv, got, "%s on %s", cl.op, dt)
		}
	}
}

func TestStringsMove(t *testing.T) {
	x := strs([]int64{2, 2}, "a", "b", "c", "d")
	run := func(op string, opset int64, ins []*ir.Tensor, attrs ...*ir.Attribute) *ir.Tensor {
		out, err := callKernel(t, op, opset, ins, 1, attrs...)
		require.NoError(t, err, op)
		return out[0]
	}
	assert.Equal(t, []string{"a", "b", "c", "d", "a", "b", "c", "d"}, run("Concat", 13, []*ir.Tensor{x, x}, ir.AttrI("axis", 0)).Strings)
	assert.Equal(t, []int64{4}, run("Reshape", 14, []*ir.Tensor{x, i64s(-1)}).Dims)
	assert.Equal(t, []string{"c", "d", "a", "b"}, run("Gather", 13, []*ir.Tensor{x, i64s(1, 0)}, ir.AttrI("axis", 0)).Strings)
	assert.Equal(t, []string{"b", "d"}, run("Slice", 13, []*ir.Tensor{x, i64s(1), i64s(2), i64s(1)}).Strings)
	sq := run("Squeeze", 13, []*ir.Tensor{strs([]int64{1, 2, 1}, "p", "q"), i64s(0, 2)})
	assert.Equal(t, []int64{2}, sq.Dims)
	assert.Equal(t, []string{"p", "q"}, sq.Strings)
	assert.Equal(t, []int64{2, 1, 2}, run("Unsqueeze", 13, []*ir.Tensor{x, i64s(1)}).Dims)
	assert.Equal(t, []string{"a", "b", "c", "d", "a", "b", "c", "d"}, run("Expand", 13, []*ir.Tensor{x, i64s(2, 1, 1)}).Strings)
	assert.Equal(t, []string{"", "", "a", "b", "c", "d"}, run("Pad", 13, []*ir.Tensor{x, i64s(1, 0, 0, 0)}).Strings)
	assert.Equal(t, []string{"x", "x", "a", "b", "c", "d"}, run("Pad", 13, []*ir.Tensor{x, i64s(1, 0, 0, 0), strs(nil, "x")}).Strings)
}

func TestSqueezeUnsqueeze(t *testing.T) {
	f := ir.Float32
	for _, tc := range []struct {
		op    string
		opset int64
		in    ir.Type
		axes  []int64
		want  string
	}{
		{"Squeeze", 13, tt(f, 1, 3, 1, 4), nil, "float[3,4]"},
		{"Squeeze", 13, tt(f, 1, 3, 1, 4), []int64{-2}, "float[1,3,4]"},
		{"Squeeze", 13, sym(f, "N", 3, 1), nil, "float[]"}, // N might be 1: unknown rank
		{"Squeeze", 13, sym(f, "N", 3, 1), []int64{2}, "float[N,3]"},
		{"Squeeze", 13, tt(f, 2, 3), []int64{0}, "error"},
		{"Squeeze", 13, tt(f, 1, 3), []int64{2}, "error"},
		{"Squeeze", 11, tt(f, 1, 3), []int64{0}, "float[3]"},
		{"Unsqueeze", 13, sym(f, "N", 3), []int64{0, -1}, "float[1,N,3,1]"},
		{"Unsqueeze", 13, tt(f, 3), []int64{1, 1}, "error"},
		{"Unsqueeze", 13, tt(f, 3), []int64{3}, "error"},
		{"Unsqueeze", 1, tt(f, 3), []int64{0}, "float[1,3]"},
	} {
		var outs []ir.Type
		var err error
		if tc.opset >= 13 {
			ins, consts := []ir.Type{tc.in}, []*ir.Tensor{nil}
			if tc.axes != nil {
				ins, consts = append(ins, tt(ir.Int64, int64(len(tc.axes)))), append(consts, i64s(tc.axes...))
			}
			outs, err = callInfer(tc.op, tc.opset, ins, consts, 1)
		} else {
			outs, err = callInfer(tc.op, tc.opset, []ir.Type{tc.in}, nil, 1, ir.AttrIs("axes", tc.axes...))
		}
		if tc.want == "error" {
			assert.Error(t, err, "%s %s %v", tc.op, tc.in, tc.axes)
			continue
		}
		require.NoError(t, err, "%s %s %v", tc.op, tc.in, tc.axes)
		assert.Equal(t, tc.want, outs[0].String(), "%s %s %v", tc.op, tc.in, tc.axes)
	}
	// Unknown axes of known count still give Unsqueeze's rank.
	outs, err := callInfer("Unsqueeze", 13, []ir.Type{sym(f, "N", 3), tt(ir.Int64, 2)}, nil, 1)
	require.NoError(t, err)
	assert.Equal(t, "float[?,?,?,?]", outs[0].String())
}

func TestExpandAndTileAgainstCoordinates(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 12))
	x := randTensor(rng, ir.Float32, 3, 1, 2)
	out, err := callKernel(t, "Expand", 13, []*ir.Tensor{x, i64s(2, 1, 4, 1)}, 1)
	require.NoError(t, err)
	y := out[0]
	require.Equal(t, []int64{2, 3, 4, 2}, y.Dims)
	eachCoord(y.Dims, func(c []int64) {
		src := []int64{c[1], 0, c[3]} // broadcast: trailing dims align, size 1 repeats
		assert.Equal(t, x.Float32s()[flatAt(x.Dims, src)], y.Float32s()[flatAt(y.Dims, c)])
	})
	_, err = callKernel(t, "Expand", 13, []*ir.Tensor{x, i64s(3, 2, 3)}, 1)
	assert.Error(t, err)

	out, err = callKernel(t, "Tile", 13, []*ir.Tensor{x, i64s(2, 3, 2)}, 1)
	require.NoError(t, err)
	y = out[0]
	require.Equal(t, []int64{6, 3, 4}, y.Dims)
	eachCoord(y.Dims, func(c []int64) {
		src := []int64{c[0] % 3, c[1] % 1, c[2] % 2}
		assert.Equal(t, x.Float32s()[flatAt(x.Dims, src)], y.Float32s()[flatAt(y.Dims, c)])
	})
	out, err = callKernel(t, "Tile", 13, []*ir.Tensor{x, i64s(1, 0, 1)}, 1)
	require.NoError(t, err)
	assert.Equal(t, []int64{3, 0, 2}, out[0].Dims)
}

func TestConcatSplitRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 13))
	a, b := randTensor(rng, ir.Float32, 2, 3, 4), randTensor(rng, ir.Float32, 2, 5, 4)
	out, err := callKernel(t, "Concat", 13, []*ir.Tensor{a, b}, 1, ir.AttrI("axis", -2))
	require.NoError(t, err)
	y := out[0]
	require.Equal(t, []int64{2, 8, 4}, y.Dims)
	eachCoord(y.Dims, func(c []int64) {
		src, k := a, c[1]
		if k >= 3 {
			src, k = b, k-3
		}
		assert.Equal(t, src.Float32s()[flatAt(src.Dims, []int64{c[0], k, c[2]})], y.Float32s()[flatAt(y.Dims, c)])
	})
	// Split with explicit sizes undoes the Concat.
	parts, err := callKernel(t, "Split", 13, []*ir.Tensor{y, i64s(3, 5)}, 2, ir.AttrI("axis", 1))
	require.NoError(t, err)
	assert.Equal(t, a.Raw, parts[0].Raw)
	assert.Equal(t, b.Raw, parts[1].Raw)
	// Split-2 takes the sizes as an attribute; Split-13 without sizes
	// splits evenly, Split-18 with num_outputs leaves a smaller last part.
	parts, err = callKernel(t, "Split", 2, []*ir.Tensor{y}, 2, ir.AttrI("axis", 1), ir.AttrIs("split", 3, 5))
	require.NoError(t, err)
	assert.Equal(t, b.Raw, parts[1].Raw)
	parts, err = callKernel(t, "Split", 13, []*ir.Tensor{y}, 4, ir.AttrI("axis", 1))
	require.NoError(t, err)
	assert.Equal(t, []int64{2, 2, 4}, parts[3].Dims)
	parts, err = callKernel(t, "Split", 18, []*ir.Tensor{randTensor(rng, ir.Float32, 7)}, 3, ir.AttrI("num_outputs", 3))
	require.NoError(t, err)
	assert.Equal(t, [][]int64{{3}, {3}, {1}}, [][]int64{parts[0].Dims, parts[1].Dims, parts[2].Dims})
	_, err = callKernel(t, "Split", 13, []*ir.Tensor{randTensor(rng, ir.Float32, 7)}, 3)
	assert.ErrorContains(t, err, "cannot split")
	_, err = callKernel(t, "Split", 13, []*ir.Tensor{y, i64s(3, 4)}, 2, ir.AttrI("axis", 1))
	assert.ErrorContains(t, err, "sums to 7")
	_, err = callKernel(t, "Concat", 13, []*ir.Tensor{a, randTensor(rng, ir.Float32, 2, 3, 5)}, 1, ir.AttrI("axis", 1))
	assert.Error(t, err)
}

func TestDepthSpaceAgainstFormula(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 14))
	const n, c, h, w, bs = 2, 12, 3, 2, 2
	x := randTensor(rng, ir.Float32, n, c, h, w)
	oc := int64(c / (bs * bs))
	for _, mode := range []string{"DCR", "CRD"} {
		out, err := callKernel(t, "DepthToSpace", 13, []*ir.Tensor{x}, 1, ir.AttrI("blocksize", bs), ir.AttrS("mode", mode))
		require.NoError(t, err)
		y := out[0]
		require.Equal(t, []int64{n, oc, h * bs, w * bs}, y.Dims)
		eachCoord(y.Dims, func(p []int64) {
			bi, bj := p[2]%bs, p[3]%bs
			ch := (bi*bs+bj)*oc + p[1] // DCR: depth is (block row, block col, channel)
			if mode == "CRD" {
				ch = p[1]*bs*bs + bi*bs + bj
			}
			src := []int64{p[0], ch, p[2] / bs, p[3] / bs}
			assert.Equal(t, x.Float32s()[flatAt(x.Dims, src)], y.Float32s()[flatAt(y.Dims, p)], "%s %v", mode, p)
		})
		if mode == "DCR" {
			// SpaceToDepth is DCR's inverse.
			back, err := callKernel(t, "SpaceToDepth", 13, []*ir.Tensor{y}, 1, ir.AttrI("blocksize", bs))
			require.NoError(t, err)
			assert.Equal(t, x.Raw, back[0].Raw)
		}
	}
	_, err := callKernel(t, "DepthToSpace", 13, []*ir.Tensor{randTensor(rng, ir.Float32, 1, 6, 2, 2)}, 1, ir.AttrI("blocksize", 2))
	assert.ErrorContains(t, err, "do not divide")
	_, err = callInfer("SpaceToDepth", 13, []ir.Type{tt(ir.Float32, 1, 6, 3, 4)}, nil, 1, ir.AttrI("blocksize", 2))
	assert.ErrorContains(t, err, "does not divide")
}

func TestGenerators(t *testing.T) {
	run := func(op string, opset int64, ins []*ir.Tensor, attrs ...*ir.Attribute) *ir.Tensor {
		t.Helper()
		out, err := callKernel(t, op, opset, ins, 1, attrs...)
		require.NoError(t, err, op)
		return out[0]
	}
	// Range: the length is ceil((limit-start)/delta), clamped at 0.
	assert.Equal(t, []int64{10, 7, 4, 1}, run("Range", 11, []*ir.Tensor{ir.Scalar(ir.Int64, int64(10)), ir.Scalar(ir.Int64, int64(-1)), ir.Scalar(ir.Int64, int64(-3))}).Int64s())
	assert.Equal(t, []int32{}, ir.Data[int32](run("Range", 11, []*ir.Tensor{ir.Scalar(ir.Int32, int32(3)), ir.Scalar(ir.Int32, int32(1)), ir.Scalar(ir.Int32, int32(1))})))
	assert.Equal(t, []float32{1, 1.5, 2, 2.5}, run("Range", 11, []*ir.Tensor{ir.Scalar(ir.Float32, float32(1)), ir.Scalar(ir.Float32, float32(2.6)), ir.Scalar(ir.Float32, float32(0.5))}).Float32s())
	_, err := callKernel(t, "Range", 11, []*ir.Tensor{ir.Scalar(ir.Int64, int64(1)), ir.Scalar(ir.Int64, int64(2)), ir.Scalar(ir.Int64, int64(0))}, 1)
	assert.ErrorContains(t, err, "delta is 0")

	// EyeLike with a diagonal offset and a dtype.
	e := run("EyeLike", 9, []*ir.Tensor{ir.NewTensor(ir.Float32, 3, 4)}, ir.AttrI("k", 1), ir.AttrI("dtype", int64(ir.Int32)))
	assert.Equal(t, []int32{0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}, ir.Data[int32](e))
	e = run("EyeLike", 9, []*ir.Tensor{ir.NewTensor(ir.Bool, 3, 2)}, ir.AttrI("k", -1))
	assert.Equal(t, []uint8{0, 0, 1, 0, 0, 1}, ir.Data[uint8](e))

	// ConstantOfShape: float 0 by default, else the value's dtype.
	z := run("ConstantOfShape", 9, []*ir.Tensor{i64s(2, 3)})
	assert.Equal(t, make([]float32, 6), z.Float32s())
	v := run("ConstantOfShape", 9, []*ir.Tensor{i64s(2)}, ir.AttrT("value", ir.FromSlice(ir.Int32, []int64{1}, []int32{7})))
	assert.Equal(t, []int32{7, 7}, ir.Data[int32](v))
	s := run("ConstantOfShape", 9, []*ir.Tensor{i64s()}, ir.AttrT("value", ir.FromSlice(ir.Float64, []int64{1}, []float64{2.5})))
	assert.Equal(t, []int64{}, s.Dims)
	assert.Equal(t, []float64{2.5}, ir.Data[float64](s))
	_, err = callKernel(t, "ConstantOfShape", 9, []*ir.Tensor{i64s(2)}, 1, ir.AttrT("value", f32([]int64{2}, 1, 2)))
	assert.ErrorContains(t, err, "want 1")
}

func TestConstant(t *testing.T) {
	run := func(opset int64, attrs ...*ir.Attribute) (*ir.Tensor, error) {
		out, err := callKernel(t, "Constant", opset, nil, 1, attrs...)
		if err != nil {
			return nil, err
		}
		return out[0], nil
	}
	c, err := run(13, ir.AttrFs("value_floats", 1, 2))
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2}, c.Float32s())
	c, err = run(13, ir.AttrI("value_int", 5))
	require.NoError(t, err)
	assert.Equal(t, []int64{}, c.Dims)
	assert.Equal(t, []int64{5}, c.Int64s())
	c, err = run(13, ir.AttrSs("value_strings", "a", "b"))
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, c.Strings)
	c, err = run(1, ir.AttrT("value", f32([]int64{1, 2}, 3, 4)))
	require.NoError(t, err)
	assert.Equal(t, []float32{3, 4}, c.Float32s())
	// A sparse value with per-axis indices densifies.
	sp := &ir.SparseTensor{Values: f32([]int64{2}, 5, 6), Indices: ir.FromSlice(ir.Int64, []int64{2, 2}, []int64{0, 1, 1, 2}), Dims: []int64{2, 3}}
	c, err = run(13, &ir.Attribute{Name: "sparse_value", Kind: ir.AttrSparseTensor, Sparse: sp})
	require.NoError(t, err)
	assert.Equal(t, []float32{0, 5, 0, 0, 0, 6}, c.Float32s())
	_, err = run(13, ir.AttrI("value_int", 5), ir.AttrF("value_float", 1))
	assert.ErrorContains(t, err, "exactly one")
	_, err = run(11, ir.AttrI("value_int", 5))
	assert.ErrorContains(t, err, "unknown attribute")

	// Inference publishes the value.
	ic := inferOne(t, "Constant", 13, nil, nil, ir.AttrIs("value_ints", 1, 2, 3))
	require.NotNil(t, ic.Values[0])
	assert.Equal(t, "int64[3]", ic.Outputs[0].String())
}

func TestShapeShapesGolden(t *testing.T) {
	f, i := ir.Float32, ir.Int64
	unranked := ir.TensorType(f, ir.Shape{})
	checkShapeGolden(t, "shape", []shapeCase{
		{op: "Shape", opset: 13, ins: []ir.Type{sym(f, "N", 3, 4)}, nOut: 1},
		{op: "Shape", opset: 15, ins: []ir.Type{sym(f, "N", 3, 4)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("start", -2)}},
		{op: "Shape", opset: 13, ins: []ir.Type{unranked}, nOut: 1},
		{op: "Size", opset: 13, ins: []ir.Type{sym(f, "N", 3)}, nOut: 1},
		{op: "Reshape", opset: 5, ins: []ir.Type{tt(f, 2, 3, 4), tt(i, 2)}, consts: []*ir.Tensor{nil, i64s(0, -1)}, nOut: 1},
		{op: "Reshape", opset: 14, ins: []ir.Type{sym(f, "B", "S", 256), tt(i, 4)}, consts: []*ir.Tensor{nil, i64s(0, 0, 4, -1)}, nOut: 1},
		{op: "Reshape", opset: 1, ins: []ir.Type{tt(f, 6)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrIs("shape", 2, 3)}},
		{op: "Reshape", opset: 14, ins: []ir.Type{tt(f, 6), tt(i, 2)}, consts: []*ir.Tensor{nil, i64s(4, -1)}, nOut: 1},
		{op: "Reshape", opset: 14, ins: []ir.Type{unranked, tt(i, 2)}, consts: []*ir.Tensor{nil, i64s(0, 3)}, nOut: 1},
		{op: "Flatten", opset: 13, ins: []ir.Type{sym(f, "N", 3, 4, 5)}, nOut: 1},
		{op: "Flatten", opset: 13, ins: []ir.Type{sym(f, "N", 3, 4, 5)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("axis", -2)}},
		{op: "Flatten", opset: 13, ins: []ir.Type{tt(f, 2, 3)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("axis", 0)}},
		{op: "Flatten", opset: 13, ins: []ir.Type{tt(f, 2, 3)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("axis", 3)}},
		{op: "Squeeze", opset: 13, ins: []ir.Type{sym(f, 1, "N", 1), tt(i, 2)}, consts: []*ir.Tensor{nil, i64s(0, 2)}, nOut: 1},
		{op: "Squeeze", opset: 1, ins: []ir.Type{tt(f, 1, 3, 1)}, nOut: 1},
		{op: "Unsqueeze", opset: 13, ins: []ir.Type{sym(f, "N", 3), tt(i, 2)}, consts: []*ir.Tensor{nil, i64s(-1, 1)}, nOut: 1},
		{op: "Unsqueeze", opset: 11, ins: []ir.Type{tt(f)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrIs("axes", 0)}},
		{op: "Expand", opset: 13, ins: []ir.Type{sym(f, "N", 1), tt(i, 3)}, consts: []*ir.Tensor{nil, i64s(2, 1, 5)}, nOut: 1},
		{op: "Expand", opset: 13, ins: []ir.Type{sym(f, "N", 1), tt(i, 3)}, nOut: 1},
		{op: "Expand", opset: 13, ins: []ir.Type{tt(f, 3, 2), tt(i, 2)}, consts: []*ir.Tensor{nil, i64s(3, 4)}, nOut: 1},
		{op: "Transpose", opset: 13, ins: []ir.Type{sym(f, "N", "C", 8)}, nOut: 1},
		{op: "Transpose", opset: 13, ins: []ir.Type{sym(f, "N", "C", 8)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrIs("perm", 0, 2, 1)}},
		{op: "Transpose", opset: 13, ins: []ir.Type{tt(f, 2, 3)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrIs("perm", 0)}},
		{op: "Concat", opset: 13, ins: []ir.Type{sym(f, "N", 3), sym(f, -1, 4), tt(f, 2, -1)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("axis", 1)}},
		{op: "Concat", opset: 13, ins: []ir.Type{sym(f, "N", 3), tt(f, 2, 4)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("axis", 1)}},
		{op: "Concat", opset: 13, ins: []ir.Type{tt(f, 2, 3), tt(f, 3, 3)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("axis", 1)}},
		{op: "Concat", opset: 13, ins: []ir.Type{tt(f, 2, 3), tt(i, 2, 3)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("axis", 0)}},
		{op: "Concat", opset: 1, ins: []ir.Type{tt(f, 2, 3), tt(f, 2, 3)}, nOut: 1},
		{op: "Split", opset: 13, ins: []ir.Type{sym(f, "N", 6)}, nOut: 3, attrs: []*ir.Attribute{ir.AttrI("axis", 1)}},
		{op: "Split", opset: 13, ins: []ir.Type{sym(f, "N", 6), tt(i, 2)}, consts: []*ir.Tensor{nil, i64s(2, 4)}, nOut: 2, attrs: []*ir.Attribute{ir.AttrI("axis", -1)}},
		{op: "Split", opset: 13, ins: []ir.Type{sym(f, "N", 6)}, nOut: 2},
		{op: "Split", opset: 18, ins: []ir.Type{tt(f, 5)}, nOut: 2, attrs: []*ir.Attribute{ir.AttrI("num_outputs", 2)}},
		{op: "Split", opset: 18, ins: []ir.Type{tt(f, 5)}, nOut: 2, attrs: []*ir.Attribute{ir.AttrI("num_outputs", 3)}},
		{op: "Split", opset: 11, ins: []ir.Type{tt(f, 5)}, nOut: 2, attrs: []*ir.Attribute{ir.AttrIs("split", 2, 2)}},
		{op: "Tile", opset: 13, ins: []ir.Type{sym(f, "N", 3), tt(i, 2)}, consts: []*ir.Tensor{nil, i64s(1, 2)}, nOut: 1},
		{op: "Tile", opset: 13, ins: []ir.Type{sym(f, "N", 3), tt(i, 2)}, consts: []*ir.Tensor{nil, i64s(2, 2)}, nOut: 1},
		{op: "Tile", opset: 13, ins: []ir.Type{sym(f, "N", 3), tt(i, 2)}, nOut: 1},
		{op: "Tile", opset: 13, ins: []ir.Type{tt(f, 3), tt(i, 2)}, consts: []*ir.Tensor{nil, i64s(1, 2)}, nOut: 1},
		{op: "ConstantOfShape", opset: 9, ins: []ir.Type{tt(i, 2)}, consts: []*ir.Tensor{i64s(2, 3)}, nOut: 1},
		{op: "ConstantOfShape", opset: 9, ins: []ir.Type{tt(i, 3)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrT("value", ir.FromSlice(ir.Int32, []int64{1}, []int32{1}))}},
		{op: "ConstantOfShape", opset: 9, ins: []ir.Type{tt(i, 2)}, consts: []*ir.Tensor{i64s(2, -3)}, nOut: 1},
		{op: "Constant", opset: 13, nOut: 1, attrs: []*ir.Attribute{ir.AttrF("value_float", 2)}},
		{op: "Range", opset: 11, ins: []ir.Type{tt(f), tt(f), tt(f)}, nOut: 1},
		{op: "Range", opset: 11, ins: []ir.Type{tt(f), tt(i), tt(f)}, nOut: 1},
		{op: "EyeLike", opset: 9, ins: []ir.Type{sym(f, "N", "M")}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("dtype", int64(ir.Int64))}},
		{op: "EyeLike", opset: 9, ins: []ir.Type{tt(f, 3)}, nOut: 1},
		{op: "DepthToSpace", opset: 13, ins: []ir.Type{sym(f, "N", 16, "H", 5)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("blocksize", 2)}},
		{op: "DepthToSpace", opset: 13, ins: []ir.Type{tt(f, 1, 6, 2, 2)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("blocksize", 2)}},
		{op: "SpaceToDepth", opset: 13, ins: []ir.Type{sym(f, "N", 3, 8, "W")}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("blocksize", 4)}},
		// Symbolic dims and shape values (a shape subgraph's [N, -1]).
		{op: "Reshape", opset: 14, ins: []ir.Type{sym(f, "N", 4, 3, 5), tt(i, 2)}, syms: []*SymTensor{nil, symInts("N", "-1")}, nOut: 1},
		{op: "Reshape", opset: 14, ins: []ir.Type{sym(f, "B", "S", 32), tt(i, 4)}, syms: []*SymTensor{nil, symInts("B", "S", "4", "8")}, nOut: 1},
		{op: "Reshape", opset: 14, ins: []ir.Type{sym(f, "B", "S", 4, 8), tt(i, 3)}, syms: []*SymTensor{nil, symInts("B", "S", "-1")}, nOut: 1},
		{op: "Reshape", opset: 14, ins: []ir.Type{sym(f, "B", "S", 32), tt(i, 2)}, syms: []*SymTensor{nil, symInts("-1", "32")}, nOut: 1},
		{op: "Reshape", opset: 14, ins: []ir.Type{sym(f, "B", "S", 32), tt(i, 3)}, syms: []*SymTensor{nil, symInts("B", "?", "-1")}, nOut: 1},
		{op: "Reshape", opset: 14, ins: []ir.Type{sym(f, "N", 6), tt(i, 2)}, syms: []*SymTensor{nil, symInts("N - 1", "-1")}, nOut: 1},
		{op: "Reshape", opset: 14, ins: []ir.Type{sym(f, "N", 6), tt(i, 2)}, syms: []*SymTensor{nil, symInts("M", "-1")}, nOut: 1},
		{op: "Reshape", opset: 14, ins: []ir.Type{sym(f, "N", 6), tt(i, 2)}, syms: []*SymTensor{nil, symInts("-1", "4")}, nOut: 1},
		{op: "Flatten", opset: 13, ins: []ir.Type{sym(f, "N", "C", "H", "W")}, nOut: 1},
		{op: "Flatten", opset: 13, ins: []ir.Type{sym(f, "N", 3, -1)}, nOut: 1},
		{op: "Concat", opset: 13, ins: []ir.Type{sym(f, "N", "S", 4), sym(f, "N", "T", 4), sym(f, "N", "S", 4)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("axis", 1)}},
		{op: "Split", opset: 13, ins: []ir.Type{sym(f, "N", "3*S")}, nOut: 3, attrs: []*ir.Attribute{ir.AttrI("axis", 1)}},
		{op: "Split", opset: 18, ins: []ir.Type{sym(f, "S")}, nOut: 2, attrs: []*ir.Attribute{ir.AttrI("num_outputs", 2)}},
		{op: "Split", opset: 13, ins: []ir.Type{sym(f, "S + T", 2), tt(i, 2)}, syms: []*SymTensor{nil, symInts("S", "T")}, nOut: 2},
		{op: "Tile", opset: 13, ins: []ir.Type{sym(f, "N", 3), tt(i, 2)}, syms: []*SymTensor{nil, symInts("1", "M")}, nOut: 1},
		{op: "Expand", opset: 13, ins: []ir.Type{sym(f, 1, "S", 1), tt(i, 3)}, syms: []*SymTensor{nil, symInts("B", "1", "6")}, nOut: 1},
		{op: "Expand", opset: 13, ins: []ir.Type{sym(f, "N", 1), tt(i, 2)}, syms: []*SymTensor{nil, symInts("?", "4")}, nOut: 1},
		{op: "Expand", opset: 13, ins: []ir.Type{tt(f, 3, 2), tt(i, 2)}, syms: []*SymTensor{nil, symInts("N", "3")}, nOut: 1},
		{op: "ConstantOfShape", opset: 9, ins: []ir.Type{tt(i, 2)}, syms: []*SymTensor{symInts("N", "2*S")}, nOut: 1},
		{op: "ConstantOfShape", opset: 9, ins: []ir.Type{tt(i, 2)}, syms: []*SymTensor{symInts("N", "S - 5")}, nOut: 1},
		{op: "Range", opset: 11, ins: []ir.Type{tt(i), tt(i), tt(i)}, syms: []*SymTensor{symScalar("0"), symScalar("S"), symScalar("1")}, nOut: 1},
		{op: "Range", opset: 11, ins: []ir.Type{tt(i), tt(i), tt(i)}, syms: []*SymTensor{symScalar("S"), symScalar("3*S"), symScalar("2")}, nOut: 1},
		{op: "Range", opset: 11, ins: []ir.Type{tt(i), tt(i), tt(i)}, syms: []*SymTensor{symScalar("S"), symScalar("0"), symScalar("-1")}, nOut: 1},
		{op: "Range", opset: 11, ins: []ir.Type{tt(i), tt(i), tt(i)}, syms: []*SymTensor{symScalar("0"), symScalar("S"), symScalar("D")}, nOut: 1},
		{op: "DepthToSpace", opset: 13, ins: []ir.Type{sym(f, "N", "4*C", "H", "W")}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("blocksize", 2)}},
		{op: "SpaceToDepth", opset: 13, ins: []ir.Type{sym(f, "N", "C", "2*H", "W")}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("blocksize", 2)}},
	})
}

// TestLongPermErrorIsShort: a Transpose whose perm has 10^6 entries is
// refused in a message that shows a few of them, not all.
func TestLongPermErrorIsShort(t *testing.T) {
	perm := make([]int64, 1_000_000)
	for i := range perm {
		perm[i] = int64(len(perm) - 1 - i)
	}
	for _, p := range [][]int64{perm, append([]int64{0, 0}, perm[2:]...)} {
		s, err := Lookup("", "Transpose", 13)
		require.NoError(t, err)
		n := &ir.Node{OpType: "Transpose", Inputs: []*ir.Value{{}}, Outputs: []*ir.Value{{Name: "y"}}, Attrs: []*ir.Attribute{ir.AttrIs("perm", p...)}}
		rank := 2
		if p[0] == 0 {
			rank = len(p) // the right length, not a permutation
		}
		dims := make([]int64, rank)
		for i := range dims {
			dims[i] = 1
		}
		err = s.Infer(NewInferContext(s, n, 13, []ir.Type{tt(ir.Float32, dims...)}, []*ir.Tensor{nil}))
		require.Error(t, err)
		assert.Less(t, len(err.Error()), 1024, "error: %.200s…", err)
		assert.Contains(t, err.Error(), "(1000000 entries)")
	}
}

// A run-time target dim that may be 0 is that dim when 0 would copy the
// same expression from the input (a CRNN's [N, W//2, C·H] of an input
// [N, W//2, C, H]); elsewhere it stays unknown.
func TestReshapeToRunTimeDims(t *testing.T) {
	n, w := dimexpr.Sym("N"), dimexpr.Sym("W")
	half, err := w.FloorDiv(dimexpr.Const(2))
	require.NoError(t, err)
	in := ir.ShapeOf(ir.DimOf(n), ir.DimOf(half), ir.D(16), ir.D(8))
	for _, tc := range []struct {
		target []*dimexpr.Expr
		want   string
	}{
		{[]*dimexpr.Expr{n, half, dimexpr.Const(128)}, "[N,W//2,128]"},
		{[]*dimexpr.Expr{n, w.AddConst(-1), dimexpr.Const(-1)}, "[N,?,?]"}, // W-1 may be 0, copying W//2
		{[]*dimexpr.Expr{half, n, dimexpr.Const(-1)}, "[?,N,?]"},           // a 0 would copy N
	} {
		s, err := reshapeShape(in, tc.target, false)
		require.NoError(t, err)
		assert.Equal(t, tc.want, s.String(), "%v", tc.target)
	}
	s, err := reshapeShape(in, []*dimexpr.Expr{half, n, dimexpr.Const(128)}, true) // allowzero: 0 is 0
	require.NoError(t, err)
	assert.Equal(t, "[W//2,N,128]", s.String())
}
