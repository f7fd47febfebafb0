package cpu

import (
	"fmt"

	"github.com/kiln-ml/kiln/ir"
	rcpu "github.com/kiln-ml/kiln/runtime/cpu"
	"github.com/llir/llvm/ir/constant"
)

// emitABI exports the code's ABI record (rcpu.ABISymbol): the weights and
// arena sizes, the step count and each io slot's dtype, shape and bytes.
// The loader compares the engine's metadata and sections with it before
// running anything, so metadata edited to disagree with the code is
// refused instead of sending the code past the end of a buffer. Called
// last in build, when the weights, arena and steps are final.
func (g *gen) emitABI() {
	rec := g.abi()
	data, err := rec.Marshal()
	if err != nil {
		panic(fmt.Sprintf("codegen/cpu: encoding the ABI record: %v", err)) // plain structs always encode
	}
	gl := g.mod.NewGlobalDef(rcpu.ABISymbol, constant.NewCharArray(data))
	gl.Immutable = true
}

// abi is the record of the code built so far.
func (g *gen) abi() *rcpu.ABI {
	rec := &rcpu.ABI{
		Version:      rcpu.ABIVersion,
		WeightsBytes: g.liveBytes(),
		StoredBytes:  g.prog.Weights.Len(),
		Derived:      g.derived,
		ArenaBytes:   g.arenaBytes,
		Steps:        len(g.steps),
		Features:     g.recordedFeatures(),
		Slots:        make([]rcpu.Slot, len(g.inputs)+len(g.outputs)),
	}
	for _, io := range g.inputs {
		rec.Slots[io.Index] = slotOf(io, false)
	}
	for _, io := range g.outputs {
		rec.Slots[io.Index] = slotOf(io, true)
	}
	for _, s := range g.syms {
		rec.Symbols = append(rec.Symbols, rcpu.SymbolRange{Name: s.Name, Min: s.Min, Max: s.Max})
	}
	return rec
}

func slotOf(io IO, output bool) rcpu.Slot {
	return rcpu.Slot{Output: output, DType: io.DType.String(), Dims: append([]int64{}, io.Dims...),
		Bytes: int64(ir.RawLen(io.DType, ir.Product(io.Dims))), DimNames: io.DimNames}
}
