package ops

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// ifModel is an If whose branches return thenOut and elseOut, built from
// inputs of those types.
func ifModel(cond *ir.Tensor, thenType, elseType ir.Type) (*ir.Model, *ir.Value) {
	g := ir.NewGraph("if")
	var c *ir.Value
	if cond != nil {
		c = g.AddInitializer("cond", cond)
	} else {
		c = g.AddInput("cond", ir.TensorType(ir.Bool, ir.S()))
	}
	a := g.AddInput("a", thenType)
	b := g.AddInput("b", elseType)
	then, els := ir.NewGraph("then"), ir.NewGraph("else")
	then.SetOutputs(then.Apply("Neg", []*ir.Value{a}))
	els.SetOutputs(els.Apply("Neg", []*ir.Value{b}))
	y := g.Apply("If", []*ir.Value{c}, ir.AttrG("then_branch", then), ir.AttrG("else_branch", els))
	g.SetOutputs(y)
	return ir.NewModel(g, 16), y
}

func TestInferIf(t *testing.T) {
	f := func(dims ...ir.Dim) ir.Type { return ir.TensorType(ir.Float32, ir.ShapeOf(dims...)) }
	for _, tc := range []struct {
		then, els ir.Type
		cond      *ir.Tensor
		want      string
	}{
		{f(ir.Sym("N"), ir.D(3)), f(ir.Sym("N"), ir.D(4)), nil, "float[N,branch_If_out0_1]"}, // the branch that runs decides (datadims.go)
		{f(ir.D(2)), f(ir.D(2), ir.D(1)), nil, "float[]"},                                    // ranks differ: unranked
		{f(ir.D(2)), f(ir.D(2), ir.D(1)), ir.Scalar(ir.Bool, true), "float[2]"},
		{f(ir.D(2)), f(ir.D(2), ir.D(1)), ir.Scalar(ir.Bool, false), "float[2,1]"},
	} {
		m, y := ifModel(tc.cond, tc.then, tc.els)
		_, err := InferShapes(m)
		require.NoError(t, err)
		assert.Equal(t, tc.want, y.Type.String())
		if tc.cond == nil || tc.cond.Int64At(0) != 0 {
			assert.Equal(t, tc.then.String(), m.Graph.Nodes[0].Attrs[0].G.Outputs[0].Type.String(), "the branch's own nodes are typed")
		}
	}
	m, _ := ifModel(nil, f(ir.D(2)), ir.TensorType(ir.Int32, ir.S(2)))
	_, err := InferShapes(m)
	assert.ErrorContains(t, err, "the branches disagree")
}

// A known condition leaves the branch that cannot run untyped: exporters
// put each rank's code under an If on the rank, and the other rank's
// branch does not type (a Split of 5 into 4 in AffineGrid's 2-D branch).
func TestInferIfSkipsTheUntakenBranch(t *testing.T) {
	m, y := ifModel(ir.Scalar(ir.Bool, true), ir.TensorType(ir.Float32, ir.S(5)), ir.TensorType(ir.Float32, ir.S(5)))
	els := m.Graph.Nodes[0].Attrs[1].G
	els.Nodes[0].OpType = "Split" // one input, Neg's output count: cannot split 5 by num_outputs 4
	els.Nodes[0].SetAttr(ir.AttrI("num_outputs", 4))
	_, err := InferShapes(m)
	require.NoError(t, err)
	assert.Equal(t, "float[5]", y.Type.String())
}

func TestControlFlowRefusesMalformedNodes(t *testing.T) {
	g := ir.NewGraph("bad")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(4, 2)))
	body := ir.NewGraph("body")
	body.SetOutputs(body.AddInput("row", ir.TensorType(ir.Float32, ir.S(2))))
	g.SetOutputs(g.Apply("Scan", []*ir.Value{x}, ir.AttrG("body", body), ir.AttrI("num_scan_inputs", 2)))
	_, err := InferShapes(ir.NewModel(g, 11))
	assert.ErrorContains(t, err, "num_scan_inputs is 2, want 1 to 1")

	g.Nodes[0].Attrs[1] = ir.AttrI("num_scan_inputs", 1)
	g.Nodes[0].Attrs = append(g.Nodes[0].Attrs, ir.AttrIs("scan_input_axes", 2))
	_, err = InferShapes(ir.NewModel(g, 11))
	assert.ErrorContains(t, err, "scan input axis 2 is out of range for rank 2")

	loop := ir.NewGraph("loop")
	lbody := ir.NewGraph("body")
	lbody.SetOutputs(lbody.AddInput("i", ir.TensorType(ir.Int64, ir.S())))
	loop.SetOutputs(loop.Apply("Loop", []*ir.Value{nil, nil}, ir.AttrG("body", lbody)))
	_, err = InferShapes(ir.NewModel(loop, 13))
	assert.ErrorContains(t, err, "body has 1 inputs, want 2")

	// Without an executor to run subgraphs a kernel says so.
	m, _ := ifModel(nil, ir.TensorType(ir.Float32, ir.S(1)), ir.TensorType(ir.Float32, ir.S(1)))
	n := m.Graph.Nodes[0]
	s, err := OpsetsOf(m).Schema(n)
	require.NoError(t, err)
	c := NewKernelContext(s, n, 16, []*ir.Tensor{ir.Scalar(ir.Bool, true)})
	assert.ErrorContains(t, s.Run(c), "cannot run subgraphs")
}

// TestTakeAndStack: slicing along an axis and stacking the slices back is
// the identity, checked on random data against naive indexing.
func TestTakeAndStack(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	dims := []int64{3, 4, 5}
	data := make([]float32, 60)
	for i := range data {
		data[i] = r.Float32() + 0.5
	}
	x := ir.FromSlice(ir.Float32, dims, data)
	c := &KernelContext{Node: &ir.Node{OpType: "Scan"}}
	for axis := 0; axis < 3; axis++ {
		var parts []*ir.Tensor
		for i := int64(0); i < dims[axis]; i++ {
			p, err := take(c, x, axis, i)
			require.NoError(t, err)
			idx := []int64{0, 0, 0}
			got := p.Float32s()
			for k := range got {
				// naive: the k-th element of the slice in row-major order
				rest := []int64{}
				for a := 0; a < 3; a++ {
					if a != axis {
						rest = append(rest, dims[a])
					}
				}
				rem := int64(k)
				j := 0
				for a := 2; a >= 0; a-- {
					if a == axis {
						idx[a] = i
						continue
					}
					idx[a] = rem % rest[1-j]
					rem /= rest[1-j]
					j++
				}
				assert.Equal(t, data[(idx[0]*4+idx[1])*5+idx[2]], got[k], "axis %d index %d element %d", axis, i, k)
			}
			parts = append(parts, p)
		}
		back, err := stack(c, nil, parts, axis, ir.Type{})
		require.NoError(t, err)
		assert.Equal(t, dims, back.Dims)
		assert.Equal(t, data, back.Float32s(), "axis %d", axis)
	}
}

// TestInferKeepsInvariantBodyValues: the values a body computes from its
// constants, the graph around it and its inputs' types are known after
// inference (a Reshape's shape from Shape→Gather→Unsqueeze→Concat, in a
// Loop body, an If nested in it and a Scan body); those that depend on
// the iteration number or on data are not, nor are those of a Loop whose
// carried value changes shape (its first pass's Shape was of iteration 0
// only).
func TestInferKeepsInvariantBodyValues(t *testing.T) {
	f := func(dims ...int64) ir.Type { return ir.TensorType(ir.Float32, ir.S(dims...)) }
	i64 := func(g *ir.Graph, name string, v ...int64) *ir.Value {
		return g.AddInitializer(name, ir.FromSlice(ir.Int64, []int64{int64(len(v))}, v))
	}
	// flatShape is x.view(x.size(0), -1)'s shape, computed in g.
	flatShape := func(g *ir.Graph, x *ir.Value) *ir.Value {
		first := g.Apply("Gather", []*ir.Value{g.Apply("Shape", []*ir.Value{x}), g.AddInitializer(x.Name+".zero", ir.Scalar(ir.Int64, int64(0)))})
		dim := g.Apply("Unsqueeze", []*ir.Value{first, i64(g, x.Name+".axes", 0)})
		return g.Apply("Concat", []*ir.Value{dim, i64(g, x.Name+".rest", -1)}, ir.AttrI("axis", 0))
	}
	g := ir.NewGraph("bodies")
	x := g.AddInput("x", f(2, 3, 4))
	n := g.AddInput("n", ir.TensorType(ir.Int64, ir.S()))
	cond := g.AddInput("cond", ir.TensorType(ir.Bool, ir.S()))

	body := ir.NewGraph("body")
	iter := body.AddInput("i", ir.TensorType(ir.Int64, ir.S()))
	c := body.AddInput("c", ir.TensorType(ir.Bool, ir.S()))
	h := body.AddInput("h", f(2, 3, 4))
	hShape := flatShape(body, h)
	xShape := flatShape(body, x)
	next := body.Apply("Add", []*ir.Value{h, x})
	byIter := body.Apply("Add", []*ir.Value{iter, body.AddInitializer("one", ir.Scalar(ir.Int64, int64(1)))})
	then, els := ir.NewGraph("then"), ir.NewGraph("else")
	inThen := flatShape(then, next)
	then.SetOutputs(then.Apply("Reshape", []*ir.Value{next, inThen}))
	els.SetOutputs(els.Apply("Reshape", []*ir.Value{h, xShape}))
	branch := body.Apply("If", []*ir.Value{c}, ir.AttrG("then_branch", then), ir.AttrG("else_branch", els))
	body.SetOutputs(c, next, body.Apply("Reshape", []*ir.Value{h, hShape}), branch, byIter)
	loop := g.AddNode("Loop", []*ir.Value{n, nil, x}, 4, ir.AttrG("body", body))

	grow := ir.NewGraph("grow")
	grow.AddInput("i", ir.TensorType(ir.Int64, ir.S()))
	gc := grow.AddInput("c", ir.TensorType(ir.Bool, ir.S()))
	v := grow.AddInput("v", ir.TensorType(ir.Float32, ir.Shape{})) // declared unranked: it grows
	growShape := grow.Apply("Shape", []*ir.Value{v})
	grow.SetOutputs(gc, grow.Apply("Concat", []*ir.Value{v, v}, ir.AttrI("axis", 0)), growShape)
	grown := g.AddNode("Loop", []*ir.Value{n, cond, g.AddInitializer("v0", ir.NewTensor(ir.Float32, 1))}, 2, ir.AttrG("body", grow))

	sbody := ir.NewGraph("scan")
	acc := sbody.AddInput("acc", f(3, 4))
	row := sbody.AddInput("row", f(3, 4))
	rowShape := flatShape(sbody, row)
	sbody.SetOutputs(sbody.Apply("Add", []*ir.Value{acc, row}), sbody.Apply("Reshape", []*ir.Value{row, rowShape}))
	scan := g.AddNode("Scan", []*ir.Value{g.AddInitializer("acc0", ir.NewTensor(ir.Float32, 3, 4)), x}, 2,
		ir.AttrG("body", sbody), ir.AttrI("num_scan_inputs", 1))
	g.SetOutputs(append(append(loop.Outputs, grown.Outputs...), scan.Outputs...)...)

	known, err := InferShapes(ir.NewModel(g, 13))
	require.NoError(t, err)
	for _, tc := range []struct {
		v    *ir.Value
		want []int64
	}{{hShape, []int64{2, -1}}, {xShape, []int64{2, -1}}, {inThen, []int64{2, -1}}, {rowShape, []int64{3, -1}}} {
		require.NotNil(t, known[tc.v], "%s is not known", tc.v.Name)
		assert.Equal(t, tc.want, known[tc.v].Int64s(), tc.v.Name)
	}
	for _, v := range []*ir.Value{iter, c, h, next, byIter, branch, growShape} {
		assert.Nil(t, known[v], "%s is known", v.Name)
	}
	assert.Equal(t, "float[2,12]", body.Outputs[2].Type.String(), "the Reshape's shape is static")
	assert.Equal(t, "float[3,4]", sbody.Outputs[1].Type.String())
}

// A Loop body that declares its iteration number int64[1] (as PyTorch's
// scripted exports do; ONNX says a scalar) infers: one element is taken
// for the scalar, as ONNX Runtime runs it.
func TestLoopIterationDeclaredAsOneElement(t *testing.T) {
	body := ir.NewGraph("body")
	body.AddInput("i", ir.TensorType(ir.Int64, ir.S(1)))
	cond := body.AddInput("c", ir.TensorType(ir.Bool, ir.S()))
	x := body.AddInput("x", ir.TensorType(ir.Float32, ir.S(2)))
	body.SetOutputs(cond, body.Apply("Add", []*ir.Value{x, x}))
	g := ir.NewGraph("loop")
	x0 := g.AddInput("x0", ir.TensorType(ir.Float32, ir.S(2)))
	m := g.AddInitializer("m", ir.Scalar(ir.Int64, int64(3)))
	yes := g.AddInitializer("yes", ir.FromSlice(ir.Bool, nil, []bool{true}))
	y := g.Apply("Loop", []*ir.Value{m, yes, x0}, ir.AttrG("body", body))
	g.SetOutputs(y)
	_, err := InferShapes(ir.NewModel(g, 17))
	require.NoError(t, err)
	assert.Equal(t, "float[2]", y.Type.String())
}
