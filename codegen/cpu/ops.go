package cpu

import (
	"github.com/kiln-ml/kiln/ir"
)

// opInfo is one row of what the CPU backend supports: the element types of
// the op's primary input, an optional check of attributes and constant
// inputs, the scratch memory a node needs, and its lowering to steps.
type opInfo struct {
	types   []ir.DType
	view    bool // the output may alias input 0 (same bytes, new shape)
	check   func(g *gen, n *ir.Node) error
	scratch func(g *gen, n *ir.Node) int64
	lower   func(g *gen, n *ir.Node) error
}

var (
	floatOnly = []ir.DType{ir.Float32}
	anyFixed  = []ir.DType{ir.Float32, ir.Int64, ir.Int32, ir.Uint8, ir.Int8, ir.Bool, ir.Float16, ir.Uint16, ir.Int16, ir.Uint32, ir.Uint64, ir.Float64}
	numeric   = []ir.DType{ir.Float32, ir.Int64, ir.Int32}
)

// opTable lists every op the backend lowers, by family (ops_*.go).
var opTable = map[string]*opInfo{}

func register(rows map[string]*opInfo) {
	for k, v := range rows {
		opTable[k] = v
	}
}

// parallelWorth reports whether elementwise work of n elements is worth
// splitting across threads.
func parallelWorth(n int64) bool { return n >= 1<<15 }
