package cuda

import (
	"fmt"
	"strings"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/codegen/llvm"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/passes"
	"github.com/kiln-ml/kiln/runtime/cudacode"
	ll "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// space says where a buffer lives.
type space int

const (
	inWeights space = iota
	inArena
	inIO // cuda-sim only: the io array's slot (on the GPU, io is in the arena)
)

type place struct {
	space space
	off   int64
	slot  int
}

// gen holds one compilation.
type gen struct {
	opts   Options
	model  *ir.Model
	opsets ops.Opsets
	known  map[*ir.Value]*ir.Tensor

	mod   *ll.Module
	decls map[string]*ll.Func

	weights []byte
	wOff    map[*ir.Tensor]int64
	places  map[*ir.Value]place
	skip    map[*ir.Node]bool
	alias   map[*ir.Value]*ir.Value
	ctxs    map[*ir.Node]*kernel.Ctx
	scratch map[*ir.Node]int64

	bufs    map[*ir.Value]*kernel.Buffer
	bufVals []*ir.Value

	arenaBytes, ioBytes, tensorBytes int64
	inputs, outputs                  []IO
	launches                         []cudacode.Launch
	// drivers are cuda-sim's per-kernel functions, in launch order.
	drivers []*ll.Func
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

func alignUp(n int64) int64 { return (n + align - 1) &^ (align - 1) }

func newGen(m *ir.Model, opts Options) (*gen, error) {
	if err := m.Verify(); err != nil {
		return nil, err
	}
	known, err := ops.InferShapesWithin(m, opts.Limits)
	if err != nil {
		return nil, err
	}
	return &gen{opts: opts, model: m, opsets: ops.OpsetsOf(m), known: known, mod: ll.NewModule(), decls: map[string]*ll.Func{},
		wOff: map[*ir.Tensor]int64{}, places: map[*ir.Value]place{}, skip: map[*ir.Node]bool{}, alias: map[*ir.Value]*ir.Value{},
		ctxs: map[*ir.Node]*kernel.Ctx{}, scratch: map[*ir.Node]int64{}, bufs: map[*ir.Value]*kernel.Buffer{}}, nil
}

// constOf is v's value when known at compile time (not a graph input's).
func (g *gen) constOf(v *ir.Value) *ir.Tensor {
	if v == nil {
		return nil
	}
	for _, in := range g.model.Graph.Inputs {
		if in == v {
			return nil
		}
	}
	if v.Const != nil {
		return v.Const
	}
	return g.known[v]
}

func (g *gen) addWeights(t *ir.Tensor) int64 {
	if off, ok := g.wOff[t]; ok {
		return off
	}
	off := alignUp(int64(len(g.weights)))
	g.weights = append(g.weights, make([]byte, off-int64(len(g.weights)))...)
	g.weights = append(g.weights, t.Raw...)
	g.wOff[t] = off
	return off
}

// placeOf is where v's data lives.
func (g *gen) placeOf(v *ir.Value) place {
	for g.alias[v] != nil {
		v = g.alias[v]
	}
	if p, ok := g.places[v]; ok {
		return p
	}
	if t := g.constOf(v); t != nil {
		p := place{space: inWeights, off: g.addWeights(t)}
		g.places[v] = p
		return p
	}
	panic(fmt.Sprintf("codegen/cuda: value %q has no place", v.Name))
}

// buffer is v's kernel-layer buffer.
func (g *gen) buffer(v *ir.Value) *kernel.Buffer {
	if v == nil {
		return nil
	}
	if b, ok := g.bufs[v]; ok {
		return b
	}
	d, _ := v.Type.Shape.Ints()
	b := &kernel.Buffer{Name: v.Name, DType: v.Type.Elem, Dims: kernel.Ints(d...), ID: len(g.bufVals)}
	g.bufs[v] = b
	g.bufVals = append(g.bufVals, v)
	return b
}

// isView reports whether n only reinterprets its input's bytes.
func isView(n *ir.Node) bool {
	return ops.MovementOf(n) == ops.View && n.Input(0) != nil && n.Output(0) != nil && n.Input(0).Type.Elem == n.Output(0).Type.Elem
}

// check marks the nodes folded at compile time and builds every other
// node's kernels, collecting what the backend cannot compile.
func (g *gen) check(outSet map[*ir.Value]bool) error {
	var list UnsupportedErrors
	seen := map[string]bool{}
	report := func(ue *ops.UnsupportedError) {
		if !seen[ue.Error()] {
			seen[ue.Error()] = true
			list = append(list, ue)
		}
	}
	for _, n := range g.model.Graph.Nodes {
		allKnown := true
		for _, o := range n.Outputs {
			if o != nil && (g.known[o] == nil || outSet[o]) {
				allKnown = false
			}
		}
		if allKnown {
			g.skip[n] = true
			continue
		}
		if n.OpType == "Constant" && n.Domain == "" && !outSet[n.Outputs[0]] {
			if t := n.Attr("value"); t != nil && t.T != nil {
				g.known[n.Outputs[0]] = t.T
				g.skip[n] = true
				continue
			}
		}
		for _, o := range n.Outputs {
			if o != nil && !o.Type.Shape.IsStatic() {
				report(&ops.UnsupportedError{Domain: n.Domain, Op: n.OpType, Opset: g.opsets[n.Domain],
					Reason: "an output's shape is not static (the CUDA backend needs static shapes: cc build --shape)"})
			}
		}
		if isView(n) {
			continue
		}
		if n.Domain == ir.KilnDomain && n.OpType == ops.FusionGroup {
			report(&ops.UnsupportedError{Domain: n.Domain, Op: n.OpType, Opset: g.opsets[n.Domain], Reason: "fusion groups are not lowered for CUDA"})
			continue
		}
		in := make([]*kernel.Buffer, len(n.Inputs))
		consts := make([]*ir.Tensor, len(n.Inputs))
		for i, v := range n.Inputs {
			in[i], consts[i] = g.buffer(v), g.constOf(v)
		}
		out := make([]*kernel.Buffer, len(n.Outputs))
		for i, v := range n.Outputs {
			out[i] = g.buffer(v)
		}
		c, err := kernel.NewCtx(n, g.opsets, in, out, consts)
		if err == nil {
			err = kernel.Build(c)
		}
		if err != nil {
			ue, ok := err.(*ops.UnsupportedError)
			if !ok {
				ue = &ops.UnsupportedError{Domain: n.Domain, Op: n.OpType, Opset: g.opsets[n.Domain], Reason: err.Error()}
			}
			report(ue)
			continue
		}
		g.ctxs[n] = c
	}
	if len(list) > 0 {
		return list
	}
	return nil
}

// tempBytes is a kernel scratch buffer's size.
func tempBytes(b *kernel.Buffer) int64 {
	n, _ := kernel.EvalInt(b.Numel(), nil)
	return alignUp(int64(ir.RawLen(b.DType, n)))
}

// plan places the inputs and outputs (in the io array for cuda-sim, at
// the arena's start on the GPU) and the intermediates (passes.PlanMemory:
// buffers reused once dead; views share their input's bytes).
func (g *gen) plan(outSet map[*ir.Value]bool) error {
	gr := g.model.Graph
	slot := 0
	var ioOff int64
	addIO := func(v *ir.Value, output bool) {
		d, _ := v.Type.Shape.Ints()
		bytes := int64(ir.RawLen(v.Type.Elem, ir.Product(d)))
		io := IO{Name: v.Name, DType: v.Type.Elem, Dims: d, Index: slot, Bytes: bytes}
		if g.opts.Sim {
			g.places[v] = place{space: inIO, slot: slot}
		} else {
			io.Offset = ioOff
			g.places[v] = place{space: inArena, off: ioOff}
			ioOff += alignUp(bytes)
		}
		if output {
			g.outputs = append(g.outputs, io)
		} else {
			g.inputs = append(g.inputs, io)
		}
		slot++
	}
	for _, v := range gr.Inputs {
		if !v.Type.Shape.IsStatic() {
			return fmt.Errorf("codegen/cuda: input %q has shape %s: the CUDA backend needs static shapes (cc build --shape)", v.Name, v.Type)
		}
		addIO(v, false)
	}
	seen := map[*ir.Value]bool{}
	for _, v := range gr.Outputs {
		if seen[v] || g.isInput(v) {
			return fmt.Errorf("codegen/cuda: output %q is a graph input or repeated; not supported", v.Name)
		}
		seen[v] = true
		addIO(v, true)
	}
	g.ioBytes = ioOff
	var nodes []*ir.Node
	for _, n := range gr.Nodes {
		if !g.skip[n] {
			nodes = append(nodes, n)
		}
	}
	p, err := passes.PlanMemory(nodes, passes.MemoryHooks{
		Limits:  g.opts.Limits,
		InArena: func(v *ir.Value) bool { return !outSet[v] },
		View:    isView,
		Scratch: func(n *ir.Node) int64 {
			var s int64
			if c := g.ctxs[n]; c != nil {
				for _, t := range c.Temps {
					s += tempBytes(t)
				}
			}
			return s
		},
	})
	if err != nil {
		return err
	}
	for v, in := range p.Aliases {
		g.alias[v] = in
	}
	for _, b := range p.Buffers {
		if b.Value != nil {
			g.places[b.Value] = place{space: inArena, off: g.ioBytes + b.Offset}
		} else {
			g.scratch[b.Node] = g.ioBytes + b.Offset
		}
	}
	g.arenaBytes = g.ioBytes + p.ArenaBytes
	g.tensorBytes = g.ioBytes + p.TensorBytes
	return nil
}

func (g *gen) isInput(v *ir.Value) bool {
	for _, in := range g.model.Graph.Inputs {
		if in == v {
			return true
		}
	}
	return false
}

// lower emits every node's kernels in order.
func (g *gen) lower(outSet map[*ir.Value]bool) error {
	for _, n := range g.model.Graph.Nodes {
		if g.skip[n] {
			continue
		}
		if isView(n) {
			if g.alias[n.Outputs[0]] != nil {
				continue // shares its input's bytes
			}
			if err := g.emitCopy(n); err != nil {
				return err
			}
			continue
		}
		if tiled := g.tiledFor(n); tiled != nil {
			tiled()
			continue
		}
		c := g.ctxs[n]
		temps := map[*kernel.Buffer]int64{}
		off := g.scratch[n]
		for _, t := range c.Temps {
			temps[t] = off
			off += tempBytes(t)
		}
		for _, k := range c.Kernels {
			if err := g.emitKernel(k, temps); err != nil {
				return fmt.Errorf("codegen/cuda: %s: %w", n, err)
			}
		}
	}
	// Graph outputs known at compile time are copied from the weights.
	for _, v := range g.model.Graph.Outputs {
		if t := g.constOf(v); t != nil && (v.Producer == nil || g.skip[v.Producer]) {
			src := &kernel.Buffer{Name: v.Name + "_const", DType: v.Type.Elem, Dims: g.buffer(v).Dims, ID: -1, Data: t}
			dst := g.buffer(v)
			k := &kernel.Kernel{Name: "const_out", Out: dst, Space: dst.Dims, Value: kernel.Load(src, kernel.Vars(len(dst.Dims))...)}
			if err := g.emitKernel(k, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// emitCopy writes a view's output where it cannot share its input's
// bytes (a graph output): a flat copy, the layouts being the same.
func (g *gen) emitCopy(n *ir.Node) error {
	in, out := n.Inputs[0], n.Outputs[0]
	num := kernel.Ints(ir.Product(dimsOf(out)))
	src := &kernel.Buffer{Name: in.Name, DType: in.Type.Elem, Dims: num, ID: g.buffer(in).ID}
	dst := &kernel.Buffer{Name: out.Name, DType: out.Type.Elem, Dims: num, ID: g.buffer(out).ID}
	k := &kernel.Kernel{Name: n.OpType, Out: dst, Space: num, Value: kernel.Load(src, kernel.Var(0))}
	return g.emitKernel(k, nil)
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
func (g *gen) emitKernel(k *kernel.Kernel, temps map[*kernel.Buffer]int64) error {
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
	name := fmt.Sprintf("k%03d_%s", len(g.launches), sanitize(k.Name))
	body := g.mod.NewFunc(name+"_body", types.Void, ll.NewParam("tid", i64), ll.NewParam("nth", i64),
		ll.NewParam("w", i8p), ll.NewParam("a", i8p), ll.NewParam("io", i8pp))
	body.Linkage = enum.LinkageInternal
	body.FuncAttrs = append(body.FuncAttrs, enum.FuncAttrAlwaysInline)
	f := llvm.NewFn(g.mod, body, body.Params[0], body.Params[1], host{g: g, w: body.Params[2], a: body.Params[3], io: body.Params[4], temps: temps, ptrs: map[string]value.Value{}}, g.decls)
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
	temps    map[*kernel.Buffer]int64
	ptrs     map[string]value.Value // by place and type: one per body
}

func (h host) Ptr(f *llvm.Fn, b *kernel.Buffer) value.Value {
	mt := types.NewPointer(llvm.MemType(b.DType))
	var p place
	switch {
	case b.Data != nil:
		p = place{space: inWeights, off: h.g.addWeights(b.Data)}
	case b.ID < 0:
		off, ok := h.temps[b]
		if !ok {
			panic(fmt.Sprintf("codegen/cuda: scratch %s has no place", b.Name))
		}
		p = place{space: inArena, off: off}
	default:
		p = h.g.placeOf(h.g.bufVals[b.ID])
	}
	key := fmt.Sprintf("%d/%d/%d/%s", p.space, p.off, p.slot, mt)
	if v, ok := h.ptrs[key]; ok {
		return v
	}
	base, slots := h.a, value.Value(nil)
	switch p.space {
	case inWeights:
		base = h.w
	case inArena:
	default:
		slots = h.io
	}
	cast := llvm.EntryPtr(f.F, base, slots, int64(p.slot), p.off, nil, 0, mt)
	h.ptrs[key] = cast
	return cast
}

func (h host) Sym(*llvm.Fn, string) value.Value {
	panic("codegen/cuda: a dynamic dim in a static build")
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() > 40 {
		return b.String()[:40]
	}
	return b.String()
}
