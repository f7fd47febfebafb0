package passes

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/frontend/text"
	"github.com/kiln-ml/kiln/ir/ops"
)

// staticTarget is a backend without control flow, as the CUDA targets.
type staticTarget struct{ Reference }

// loopTarget compiles loops, as the CPU targets.
type loopTarget struct{ Reference }

func (loopTarget) CompilesLoops() {}

// TestUnrollScansMatchesReference unrolls Scans (two states, two scan
// inputs read along axis 1, one of them in reverse, scan outputs stacked
// along axes 0 and -1, one in reverse; a body constant; an outer value
// read inside) at opsets 9 and 13 (Unsqueeze's axes an attribute, then
// an input): no Scan is left, and the unrolled graph computes what the
// Scan does on random inputs. A target that compiles loops keeps it.
func TestUnrollScansMatchesReference(t *testing.T) {
	for _, opset := range []int{9, 13} {
		src := fmt.Sprintf(`<ir_version: 8, opset_import: ["" : %d]>
g (float[2] s0, float[2] s1, float[2,5,2] x, float[3,5] y, float[2] w) => (float[2] f0, float[2] f1, float[5,2] o0, float[3,5] o1) {
  f0, f1, o0, o1 = Scan(s0, s1, x, y) <
    num_scan_inputs = 2, scan_input_axes = [1, 1], scan_input_directions = [0, 1],
    scan_output_axes = [0, -1], scan_output_directions = [0, 1],
    body = b (float[2] a, float[2] c, float[2,2] xt, float[3] yt) => (float[2] na, float[2] nc, float[2] oa, float[3] ob) <float[2] k = {0.5, -2}> {
      r = ReduceSum <axes = [0], keepdims = 0> (xt)
      na = Add(a, r)
      m = Mul(c, k)
      nc = Add(m, w)
      oa = Mul(na, nc)
      ob = Neg(yt)
    }
  >
}`, opset)
		if opset >= 13 {
			src = replaceReduceAxes(src)
		}
		orig, err := text.Parse("scan", []byte(src))
		require.NoError(t, err)
		infer, _ := Lookup(O2, "infer")
		unroll, _ := Lookup(O2, "unroll-scans")
		kept, err := text.Parse("scan", []byte(src))
		require.NoError(t, err)
		require.NoError(t, Run(&Context{OptLevel: 2, Verify: true, Target: loopTarget{}}, []Pass{infer, unroll}, kept))
		assert.Equal(t, "Scan", kept.Graph.Nodes[len(kept.Graph.Nodes)-1].OpType, "a loop target keeps the Scan")

		unrolled, err := text.Parse("scan", []byte(src))
		require.NoError(t, err)
		require.NoError(t, Run(&Context{OptLevel: 2, Verify: true, Target: staticTarget{}}, []Pass{infer, unroll}, unrolled))
		for _, n := range unrolled.Graph.Nodes {
			require.NotEqual(t, "Scan", n.OpType, "opset %d", opset)
		}
		inputs := randomInputs(t, orig)
		want, got := runReference(t, orig, inputs), runReference(t, unrolled, inputs)
		for name, w := range want {
			g, ok := got[name]
			require.True(t, ok, "output %q lost", name)
			assert.Equal(t, w.Dims, g.Dims, "opset %d: %s", opset, name)
			assert.Equal(t, ops.Float64s(w), ops.Float64s(g), "opset %d: %s", opset, name)
		}
	}
}

// replaceReduceAxes moves ReduceSum's axes to an input (opset 13).
func replaceReduceAxes(src string) string {
	const from = `r = ReduceSum <axes = [0], keepdims = 0> (xt)`
	const to = `zero = Constant <value = int64[1] {0}> ()
      r = ReduceSum <keepdims = 0> (xt, zero)`
	for i := 0; i+len(from) <= len(src); i++ {
		if src[i:i+len(from)] == from {
			return src[:i] + to + src[i+len(from):]
		}
	}
	return src
}

// TestUnrollScansKeepsMalformedScan: a Scan whose scan_input_axes does
// not name every scan input stays, for the backend to report.
func TestUnrollScansKeepsMalformedScan(t *testing.T) {
	m, err := text.Parse("scan", []byte(`<ir_version: 8, opset_import: ["" : 13]>
g (float[2] s0, float[3,2] x, float[3,2] y) => (float[2] f0) {
  f0 = Scan(s0, x, y) <
    num_scan_inputs = 2, scan_input_axes = [0],
    body = b (float[2] a, float[2] xt, float[2] yt) => (float[2] na) {
      p = Add(a, xt)
      na = Add(p, yt)
    }
  >
}`))
	require.NoError(t, err)
	unroll, _ := Lookup(O2, "unroll-scans")
	require.NoError(t, Run(&Context{OptLevel: 2, Target: staticTarget{}}, []Pass{unroll}, m))
	assert.Equal(t, "Scan", m.Graph.Nodes[len(m.Graph.Nodes)-1].OpType)
}
