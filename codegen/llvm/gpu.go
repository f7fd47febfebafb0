package llvm

import (
	ll "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/kiln-ml/kiln/codegen/kernel"
)

// The GPU schedule: every point of a kernel's space (a reduction's output
// points; a scan's or a selection's rows along its axis) is one thread's
// work, in scalar code, and the grid strides over them: thread tid of nth
// takes rows tid, tid+nth, tid+2·nth, ... so that a warp's 32 threads read
// and write 32 adjacent elements (coalesced), and any launch size covers
// the space. A reduction runs whole inside its thread. Serial kernels (the
// scatters) run on one thread. codegen/cuda launches the kernels;
// cuda-sim runs the same code on the CPU, the block and thread indices
// becoming loop counters.

// EmitGPU emits k's loop nest under the GPU schedule at f's current
// block; f.Tid and f.Nth are the global thread index and count.
func EmitGPU(f *Fn, k *kernel.Kernel) {
	f.gpu = true
	defer func() { f.gpu = false }()
	EmitCPU(f, k, kernel.GPUSchedule(k))
}

// strided returns a loop over this thread's rows of n: tid, tid+nth, ...
func (f *Fn) strided(n value.Value) func(body func(i value.Value)) {
	return func(body func(i value.Value)) {
		pre := f.B
		hdr, bodyB, exit := f.Block(), f.Block(), f.Block()
		pre.NewBr(hdr)
		iv := hdr.NewPhi(ll.NewIncoming(f.Tid, pre))
		hdr.NewCondBr(hdr.NewICmp(enum.IPredSLT, iv, n), bodyB, exit)
		f.B = bodyB
		body(iv)
		iv.Incs = append(iv.Incs, ll.NewIncoming(f.B.NewAdd(iv, f.Nth), f.B))
		f.B.NewBr(hdr)
		f.B = exit
	}
}
