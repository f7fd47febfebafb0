package kernel

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kiln-ml/kiln/ir"
)

// TestInlineShared: a value read twice is inlined once, whichever of the
// readers' own Load and Var nodes reach it; a chain of such joins grows by
// a constant number of nodes a step, not twofold.
func TestInlineShared(t *testing.T) {
	const depth = 16
	x := NewBuffer("x", ir.Float32, 1000)
	defs := map[*Buffer]*Kernel{}
	prev := x
	for range depth {
		b := NewBuffer("t", ir.Float32, 1000)
		// t = tanh(prev) + prev·0.5, each read a Load of its own
		defs[b] = &Kernel{Out: b, Space: b.Dims, Value: Add(Tanh(Load(prev, Var(0))), Mul(Load(prev, Var(0)), Const(ir.Float32, 0.5)))}
		prev = b
	}
	e := Inline(Load(prev, Var(0)), defs)
	nodes := map[*Expr]bool{}
	var walk func(e *Expr)
	walk = func(e *Expr) {
		if nodes[e] {
			return
		}
		nodes[e] = true
		for _, a := range e.Args {
			walk(a)
		}
	}
	walk(e)
	assert.LessOrEqual(t, len(nodes), 5*depth+3, "distinct nodes for %d steps", depth)
	// The top Add's operands read one inlined value.
	assert.Same(t, e.Args[0].Args[0], e.Args[1].Args[0])
	// Loads of x remain, one node.
	loads := 0
	for n := range nodes {
		if n.Op == OpLoad {
			assert.Same(t, x, n.Buf)
			loads++
		}
	}
	assert.Equal(t, 1, loads)
}
