package cpu

import (
	"fmt"

	"github.com/kiln-ml/kiln/cpuabi"
	"github.com/kiln-ml/kiln/ir"
	"github.com/llir/llvm/ir/constant"
)

// emitABI exports the code's ABI record (cpuabi.ABISymbol): the weights and
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
	gl := g.mod.NewGlobalDef(cpuabi.ABISymbol, constant.NewCharArray(data))
	gl.Immutable = true
}

// abi is the record of the code built so far.
func (g *gen) abi() *cpuabi.ABI {
	rec := &cpuabi.ABI{
		Version:      cpuabi.ABIVersion,
		WeightsBytes: g.liveBytes(),
		StoredBytes:  g.prog.Weights.Len(),
		Derived:      g.derived,
		ArenaBytes:   g.arenaBytes,
		Steps:        len(g.steps),
		Features:     g.recordedFeatures(),
		Slots:        make([]cpuabi.Slot, len(g.inputs)+len(g.outputs)),
	}
	for _, io := range g.inputs {
		rec.Slots[io.Index] = slotOf(io, false)
	}
	for _, io := range g.outputs {
		rec.Slots[io.Index] = slotOf(io, true)
	}
	rec.Host = g.host
	for _, s := range g.syms {
		rec.Symbols = append(rec.Symbols, cpuabi.SymbolRange{Name: s.Name, Min: s.Min, Max: s.Max, Data: s.Data})
	}
	return rec
}

func slotOf(io IO, output bool) cpuabi.Slot {
	s := cpuabi.Slot{Output: output, DType: io.DType.String(), Dims: append([]int64{}, io.Dims...),
		DimNames: io.DimNames, Host: io.Host, Kinds: io.Kinds}
	if !io.Host {
		s.Bytes = int64(ir.RawLen(io.DType, ir.Product(io.Dims)))
	}
	return s
}
