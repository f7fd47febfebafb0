package kernel

import (
	"math"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// The transformer family: Attention and RotaryEmbedding. Their geometry
// (heads, the past's length, the scale, the bias rules) is ir/ops'
// (AttentionSpec, RotarySpec).

// Attention's input and output positions.
const (
	attnQ, attnK, attnV, attnMask, attnPastKey, attnPastValue, attnNonpad = 0, 1, 2, 3, 4, 5, 6
	attnY, attnPresentKey, attnPresentValue, attnQK                       = 0, 1, 2, 3
)

// headView reads a Q, K or V buffer as [B, H, S, D]: 4-D as it is, 3-D
// [B, S, H*D] with heads of size d.
type headView struct {
	b *Buffer
	d int64
}

func (h headView) at(b, head, s, d *Expr) *Expr {
	if h.b.Rank() == 4 {
		return Load(h.b, b, head, s, d)
	}
	return Load(h.b, b, s, Add(Mul(head, C(h.d)), d))
}

// cachedView is K or V after its past: steps j < past read the past
// ([B, H, past, D]), the others the new ones at j - past.
type cachedView struct {
	past  *Buffer // nil: no past
	fresh headView
	steps int64
}

func (c cachedView) at(b, head, j, d *Expr) *Expr {
	if c.past == nil {
		return c.fresh.at(b, head, j, d)
	}
	inPast := Lt(j, C(c.steps))
	t := ComputeType(c.past.DType)
	old := LoadOr(inPast, c.past, Const(t, 0), b, head, j, d)
	fresh := c.fresh.at(b, head, Sub(j, C(c.steps)), d)
	fresh = LoadOr(Not(inPast), fresh.Buf, Const(t, 0), fresh.Args...)
	return Select(inPast, old, fresh)
}

// defAttention is softmax(softcap(scale·Q Kᵀ) + bias)·V in kernels: the
// scores (a reduction over the head, its Post the scale, softcap and
// bias), the softmax's maximum, exponentials and reciprocal sum, and the
// weighted sum of V scaled by that reciprocal. present_key and
// present_value, when asked for, are the concatenated caches (and then
// what the scores read); qk_matmul_output is the scores at the stage
// qk_matmul_output_mode names.
func defAttention(c *Ctx) error {
	var dims [5][]int64
	for i := range dims {
		if b := c.Input(i); b != nil && i != attnMask {
			d, ok := b.Static()
			if !ok {
				return c.Unsupported("an Attention of dynamic dims")
			}
			dims[i] = d
		}
	}
	spec, err := c.AttentionSpec(dims[attnQ], dims[attnK], dims[attnV], dims[attnPastKey])
	if err != nil {
		return c.Unsupported("%v", err)
	}
	if (c.Input(attnPastKey) == nil) != (c.Input(attnPastValue) == nil) {
		return c.Unsupported("past_key and past_value go together")
	}
	t := ComputeType(c.In[attnQ].DType)
	q := headView{c.In[attnQ], spec.Head}
	keys := cachedView{c.Input(attnPastKey), headView{c.In[attnK], spec.Head}, spec.Past}
	values := cachedView{c.Input(attnPastValue), headView{c.In[attnV], spec.VHead}, spec.Past}
	total := C(spec.Total())
	keys = presentCache(c, attnPresentKey, keys, spec, spec.Head)
	values = presentCache(c, attnPresentValue, values, spec, spec.VHead)

	// Scores [B, Hq, Sq, T] at (b, h, i, j), reduced over the head.
	b, h, i, j := Var(0), Var(1), Var(2), Var(3)
	kvh := Div(h, C(spec.QHeads/spec.KVHeads))
	space := []*Expr{C(spec.Batch), C(spec.QHeads), C(spec.QSeq), total}
	dot := Mul(CastTo(q.at(b, h, i, RVar(0)), t), CastTo(keys.at(b, kvh, j, RVar(0)), t))
	scaled := Mul(Const(t, spec.Scale), Acc(t))
	capped := scaled
	if spec.Softcap > 0 {
		capped = Mul(Const(t, spec.Softcap), Tanh(Div(scaled, Const(t, spec.Softcap))))
	}
	bias, err := attentionBias(c, spec, t)
	if err != nil {
		return err
	}
	reduce := func(out *Buffer, post *Expr) *Kernel {
		return &Kernel{Out: out, Space: space, Value: dot,
			Reduce: &Reduce{Op: SumOp, Extents: []*Expr{C(spec.Head)}, Post: StoreAs(post, out.DType)}}
	}
	scores := c.Temp(t, space...)
	c.Emit(reduce(scores, Add(capped, bias)))
	qk := c.Output(attnQK)
	if qk != nil && spec.Mode <= 1 {
		c.Emit(reduce(qk, []*Expr{scaled, capped}[spec.Mode]))
	}
	if qk != nil && spec.Mode == 2 {
		c.Emit(copyOf(qk, StoreAs(Load(scores, Vars(4)...), qk.DType)))
	}

	// The softmax along j, normalized in Y's Post.
	l := &layout{in: scores, dims: space, red: []bool{false, false, false, true}}
	rows := l.kept()
	m := c.Temp(t, rows...)
	c.Emit(l.reduce(m, MaxOp, l.x(), nil))
	e := c.Temp(t, space...)
	c.Emit(&Kernel{Out: e, Space: space, Value: Exp(Sub(Load(scores, Vars(4)...), Load(m, b, h, i)))})
	r := c.Temp(t, rows...)
	c.Emit(&Kernel{Out: r, Space: rows, Value: Load(e, b, h, i, RVar(0)),
		Reduce: &Reduce{Op: SumOp, Extents: []*Expr{total}, Post: Div(Const(t, 1), Acc(t))}})
	if qk != nil && spec.Mode == 3 {
		c.Emit(copyOf(qk, StoreAs(Mul(Load(e, Vars(4)...), Load(r, b, h, i)), qk.DType)))
	}

	// Y [B, Hq, Sq, Dv], or 3-D [B, Sq, Hq·Dv].
	y := c.Out[attnY]
	yb, yh, yi, yd := Var(0), Var(1), Var(2), Var(3)
	if spec.Rank == 3 {
		yb, yi, yh, yd = Var(0), Var(1), Div(Var(2), C(spec.VHead)), Rem(Var(2), C(spec.VHead))
	}
	ykv := Div(yh, C(spec.QHeads/spec.KVHeads))
	weighted := Mul(Load(e, yb, yh, yi, RVar(0)), CastTo(values.at(yb, ykv, RVar(0), yd), t))
	c.Emit(&Kernel{Out: y, Space: y.Dims, Value: weighted,
		Reduce: &Reduce{Op: SumOp, Extents: []*Expr{total}, Post: StoreAs(Mul(Acc(t), Load(r, yb, yh, yi)), y.DType)}})
	return nil
}

// presentCache writes output o (present_key or present_value, [B, Hkv, T,
// D]) when the node asks for it, and returns the view later kernels read
// the cache through: the output itself once written.
func presentCache(c *Ctx, o int, v cachedView, spec *ops.Attention, d int64) cachedView {
	out := c.Output(o)
	if out == nil {
		return v
	}
	c.Emit(copyOf(out, StoreAs(CastTo(v.at(Var(0), Var(1), Var(2), Var(3)), ComputeType(out.DType)), out.DType)))
	return cachedView{fresh: headView{out, d}}
}

// attentionBias is the bias score (b, h, i, j) = Vars(4) gets, as
// AttentionSpec describes: attn_mask's value, or -Inf where the causal or
// the nonpad_kv_seqlen rule masks the key.
func attentionBias(c *Ctx, spec *ops.Attention, t ir.DType) (*Expr, error) {
	b, i, j := Var(0), Var(2), Var(3)
	negInf := Const(t, math.Inf(-1))
	bias := Const(t, 0)
	if mask := c.Input(attnMask); mask != nil {
		if mask.Rank() < 2 || mask.Rank() > 4 {
			return nil, c.Unsupported("attn_mask of rank %d, want 2 to 4", mask.Rank())
		}
		md, ok := mask.Static()
		if !ok {
			return nil, c.Unsupported("an attn_mask of dynamic dims")
		}
		space := []int64{spec.Batch, spec.QHeads, spec.QSeq}
		idx := make([]*Expr, mask.Rank())
		off := 4 - mask.Rank()
		for a := range idx[:len(idx)-1] {
			switch n := md[a]; {
			case n == 1:
				idx[a] = C(0)
			case n == space[off+a]:
				idx[a] = Var(off + a)
			default:
				return nil, c.Unsupported("attn_mask of shape %v does not broadcast to %v", md, space)
			}
		}
		idx[len(idx)-1] = j
		keys := md[len(md)-1]
		if keys > spec.Total() {
			return nil, c.Unsupported("attn_mask of shape %v is longer than the %d keys", md, spec.Total())
		}
		inMask := Lt(j, C(keys))
		if mask.DType == ir.Bool {
			bias = Select(LoadOr(inMask, mask, Bool(false), idx...), Const(t, 0), negInf)
		} else {
			bias = CastTo(LoadOr(inMask, mask, Const(ComputeType(mask.DType), 0), idx...), t)
			bias = Select(inMask, bias, negInf)
		}
	}
	masked := Bool(false)
	offset := C(spec.Past)
	if n := c.Input(attnNonpad); n != nil {
		if n.DType != ir.Int64 || n.Rank() != 1 || !sameSize(n.Dims[0], C(spec.Batch)) {
			return nil, c.Unsupported("nonpad_kv_seqlen of %s%v, want int64[%d]", n.DType, n.Dims, spec.Batch)
		}
		length := Load(n, b)
		offset = Sub(length, C(spec.QSeq))
		masked = Ge(j, length)
	}
	if spec.Causal {
		masked = Or(masked, Gt(j, Add(i, offset)))
	}
	return Select(masked, negInf, bias), nil
}

// defRotary rotates each pair of a head's first Rot features by its
// token's angle: the first of a pair becomes cos·x - sin·x', the second
// cos·x + sin·x' (x' its partner); the other features are copied.
func defRotary(c *Ctx) error {
	x, out := c.In[0], c.Out[0]
	xd, ok := x.Static()
	if !ok {
		return c.Unsupported("a RotaryEmbedding of dynamic dims")
	}
	spec, err := c.RotarySpec(xd)
	if err != nil {
		return c.Unsupported("%v", err)
	}
	t := ComputeType(x.DType)
	half := spec.Rot / 2
	// The point's batch, step and feature within its head, and how to
	// read another feature of the same head.
	b, s, d := Var(0), Var(2), Var(3)
	feature := func(f *Expr) *Expr { return Load(x, Var(0), Var(1), Var(2), f) }
	if x.Rank() == 3 {
		head := Div(Var(2), C(spec.Head))
		s, d = Var(1), Rem(Var(2), C(spec.Head))
		feature = func(f *Expr) *Expr { return Load(x, Var(0), Var(1), Add(Mul(head, C(spec.Head)), f)) }
	}
	rotated := Lt(d, C(spec.Rot))
	first, i, partner := Lt(d, C(half)), Rem(d, C(half)), Select(Lt(d, C(half)), Add(d, C(half)), Sub(d, C(half)))
	if spec.Interleaved {
		first, i = Eq(Rem(d, C(2)), C(0)), Div(d, C(2))
		partner = Select(first, Add(d, C(1)), Sub(d, C(1)))
	}
	i, partner = Min(i, C(half-1)), Select(rotated, partner, d) // in range where not rotated
	angle := func(cache *Buffer) (*Expr, error) {
		if pos := c.Input(3); pos != nil {
			if cache.Rank() != 2 || pos.Rank() != 2 {
				return nil, c.Unsupported("caches of rank %d and position_ids of rank %d, want 2 and 2", cache.Rank(), pos.Rank())
			}
			return CastTo(Load(cache, Index(Load(pos, b, s), cache.Dims[0]), i), t), nil
		}
		if cache.Rank() != 3 {
			return nil, c.Unsupported("caches of rank %d without position_ids, want 3", cache.Rank())
		}
		return CastTo(Load(cache, b, s, i), t), nil
	}
	cos, err := angle(c.In[1])
	if err != nil {
		return err
	}
	sin, err := angle(c.In[2])
	if err != nil {
		return err
	}
	v, other := CastTo(feature(d), t), CastTo(feature(partner), t)
	turn := Select(first, Neg(Mul(sin, other)), Mul(sin, other))
	y := Select(rotated, Add(Mul(cos, v), turn), v)
	c.Emit(copyOf(out, StoreAs(y, out.DType)))
	return nil
}

func init() {
	define(map[string]*OpDef{
		"Attention":       {Types: registryTypes("Attention"), Build: defAttention},
		"RotaryEmbedding": {Types: registryTypes("RotaryEmbedding"), Build: defRotary},
	})
}
