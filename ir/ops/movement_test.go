package ops_test

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/internal/opcase"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// TestMovementAgainstReference holds ops.MovementOf to what the reference
// kernels do on random inputs: a view keeps its input's elements in order,
// a permutation keeps them as a multiset, a selection only copies input
// elements or its padding constant, and a node said to compute does not
// (the interpolating Resize).
func TestMovementAgainstReference(t *testing.T) {
	for _, c := range []struct {
		line string
		want ops.Movement
		pad  float32 // a Select's padding value
	}{
		{"Reshape-14 float[2,3,4], int64[2]=[6 -1]", ops.View, 0},
		{"Flatten-13(axis=2) float[2,3,4,5]", ops.View, 0},
		{"Squeeze-13 float[3,1,5], int64[1]=[1]", ops.View, 0},
		{"Unsqueeze-13 float[3,5], int64[2]=[0 -1]", ops.View, 0},
		{"Identity-16 float[3,17]", ops.View, 0},
		{"Transpose-13(perm=[1 2 0]) float[4,5,3]", ops.Permute, 0},
		{"DepthToSpace-13(blocksize=2) float[1,8,3,2]", ops.Permute, 0},
		{"SpaceToDepth-13(blocksize=2) float[1,3,4,6]", ops.Permute, 0},
		{"Slice-13 float[6,7], int64[2]=[-1 -100], int64[2]=[-100 100], int64[2]=[0 1], int64[2]=[-2 3]", ops.Select, 0},
		{"Gather-13(axis=1) float[3,5,2], int64[2,2]~idx(5)", ops.Select, 0},
		{"Split-13(axis=1) float[2,7,5], int64[2]=[3 4] -> 2", ops.Select, 0},
		{"Expand-13 float[3,1], int64[3]=[2 3 17]", ops.Select, 0},
		{"Tile-13 float[2,3,5], int64[3]=[2 1 3]", ops.Select, 0},
		{"Concat-13(axis=1) float[2,3,5], float[2,7,5]", ops.Select, 0},
		{"MaxPool-22(kernel_shape=[3 3], pads=[1 1 1 1], strides=[2 2]) float[2,3,7,7]", ops.Select, 0},
		{"Pad-13 float[3,5], int64[4]=[1 2 2 0]", ops.Select, 0},
		{"Pad-2(pads=[0 1 1 0], value=2.5) float[3,3]", ops.Select, 2.5},
		{"Pad-13(mode=\"reflect\") float[3,5], int64[4]=[2 3 2 4]", ops.Select, 0},
		{"Resize-13(mode=\"nearest\", coordinate_transformation_mode=\"asymmetric\") float[1,2,3,4], _, _, int64[4]=[1 2 7 2]", ops.Select, 0},
		{"Resize-13(mode=\"linear\") float[1,2,4,4], _, float[4]=[1 1 2 1.5]", ops.Computes, 0},
	} {
		t.Run(c.line, func(t *testing.T) {
			oc, err := opcase.Parse(c.line)
			require.NoError(t, err)
			m, feeds, err := opcase.Model([]string{c.line}, ir.Float32, oc.Opset, rand.New(rand.NewSource(1)))
			require.NoError(t, err)
			n := m.Graph.Nodes[len(m.Graph.Nodes)-1]
			require.Equal(t, c.want, ops.MovementOf(n))
			ex, err := reference.New(m)
			require.NoError(t, err)
			outs, err := ex.Run(feeds)
			require.NoError(t, err)
			var in []float32 // the moved inputs' elements, in order
			for _, i := range ops.MovedInputs(n) {
				in = append(in, valueOf(n.Inputs[i], feeds).Float32s()...)
			}
			if c.want == ops.Computes {
				require.Nil(t, ops.MovedInputs(n))
				in = feeds[n.Inputs[0].Name].Float32s()
			}
			has := map[float32]int{c.pad: 1 << 30}
			for _, x := range in {
				has[x]++
			}
			copies := true
			var out []float32
			for _, o := range n.Outputs {
				if o == nil || o.Type.Elem != ir.Float32 {
					continue
				}
				out = append(out, outs[o.Name].Float32s()...)
			}
			for _, x := range out {
				copies = copies && has[x] > 0
			}
			switch c.want {
			case ops.View:
				assert.Equal(t, in, out)
			case ops.Permute:
				assert.ElementsMatch(t, in, out)
			case ops.Select:
				assert.True(t, copies, "an output element is no input element")
			case ops.Computes:
				assert.False(t, copies, "every output element is an input element")
			}
		})
	}
}

func valueOf(v *ir.Value, feeds map[string]*ir.Tensor) *ir.Tensor {
	if v.IsConst() {
		return v.Const
	}
	return feeds[v.Name]
}
