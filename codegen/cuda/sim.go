package cuda

import (
	"fmt"
	goruntime "runtime"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/cpuabi"
	ll "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
)

// cuda-sim: the GPU kernels on the CPU. A launch of grid × block threads
// is two loops, blocks outside, threads inside, each iteration calling the
// kernel's body with tid = block·blockDim + thread and nth = grid·blockDim,
// as the GPU entry does from its special registers. The kernels keep no
// state across a barrier (one phase each), so the loops may run the
// threads in any order; the launches run in order, as on one stream.

// simDriver is a launch's loops around body.
func (g *gen) simDriver(name string, body *ll.Func, grid, block int64) *ll.Func {
	f := g.mod.NewFunc(name, types.Void, ll.NewParam("w", i8p), ll.NewParam("a", i8p), ll.NewParam("io", i8pp))
	f.Linkage = enum.LinkageInternal
	entry := f.NewBlock("")
	loop := func(b *ll.Block, n int64, inner func(b *ll.Block, i *ll.InstPhi) *ll.Block) *ll.Block {
		hdr, bodyB, exit := f.NewBlock(""), f.NewBlock(""), f.NewBlock("")
		b.NewBr(hdr)
		i := hdr.NewPhi(ll.NewIncoming(c64(0), b))
		hdr.NewCondBr(hdr.NewICmp(enum.IPredSLT, i, c64(n)), bodyB, exit)
		end := inner(bodyB, i)
		i.Incs = append(i.Incs, ll.NewIncoming(end.NewAdd(i, c64(1)), end))
		end.NewBr(hdr)
		return exit
	}
	exit := loop(entry, grid, func(b *ll.Block, blk *ll.InstPhi) *ll.Block {
		return loop(b, block, func(b *ll.Block, thr *ll.InstPhi) *ll.Block {
			tid := b.NewAdd(b.NewMul(blk, c64(block)), thr)
			b.NewCall(body, tid, c64(grid*block), f.Params[0], f.Params[1], f.Params[2])
			return b
		})
	})
	exit.NewRet(nil)
	return f
}

// emitSimEntry writes the CPU engine's entry point (cpuabi's
// kiln_run, in one part: thread 0 runs every launch in order, the others
// return) and its ABI record.
func (g *gen) emitSimEntry() {
	i64p := types.NewPointer(i64)
	f := g.mod.NewFunc(cpuabi.EntryPoint, i64, ll.NewParam("tid", i64), ll.NewParam("nth", i64),
		ll.NewParam("w", i8p), ll.NewParam("a", i8p), ll.NewParam("io", i8pp), ll.NewParam("bar", i64p),
		ll.NewParam("part", i64))
	b := f.NewBlock("")
	ret, work := f.NewBlock(""), f.NewBlock("")
	b.NewCondBr(b.NewICmp(enum.IPredNE, f.Params[0], c64(0)), ret, work)
	ret.NewRet(c64(0))
	for _, d := range g.drivers {
		work.NewCall(d, f.Params[2], f.Params[3], f.Params[4])
	}
	work.NewRet(c64(0))
	rec := &cpuabi.ABI{Version: cpuabi.ABIVersion, WeightsBytes: g.prog.Weights.Len(), StoredBytes: g.prog.Weights.Len(),
		ArenaBytes: g.prog.ArenaBytes, Steps: len(g.launches), Features: SimFeatures()}
	for _, io := range append(append([]IO{}, g.inputs...), g.outputs...) {
		rec.Slots = append(rec.Slots, cpuabi.Slot{Output: io.Index >= len(g.inputs), DType: io.DType.String(), Dims: io.Dims, Bytes: io.Bytes})
	}
	data, err := rec.Marshal()
	if err != nil {
		panic(fmt.Sprintf("codegen/cuda: encoding the ABI record: %v", err)) // plain structs always encode
	}
	gl := g.mod.NewGlobalDef(cpuabi.ABISymbol, constant.NewCharArray(data))
	gl.Immutable = true
}

// SimTriple is the triple cuda-sim engines hold code for: this machine's.
func SimTriple() string {
	if goruntime.GOARCH == "arm64" {
		return "aarch64-unknown-linux-gnu"
	}
	return "x86_64-unknown-linux-gnu"
}

// simCPU is the CPU the sim compiles for, and the features it records:
// kiln's x86 baseline (x86-64-v3: FMA and F16C are instructions, not
// libm calls) with exactly its features, every ARMv8-A on arm64.
func simCPU() (string, []string) {
	if goruntime.GOARCH == "arm64" {
		return "generic", []string{"asimd"}
	}
	c, _ := cpuabi.LookupX86CPU("x86-64-v3")
	return c.Name, c.Features
}

// SimFeatures are the CPU features a cuda-sim engine records.
func SimFeatures() []string {
	_, f := simCPU()
	return f
}

// simToolchain compiles the module for this machine into a self-contained
// shared object, with the CPU engines' toolchain: llc may use the recorded
// features and no others.
func simToolchain(llc, llvmIR string) ([]byte, error) {
	mcpu, feats := simCPU()
	return cpu.SharedObject(llc, SimTriple(), mcpu, feats, llvmIR)
}
