package kernel

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/frontend/text"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// unrankedModel is a model whose value u has no rank after shape
// inference (an If whose branches differ in rank, its condition read at
// run time), read by node y, whose output is declared static.
const unrankedModel = `<ir_version: 8, opset_import: ["" : 17]>
m (bool cond, float[2,3] x, float[2,3,1] z) => (%s y)
<int64[2] idx = {0, 1}, int64[2] shp = {4, 6}, float[3,4] w = {1,2,3,4,5,6,7,8,9,10,11,12}>
{
  u = If (cond) <
    then_branch = then_g () => (float[2,3] t) { t = Neg (x) },
    else_branch = else_g () => (float[2,3,1] e) { e = Neg (z) }
  >
  y = %s
}`

// TestUnknownRanksAreRefused: a node reading a value of unknown rank, or
// writing one, is refused, naming the value, where definitions once
// indexed the rank-0 buffer a lowering gives such a value by the node's
// rank and panicked (Concat, DepthToSpace, GatherND, SpaceToDepth, MatMul,
// Gemm; Broadcast at index -2 for an output so).
func TestUnknownRanksAreRefused(t *testing.T) {
	for _, tc := range []struct{ out, node, want string }{
		{"float[4,3]", "Concat <axis = 0> (u, x)", `input 0 ("u") has a rank not known`},
		{"float[1,1,2,3]", "DepthToSpace <blocksize = 1> (u)", `input 0 ("u") has a rank not known`},
		{"float[2]", "GatherND (u, idx)", `input 0 ("u") has a rank not known`},
		{"float[1,4,1,1]", "SpaceToDepth <blocksize = 2> (u)", `input 0 ("u") has a rank not known`},
		{"float[2,4]", "MatMul (u, w)", `input 0 ("u") has a rank not known`},
		{"float[2,4]", "Gemm (u, w)", `input 0 ("u") has a rank not known`},
		{"float[4,6]", `Resize (u, "", "", shp)`, `input 0 ("u") has a rank not known`},
		{"float[2,3]", "Add (u, x)", `input 0 ("u") has a rank not known`},
		{"float[2,3]", "Add (x, x)", `output 0 ("y") has a rank not known`},
	} {
		m, err := text.Parse("m", []byte(fmt.Sprintf(unrankedModel, tc.out, tc.node)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ops.InferShapes(m); err != nil {
			t.Fatal(err)
		}
		n := m.Graph.Nodes[len(m.Graph.Nodes)-1]
		if strings.HasPrefix(tc.want, "output") {
			n.Outputs[0].Type.Shape = ir.Shape{} // as an output inference could not rank
		} else if r := n.Inputs[0].Type.Shape.Rank(); r != -1 {
			t.Fatalf("%s: u has rank %d after inference, want none (the test's premise)", tc.node, r)
		}
		err = buildLikeALowering(n, ops.OpsetsOf(m))
		var ue *ops.UnsupportedError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want a refusal saying %s", tc.node, err, tc.want)
		}
	}
}

// TestMismatchedBufferRankIsRefused: a buffer of another rank than its
// static value's is refused, naming both.
func TestMismatchedBufferRankIsRefused(t *testing.T) {
	g := ir.NewGraph("g")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(2, 3)))
	n := g.AddNode("Relu", []*ir.Value{x}, 1)
	n.Outputs[0].Type = ir.TensorType(ir.Float32, ir.S(2, 3))
	in := []*Buffer{NewBuffer("x", ir.Float32, 2, 3, 1)}
	out := []*Buffer{NewBuffer("y", ir.Float32, 2, 3)}
	_, err := NewCtx(n, ops.Opsets{"": 17}, in, out, nil)
	if err == nil || !strings.Contains(err.Error(), `input 0 ("x") is float[2,3] but its buffer has rank 3`) {
		t.Errorf("got %v, want a refusal naming the ranks", err)
	}
}

// buildLikeALowering builds n's kernels with the buffers a lowering gives
// its values (a static shape's dims, no dims for any other), turning a
// panic into an error.
func buildLikeALowering(n *ir.Node, opsets ops.Opsets) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	buffers := func(vs []*ir.Value) []*Buffer {
		bs := make([]*Buffer, len(vs))
		for i, v := range vs {
			if v == nil {
				continue
			}
			d, _ := v.Type.Shape.Ints()
			bs[i] = &Buffer{Name: v.Name, DType: v.Type.Elem, Dims: Ints(d...), ID: i}
		}
		return bs
	}
	c, err := NewCtx(n, opsets, buffers(n.Inputs), buffers(n.Outputs), nil)
	if err != nil {
		return err
	}
	return Build(c)
}
