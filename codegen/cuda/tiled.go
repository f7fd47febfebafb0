package cuda

import (
	"fmt"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/codegen/llvm"
	"github.com/kiln-ml/kiln/codegen/lower"
	"github.com/kiln-ml/kiln/cudacode"
	ll "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// Tiled kernels: the threads of a block cooperate through shared memory.
// Such a kernel is written once as a program of uniform control flow (the
// same for every thread of a block) around phases; every thread runs a
// phase before any thread starts the next. On the GPU a phase is the
// thread's own code followed by a barrier (bar.sync); in cuda-sim it is a
// loop over the block's threads (MCUDA's "barriers as phase boundaries"),
// the values a thread keeps across barriers in per-thread slots (locals)
// and the shared memory one buffer per block.

type sharedBuf struct{ n int64 } // float32s per block
type localVar struct{ n int64 }  // float32s per thread
type tiledKernel struct {
	name        string
	grid, block int64
	shared      []*sharedBuf
	locals      []*localVar
	program     func(p *prog)
}

// prog emits a tiled kernel's uniform program into its function (the
// embedded builder's F, at B).
type prog struct {
	*llvm.Fn
	g        *gen
	k        *tiledKernel
	bid      value.Value // the block's index
	w, a, io value.Value
	shared   map[*sharedBuf]value.Value
	locals   map[*localVar]value.Value
	ptrs     host
}

// thread is one thread's view inside a phase.
type thread struct {
	p   *prog
	tid value.Value // index in the block
}

var f32 = types.Float

// emitTiled emits k for the GPU (one entry per kernel) or cuda-sim (loops
// over blocks, and over threads in each phase).
func (g *gen) emitTiled(k *tiledKernel) {
	name := fmt.Sprintf("k%03d_%s", len(g.launches), lower.SymbolName(k.name))
	var f *ll.Func
	if g.opts.Sim {
		f = g.mod.NewFunc(name, types.Void, ll.NewParam("w", i8p), ll.NewParam("a", i8p), ll.NewParam("io", i8pp))
		f.Linkage = enum.LinkageInternal
	} else {
		f = g.mod.NewFunc(name, types.Void, ll.NewParam("w", i8p), ll.NewParam("a", i8p))
	}
	entry := f.NewBlock("")
	p := &prog{g: g, k: k, w: f.Params[0], a: f.Params[1], shared: map[*sharedBuf]value.Value{}, locals: map[*localVar]value.Value{}}
	if g.opts.Sim {
		p.io = f.Params[2]
	} else {
		p.io = constant.NewNull(i8pp)
	}
	p.ptrs = host{g: g, w: p.w, a: p.a, io: p.io, ptrs: map[string]value.Value{}}
	p.Fn = llvm.NewFn(g.mod, f, nil, nil, p.ptrs, g.decls)
	for i, s := range k.shared {
		arr := types.NewArray(uint64(s.n), f32)
		if g.opts.Sim {
			p.shared[s] = entry.NewBitCast(entry.NewAlloca(arr), types.NewPointer(f32))
			continue
		}
		gl := g.mod.NewGlobalDef(fmt.Sprintf("%s_shared%d", name, i), constant.NewUndef(arr))
		gl.AddrSpace = 3
		gl.Typ = types.NewPointer(arr)
		gl.Typ.AddrSpace = 3
		gl.Linkage = enum.LinkageInternal
		gl.Align = 16
		generic := entry.NewAddrSpaceCast(gl, types.NewPointer(arr))
		p.shared[s] = entry.NewBitCast(generic, types.NewPointer(f32))
	}
	for _, l := range k.locals {
		n := l.n
		if g.opts.Sim {
			n *= k.block
		}
		p.locals[l] = entry.NewBitCast(entry.NewAlloca(types.NewArray(uint64(n), f32)), types.NewPointer(f32))
	}
	if g.opts.Sim {
		p.Loop(c64(0), c64(k.grid), func(b value.Value) {
			p.bid = b
			k.program(p)
		})
		g.drivers = append(g.drivers, f)
	} else {
		p.bid = p.sreg("ctaid.x")
		k.program(p)
	}
	p.B.NewRet(nil)
	g.launches = append(g.launches, launchOf(name, k))
}

func launchOf(name string, k *tiledKernel) (l cudacode.Launch) {
	l.Name, l.Grid, l.Block = name, int(k.grid), int(k.block)
	return l
}

func (p *prog) sreg(r string) value.Value {
	return p.B.NewZExt(p.B.NewCall(p.g.declare("llvm.nvvm.read.ptx.sreg."+r, i32)), i64)
}

// phase runs body on every thread of the block, then meets at a barrier.
func (p *prog) phase(body func(t *thread)) {
	if p.g.opts.Sim {
		p.Loop(c64(0), c64(p.k.block), func(tid value.Value) { body(&thread{p: p, tid: tid}) })
		return
	}
	body(&thread{p: p, tid: p.sreg("tid.x")})
	p.B.NewCall(p.g.declare("llvm.nvvm.barrier0", types.Void))
}

// local is a pointer to slot i of the thread's local v.
func (t *thread) local(v *localVar, i int64) value.Value {
	idx := value.Value(c64(i))
	if t.p.g.opts.Sim {
		idx = t.p.B.NewAdd(t.p.B.NewMul(t.tid, c64(v.n)), c64(i))
	}
	return t.p.B.NewGetElementPtr(f32, t.p.locals[v], idx)
}

// shared is a pointer to element idx of the block's buffer s.
func (t *thread) shared(s *sharedBuf, idx value.Value) value.Value {
	return t.p.B.NewGetElementPtr(f32, t.p.shared[s], idx)
}

// ptr is a pointer to buffer b's first element (a kernel-layer buffer
// bound as in the layer's kernels).
func (p *prog) ptr(b *kernel.Buffer) value.Value {
	return p.ptrs.Ptr(p.Fn, b)
}
