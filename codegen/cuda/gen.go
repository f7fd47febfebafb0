package cuda

import (
	"fmt"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/codegen/llvm"
	"github.com/kiln-ml/kiln/codegen/lower"
	"github.com/kiln-ml/kiln/cudacode"
	"github.com/kiln-ml/kiln/ir"
	ll "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// gen holds one compilation: the program the shared driver lowered
// (codegen/lower) and the module its steps are written into.
type gen struct {
	opts Options
	prog *lower.Program

	mod   *ll.Module
	decls map[string]*ll.Func

	inputs, outputs []IO
	launches        []cudacode.Launch
	// drivers are cuda-sim's per-kernel functions, in launch order.
	drivers []*ll.Func
	// temp places the current step's scratch buffers.
	temp func(b *kernel.Buffer) (int64, bool)
}

var (
	i8   = types.I8
	i32  = types.I32
	i64  = types.I64
	i8p  = types.NewPointer(types.I8)
	i8pp = types.NewPointer(i8p)
)

func c64(v int64) *constant.Int { return constant.NewInt(i64, v) }

// align is the alignment of every buffer: a GPU's 256-byte transaction
// granule (and a cache line on the CPU).
const align = 256

// target is what the shared driver asks of this backend.
type target struct{ g *gen }

func (target) Name() string         { return "codegen/cuda" }
func (target) Align() int64         { return align }
func (t target) SlotsInArena() bool { return !t.g.opts.Sim }
func (t target) Micro(n *ir.Node, c *kernel.Ctx, in []*kernel.Buffer, out *kernel.Buffer) any {
	if s := tiledFor(n, c, in, out); s != nil {
		return s
	}
	return nil
}

// slots records the program's inputs and outputs as the engine's IO.
func (g *gen) slots() {
	for _, s := range g.prog.Inputs {
		g.inputs = append(g.inputs, g.ioOf(s))
	}
	for _, s := range g.prog.Outputs {
		g.outputs = append(g.outputs, g.ioOf(s))
	}
}

func (g *gen) ioOf(s lower.Slot) IO {
	d, _ := s.Value.Type.Shape.Ints()
	io := IO{Name: s.Value.Name, DType: s.Value.Type.Elem, Dims: d, Index: s.Index, Bytes: s.Bytes}
	if pl := g.prog.Places[s.Value]; pl.Space == lower.InArena {
		io.Offset = pl.Off
	}
	return io
}

// lower emits every step's parts in order.
func (g *gen) lower() error {
	for _, st := range g.prog.Steps {
		g.temp = g.prog.TempOffsets(st)
		if st.Copy {
			if err := g.emitCopy(st.Node); err != nil {
				return err
			}
			continue
		}
		for _, pt := range st.Parts {
			var err error
			if pt.Micro != nil {
				g.emitGemm(pt.Micro)
			} else {
				err = g.emitKernel(pt.Kernel)
			}
			if err != nil {
				return fmt.Errorf("codegen/cuda: %s: %w", st.Node, err)
			}
		}
	}
	return nil
}

// emitCopy writes a view's output where it cannot share its input's
// bytes (a graph output): a flat copy, the layouts being the same (of the
// bytes for a small type's codes).
func (g *gen) emitCopy(n *ir.Node) error {
	in, out := g.prog.Buffer(n.Inputs[0]), g.prog.Buffer(n.Outputs[0])
	num := kernel.Ints(ir.Product(dimsOf(n.Outputs[0])))
	src := &kernel.Buffer{Name: in.Name, DType: in.DType, Dims: num, ID: in.ID}
	dst := &kernel.Buffer{Name: out.Name, DType: out.DType, Dims: num, ID: out.ID}
	if kernel.IsSmallType(in.DType) {
		src, dst = kernel.ByteView(src), kernel.ByteView(dst)
	}
	k := &kernel.Kernel{Name: n.OpType, Out: dst, Space: num, Value: kernel.Load(src, kernel.Var(0))}
	return g.emitKernel(k)
}

func dimsOf(v *ir.Value) []int64 {
	d, _ := v.Type.Shape.Ints()
	return d
}

// blockSize is the threads per block: 256, or fewer (a multiple of a
// warp) for small kernels.
const blockSize = 256

// maxGrid caps the blocks launched; the threads stride over the rest.
const maxGrid = 1 << 16

// emitKernel emits one kernel under the GPU schedule: its body (the loop
// nest for global thread tid of nth), and the GPU entry that computes tid
// from the block and thread indices, or cuda-sim's driver that loops over
// them.
func (g *gen) emitKernel(k *kernel.Kernel) error {
	rows, ok := kernel.GPURows(k)
	if !ok {
		return fmt.Errorf("kernel %s has a dynamic space", k.Name)
	}
	block := int64(blockSize)
	if rows < block {
		block = max(32, (rows+31)/32*32)
	}
	grid := min(max((rows+block-1)/block, 1), maxGrid)
	if k.Serial {
		grid, block = 1, 1
	}
	name := fmt.Sprintf("k%03d_%s", len(g.launches), lower.SymbolName(k.Name))
	body := g.mod.NewFunc(name+"_body", types.Void, ll.NewParam("tid", i64), ll.NewParam("nth", i64),
		ll.NewParam("w", i8p), ll.NewParam("a", i8p), ll.NewParam("io", i8pp))
	body.Linkage = enum.LinkageInternal
	body.FuncAttrs = append(body.FuncAttrs, enum.FuncAttrAlwaysInline)
	f := llvm.NewFn(g.mod, body, body.Params[0], body.Params[1], host{g: g, w: body.Params[2], a: body.Params[3], io: body.Params[4], ptrs: map[string]value.Value{}}, g.decls)
	llvm.EmitGPU(f, k)
	f.B.NewRet(nil)
	if g.opts.Sim {
		g.drivers = append(g.drivers, g.simDriver(name, body, grid, block))
	} else {
		g.gpuEntry(name, body)
	}
	g.launches = append(g.launches, cudacode.Launch{Name: name, Grid: int(grid), Block: int(block)})
	return nil
}

// gpuEntry is the kernel itself: tid = blockIdx.x·blockDim.x +
// threadIdx.x, nth = gridDim.x·blockDim.x.
func (g *gen) gpuEntry(name string, body *ll.Func) {
	f := g.mod.NewFunc(name, types.Void, ll.NewParam("w", i8p), ll.NewParam("a", i8p))
	b := f.NewBlock("")
	sreg := func(r string) value.Value {
		return b.NewZExt(b.NewCall(g.declare("llvm.nvvm.read.ptx.sreg."+r, i32)), i64)
	}
	ntid := sreg("ntid.x")
	tid := b.NewAdd(b.NewMul(sreg("ctaid.x"), ntid), sreg("tid.x"))
	nth := b.NewMul(sreg("nctaid.x"), ntid)
	b.NewCall(body, tid, nth, f.Params[0], f.Params[1], constant.NewNull(i8pp))
	b.NewRet(nil)
}

func (g *gen) declare(name string, ret types.Type, params ...types.Type) *ll.Func {
	return llvm.Declare(g.mod, g.decls, name, ret, params...)
}

// host binds the kernel layer's buffers to a body's memory.
type host struct {
	g        *gen
	w, a, io value.Value
	ptrs     map[string]value.Value // by place and type: one per body
}

func (h host) Ptr(f *llvm.Fn, b *kernel.Buffer) value.Value {
	mt := types.NewPointer(llvm.MemType(b.DType))
	p, err := h.place(b)
	if err != nil {
		panic(fmt.Sprintf("codegen/cuda: %v", err)) // lower.Program.Check placed every buffer
	}
	key := fmt.Sprintf("%d/%d/%d/%s", p.Space, p.Off, p.Slot, mt)
	if v, ok := h.ptrs[key]; ok {
		return v
	}
	base, slots := h.a, value.Value(nil)
	switch p.Space {
	case lower.InWeights:
		base = h.w
	case lower.InArena:
	default:
		slots = h.io
	}
	cast := llvm.EntryPtr(f.F, base, slots, int64(p.Slot), p.Off, nil, 0, mt)
	h.ptrs[key] = cast
	return cast
}

// place is where buffer b lives: a table in the weights, a scratch buffer
// in the step's scratch, a value where the program put it.
func (h host) place(b *kernel.Buffer) (lower.Place, error) {
	switch {
	case b.Data != nil:
		return lower.Place{Space: lower.InWeights, Off: h.g.prog.Weights.Add(b.Data)}, nil
	}
	if off, ok := h.g.temp(b); ok {
		return lower.Place{Space: lower.InArena, Off: off}, nil
	}
	if b.ID < 0 {
		return lower.Place{}, fmt.Errorf("scratch %s has no place", b.Name)
	}
	return h.g.prog.PlaceOf(h.g.prog.ValueOf(b))
}

func (h host) Sym(*llvm.Fn, string) value.Value {
	panic("codegen/cuda: a dynamic dim in a static build")
}
