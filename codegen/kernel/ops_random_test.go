package kernel

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/internal/opcase"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/runtime/reference"
)

var randomOps = []string{"RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike", "Bernoulli", "Multinomial"}

// The seeded random cases draw on the evaluator exactly what the
// reference draws: the same bits, not merely close values (the generator
// is one definition, ops.RandomDraw), under the CPU's schedule too.
func TestRandomDrawsAreTheReferences(t *testing.T) {
	cases := opcase.Cases()
	for _, op := range randomOps {
		require.NotEmpty(t, cases[op], op)
		for _, line := range cases[op] {
			c, err := opcase.Parse(line)
			require.NoError(t, err)
			types := []ir.DType{ir.Undefined}
			if c.Types() {
				types = Lookup(op).Types
			}
			for _, d := range types {
				g := ir.NewGraph("case")
				outs, feeds, err := c.Add(g, "c", d, rand.New(rand.NewSource(seedOf(op))))
				require.NoError(t, err, line)
				m := opcase.NewModel(g, c.Opset)
				_, err = ops.InferShapes(m)
				require.NoError(t, err, line)
				ref, err := reference.New(m)
				require.NoError(t, err, line)
				want, err := ref.Run(feeds)
				require.NoError(t, err, line)
				inputs, consts := opcase.Inputs(g.Nodes[0], feeds)
				for _, vl := range []int{0, 16} {
					schedule := func(k *Kernel) Schedule { return CPUSchedule(k, vl) }
					if vl == 0 {
						schedule = nil
					}
					got, err := RunNode(g.Nodes[0], ops.OpsetsOf(m), inputs, consts, schedule)
					require.NoError(t, err, line)
					w := want[outs[0].Name]
					assert.True(t, w.Len() == 0 || !bytes.Equal(w.Raw, bytes.Repeat([]byte{unwrittenByte}, len(w.Raw))), line)
					assert.Equal(t, w.DType, got[0].DType, "%s [T=%s]", line, d)
					assert.True(t, bytes.Equal(w.Raw, got[0].Raw), "%s [T=%s, VL %d]: not the reference's bits", line, d, vl)
				}
			}
		}
	}
}

// A node without a seed draws, once built, one stream: the one
// ops.RandomSpec fixes from its output's name.
func TestUnseededDrawIsFixedPerBuild(t *testing.T) {
	g := ir.NewGraph("g")
	y := g.Apply("RandomNormal", nil, ir.AttrIs("shape", 64))
	z := g.Apply("RandomNormal", nil, ir.AttrIs("shape", 64))
	g.SetOutputs(y, z)
	m := ir.NewModel(g, 22)
	_, err := ops.InferShapes(m)
	require.NoError(t, err)
	run := func(n *ir.Node) []byte {
		got, err := RunNode(n, ops.OpsetsOf(m), nil, nil, nil)
		require.NoError(t, err)
		return got[0].Raw
	}
	assert.Equal(t, run(g.Nodes[0]), run(g.Nodes[0]))
	assert.NotEqual(t, run(g.Nodes[0]), run(g.Nodes[1]), "two nodes without a seed draw one stream")
}
