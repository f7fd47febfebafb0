package ops_test

import (
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/internal/opcase"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// TestInt8AgainstReference holds ops.Int8Of to the reference kernels on
// random 8-bit inputs q with scale s and zero point z: an op that passes
// 8-bit data through computes, on q, exactly the quantization of what it
// computes on the floats (q − z)·s, so no requantization is needed; an
// op with an integer kernel (or none) does not: some of its float results
// fall between the grid's points. T is uint8 here, and each op's row must
// take int8 as well.
func TestInt8AgainstReference(t *testing.T) {
	for _, c := range []struct {
		line string
		want ops.Int8Behaviour
	}{
		{"Reshape-14 T[2,3,4], int64[2]=[6 -1]", passThrough},
		{"Flatten-13(axis=2) T[2,3,4,5]", passThrough},
		{"Squeeze-13 T[3,1,5], int64[1]=[1]", passThrough},
		{"Unsqueeze-13 T[3,5], int64[2]=[0 -1]", passThrough},
		{"Identity-16 T[3,17]", passThrough},
		{"Transpose-13(perm=[1 2 0]) T[4,5,3]", passThrough},
		{"DepthToSpace-13(blocksize=2) T[1,8,3,2]", passThrough},
		{"SpaceToDepth-13(blocksize=2) T[1,3,4,6]", passThrough},
		{"Slice-13 T[6,7], int64[2]=[-1 -100], int64[2]=[-100 100], int64[2]=[0 1], int64[2]=[-2 3]", passThrough},
		{"Gather-13(axis=1) T[3,5,2], int64[2,2]~idx(5)", passThrough},
		{"Split-13(axis=1) T[2,7,5], int64[2]=[3 4] -> 2", passThrough},
		{"Expand-13 T[3,1], int64[3]=[2 3 17]", passThrough},
		{"Tile-13 T[2,3,5], int64[3]=[2 1 3]", passThrough},
		{"Concat-13(axis=1) T[2,3,5], T[2,7,5]", passThrough},
		{"MaxPool-22(kernel_shape=[3 3], pads=[1 1 1 1], strides=[2 2]) T[2,3,7,7]", passThrough},
		// The fill, dequantized like the data, is on the grid.
		{"Pad-13 T[3,5], int64[4]=[1 2 2 0], T=[7]", passThrough},
		{`Pad-13(mode="edge") T[3,5], int64[4]=[2 3 2 4]`, passThrough},
		{`Resize-13(mode="nearest", coordinate_transformation_mode="asymmetric") T[1,2,3,4], _, _, int64[4]=[1 2 7 2]`, passThrough},
		{"AveragePool-22(kernel_shape=[2 2]) T[1,2,5,5]", int8Kernel(ops.GroupQPool)},
		{"GlobalAveragePool-22 T[1,3,4,4]", int8Kernel(ops.GroupQPool)},
		{"Sigmoid-13 T[4,9]", int8Kernel(ops.GroupQLut)},
		{"HardSwish-22 T[4,9]", int8Kernel(ops.GroupQLut)},
		{`Resize-13(mode="linear") T[1,2,4,4], _, float[4]=[1 1 2 1.5]`, inFloat},
		{"Tanh-13 T[4,9]", inFloat},
	} {
		t.Run(c.line, func(t *testing.T) {
			m, feeds, err := opcase.Model([]string{c.line}, ir.Uint8, 22, rand.New(rand.NewSource(2)))
			require.NoError(t, err)
			oc, err := opcase.Parse(c.line)
			require.NoError(t, err)
			m.OpsetImports[0].Version = oc.Opset
			n := m.Graph.Nodes[0]
			require.Equal(t, c.want, ops.Int8Of(n))
			const scale, zero = 0.25, 3 // (q − 3)·0.25 is exact in float32
			floats := dequantizedInputs(m, scale, zero)
			y := runReference(t, floats, feeds)
			if c.want.Int8 == ops.Int8PassThrough {
				s, err := ops.OpsetsOf(m).Schema(n)
				require.NoError(t, err)
				assert.True(t, s.SupportsType(ir.Int8) && s.SupportsType(ir.Uint8), "the row takes 8-bit data")
				moved := runReference(t, m, feeds)
				for _, i := range ops.MovedOutputs(n) {
					o := n.Outputs[i].Name
					want := moved[o]
					require.Equal(t, ir.Uint8, want.DType, "output %s", o)
					got := make([]float32, want.Len())
					for k := range got {
						got[k] = float32(want.Int64At(k)-zero) * scale
					}
					assert.Equal(t, got, y[o].Float32s(), "output %s: the op on q, dequantized, is the op on the floats", o)
				}
				return
			}
			onGrid := true
			for _, o := range n.Outputs {
				for _, v := range y[o.Name].Float32s() {
					q := float64(v)/scale + zero
					onGrid = onGrid && q == math.Round(q)
				}
			}
			assert.False(t, onGrid, "every float result is on the input's grid: the op could pass 8-bit data through")
		})
	}
}

var (
	passThrough = ops.Int8Behaviour{Int8: ops.Int8PassThrough}
	inFloat     = ops.Int8Behaviour{}
)

func int8Kernel(k ops.GroupKind) ops.Int8Behaviour {
	return ops.Int8Behaviour{Int8: ops.Int8Kernel, Kind: k}
}

// dequantizedInputs is m with each uint8 input and initializer read
// through a DequantizeLinear of scale and zero: the float model of the
// same values.
func dequantizedInputs(m *ir.Model, scale float32, zero uint8) *ir.Model {
	g := ir.NewGraph("dequantized")
	g.Inputs, g.Initializers = m.Graph.Inputs, m.Graph.Initializers
	s := g.AddInitializer("dq_scale", ir.Scalar(ir.Float32, scale))
	z := g.AddInitializer("dq_zero", ir.Scalar(ir.Uint8, zero))
	n := m.Graph.Nodes[0]
	c := &ir.Node{Name: n.Name, OpType: n.OpType, Attrs: n.Attrs}
	for _, v := range n.Inputs {
		if v != nil && v.Type.Elem == ir.Uint8 {
			v = g.Apply("DequantizeLinear", []*ir.Value{v, s, z})
		}
		c.Inputs = append(c.Inputs, v)
	}
	for _, o := range n.Outputs {
		c.Outputs = append(c.Outputs, &ir.Value{Name: o.Name, Producer: c})
	}
	g.Nodes = append(g.Nodes, c)
	g.SetOutputs(c.Outputs...)
	return ir.NewModel(g, m.OpsetImports[0].Version)
}

func runReference(t *testing.T, m *ir.Model, feeds map[string]*ir.Tensor) map[string]*ir.Tensor {
	t.Helper()
	ex, err := reference.New(m)
	require.NoError(t, err)
	out, err := ex.Run(feeds)
	require.NoError(t, err)
	return out
}

// TestInt8Rows: over every registered op, one that passes 8-bit data
// through has a newest row taking int8 and uint8 (where a model holds
// 8-bit tensors), and one with an integer kernel forms a quantized group.
func TestInt8Rows(t *testing.T) {
	newest := map[string]*ops.Schema{}
	for _, s := range ops.All() {
		if s.Domain == "" {
			newest[s.Name] = s // All is sorted by version
		}
	}
	kinds := 0
	for name, s := range newest {
		b := ops.Int8Of(&ir.Node{OpType: name})
		switch b.Int8 {
		case ops.Int8PassThrough:
			assert.True(t, s.SupportsType(ir.Int8) && s.SupportsType(ir.Uint8), "%s passes 8-bit data through but its row v%d does not take it", name, s.Since)
			assert.Empty(t, b.Kind, name)
		case ops.Int8Kernel:
			kinds++
			assert.True(t, b.Kind.Quantized(), "%s's kernel forms %q", name, b.Kind)
		default:
			assert.Empty(t, b.Kind, name)
		}
	}
	assert.Equal(t, 9, kinds, "the ops with an integer kernel")
	assert.Equal(t, inFloat, ops.Int8Of(&ir.Node{OpType: "Conv", Domain: ir.KilnDomain}), "another domain's op computes in float")
}
