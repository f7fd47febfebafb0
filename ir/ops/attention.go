package ops

import (
	"fmt"
	"math"

	"github.com/kiln-ml/kiln/ir"
)

// The transformer family: Attention (opsets 23 and 24) and
// RotaryEmbedding (23). The kernels compute in float64 and round once.

// Attention is scaled dot-product attention over heads:
//
//	Y = softmax(softcap(scale * Q K^T) + bias) V
//
// Q is [B, Hq, Sq, D] (or 3-D [B, Sq, Hq*D] with q_num_heads), K is
// [B, Hkv, Skv, D] and V [B, Hkv, Skv, Dv] (3-D with kv_num_heads). With
// Hq a multiple of Hkv (grouped-query), query head h reads key/value head
// h / (Hq/Hkv). past_key and past_value are prepended to K and V along the
// sequence, giving present_key and present_value of T = P + Skv steps.
// bias is attn_mask (added, or for a boolean mask 0 where true and -Inf
// where false; a mask shorter than T is padded with -Inf), plus with
// is_causal -Inf where key j is after query i + offset (offset P with a
// past, from opset 24 nonpad_kv_seqlen[b] - Sq without one, else 0), plus
// from opset 24 -Inf for keys at or past nonpad_kv_seqlen[b].
// qk_matmul_output is, by qk_matmul_output_mode, scale * Q K^T (0), after
// softcap (1), after the bias (2) or after the softmax (3): the order in
// which ONNX's reference applies them.

var attentionAttrs = []AttrDef{
	defInt("is_causal", 0),
	{Name: "kv_num_heads", Kind: ir.AttrInt},
	{Name: "q_num_heads", Kind: ir.AttrInt},
	defInt("qk_matmul_output_mode", 0),
	{Name: "scale", Kind: ir.AttrFloat},
	defFloat("softcap", 0),
	{Name: "softmax_precision", Kind: ir.AttrInt},
}

func attentionRow(since int64, maxInputs int) *Schema {
	return &Schema{Name: "Attention", Since: since, MinInputs: 3, MaxInputs: maxInputs, MinOutputs: 1, MaxOutputs: 4,
		Attrs: attentionAttrs, Types: floatTypes, Infer: inferAttention, Run: runAttention}
}

var rotaryRows = []*Schema{{
	Name: "RotaryEmbedding", Since: 23, MinInputs: 3, MaxInputs: 4, MinOutputs: 1, MaxOutputs: 1,
	Attrs: []AttrDef{defInt("interleaved", 0), defInt("num_heads", 0), defInt("rotary_embedding_dim", 0)},
	Types: []ir.DType{ir.Float32, ir.Float16, ir.BFloat16}, Infer: inferRotary, Run: runRotary,
}}

func init() {
	// Attention-24 added nonpad_kv_seqlen.
	register(append([]*Schema{attentionRow(23, 6), attentionRow(24, 7)}, rotaryRows...))
}

// Attention input and output positions.
const (
	attnQ, attnK, attnV, attnMask, attnPastKey, attnPastValue, attnNonpad = 0, 1, 2, 3, 4, 5, 6
	attnY, attnPresentKey, attnPresentValue, attnQK                       = 0, 1, 2, 3
)

// attnHeads reads q_num_heads and kv_num_heads, which 3-D inputs need.
func attnHeads(a attrs) (q, kv int64, err error) {
	q, kv = a.Int("q_num_heads"), a.Int("kv_num_heads")
	if !a.Has("q_num_heads") || !a.Has("kv_num_heads") || q <= 0 || kv <= 0 {
		return 0, 0, fmt.Errorf("3-D Q, K and V need positive q_num_heads and kv_num_heads")
	}
	return q, kv, nil
}

// attnAttrsCheck refuses attribute values no input could make valid.
func attnAttrsCheck(a attrs) error {
	if m := a.Int("qk_matmul_output_mode"); m < 0 || m > 3 {
		return fmt.Errorf("qk_matmul_output_mode must be 0 to 3, is %d", m)
	}
	if a.Has("softmax_precision") {
		if d := ir.DType(a.Int("softmax_precision")); !d.IsFloat() {
			return fmt.Errorf("softmax_precision %d is not a floating-point type", a.Int("softmax_precision"))
		}
	}
	if a.Has("scale") && !(a.Float("scale") > 0) {
		return fmt.Errorf("scale must be positive, is %v", a.Float("scale"))
	}
	return nil
}

// attnDims are an Attention's sizes as 4-D: batch, heads, sequence, head
// size of Q, K and V.
type attnDims struct {
	batch, qHeads, kvHeads, qSeq, kvSeq, head, vHead ir.Dim
}

func inferAttention(c *InferContext) error {
	if err := attnAttrsCheck(c.attrs); err != nil {
		return c.Errorf("%v", err)
	}
	q, k, v := c.In(attnQ), c.In(attnK), c.In(attnV)
	elem := q.Elem
	if k.Elem != ir.Undefined && elem != ir.Undefined && k.Elem != elem {
		return c.Errorf("K is %s, Q is %s", k.Elem, elem)
	}
	if c.HasInput(attnPastKey) != c.HasInput(attnPastValue) {
		return c.Errorf("past_key and past_value go together")
	}
	if c.HasInput(attnNonpad) && c.HasInput(attnPastKey) {
		return c.Errorf("nonpad_kv_seqlen cannot be used with past_key and past_value")
	}
	if c.HasInput(attnNonpad) && c.In(attnNonpad).Elem != ir.Undefined && c.In(attnNonpad).Elem != ir.Int64 {
		return c.Errorf("nonpad_kv_seqlen must be int64, is %s", c.In(attnNonpad).Elem)
	}
	if m := c.In(attnMask); c.HasInput(attnMask) && m.Shape.Ranked && (m.Shape.Rank() < 2 || m.Shape.Rank() > 4) {
		return c.Errorf("attn_mask must have rank 2 to 4, has shape %s", m.Shape)
	}
	rank := 0
	for _, t := range []ir.Type{q, k, v} {
		if t.Shape.Ranked {
			if r := t.Shape.Rank(); r != 3 && r != 4 || rank != 0 && r != rank {
				return c.Errorf("Q, K and V must all be 3-D or all 4-D, are %s, %s and %s", q.Shape, k.Shape, v.Shape)
			}
			rank = t.Shape.Rank()
		}
	}
	vElem := v.Elem
	if rank == 0 {
		for i, e := range []ir.DType{elem, elem, vElem, elem} {
			c.Set(i, ir.TensorType(e, ir.Shape{}))
		}
		return nil
	}
	d, err := attnShape(c, rank, q.Shape, k.Shape, v.Shape)
	if err != nil {
		return c.Errorf("%v", err)
	}
	total := d.kvSeq
	if c.HasInput(attnPastKey) {
		pk, pv := dimsOf(c.In(attnPastKey).Shape, 4), dimsOf(c.In(attnPastValue).Shape, 4)
		if len(pk) != 4 || len(pv) != 4 {
			return c.Errorf("past_key and past_value must be 4-D, are %s and %s", c.In(attnPastKey).Shape, c.In(attnPastValue).Shape)
		}
		total = ir.DimAdd(pk[2], d.kvSeq)
	}
	y := ir.ShapeOf(d.batch, d.qHeads, d.qSeq, d.vHead)
	if rank == 3 {
		y = ir.ShapeOf(d.batch, d.qSeq, ir.DimMul(d.qHeads, d.vHead))
	}
	c.Set(attnY, ir.TensorType(elem, y))
	c.Set(attnPresentKey, ir.TensorType(elem, ir.ShapeOf(d.batch, d.kvHeads, total, d.head)))
	c.Set(attnPresentValue, ir.TensorType(vElem, ir.ShapeOf(d.batch, d.kvHeads, total, d.vHead)))
	c.Set(attnQK, ir.TensorType(elem, ir.ShapeOf(d.batch, d.qHeads, d.qSeq, total)))
	return nil
}

// attnShape reads the 4-D sizes from Q, K and V (of the given rank; an
// unranked one contributes nothing), checking those that must agree.
func attnShape(c *InferContext, rank int, q, k, v ir.Shape) (attnDims, error) {
	qd, kd, vd := dimsOf(q, rank), dimsOf(k, rank), dimsOf(v, rank)
	var d attnDims
	if rank == 4 {
		d = attnDims{batch: qd[0], qHeads: qd[1], kvHeads: kd[1], qSeq: qd[2], kvSeq: kd[2], head: qd[3], vHead: vd[3]}
	} else {
		qh, kvh, err := attnHeads(c.attrs)
		if err != nil {
			return d, err
		}
		d = attnDims{batch: qd[0], qHeads: ir.D(qh), kvHeads: ir.D(kvh), qSeq: qd[1], kvSeq: kd[1],
			head: ir.DimExactDiv(qd[2], ir.D(qh)), vHead: ir.DimExactDiv(vd[2], ir.D(kvh))}
		for _, x := range []struct {
			hidden ir.Dim
			heads  int64
		}{{qd[2], qh}, {kd[2], kvh}, {vd[2], kvh}} {
			if x.hidden.IsStatic() && x.hidden.Value%x.heads != 0 {
				return d, fmt.Errorf("hidden size %d does not split into %d heads", x.hidden.Value, x.heads)
			}
		}
	}
	if h, kv := d.qHeads, d.kvHeads; h.IsStatic() && kv.IsStatic() && (kv.Value == 0 || h.Value%kv.Value != 0) {
		return d, fmt.Errorf("%d query heads are not a multiple of %d key/value heads", h.Value, kv.Value)
	}
	if s, vs := kd[rank-2], vd[rank-2]; s.IsStatic() && vs.IsStatic() && s.Value != vs.Value {
		return d, fmt.Errorf("K has %d steps, V %d", s.Value, vs.Value)
	}
	if rank == 4 {
		if kh := kd[3]; kh.IsStatic() && d.head.IsStatic() && kh.Value != d.head.Value {
			return d, fmt.Errorf("Q's head size %d differs from K's %d", d.head.Value, kh.Value)
		}
		if kv, vh := d.kvHeads, vd[1]; kv.IsStatic() && vh.IsStatic() && kv.Value != vh.Value {
			return d, fmt.Errorf("K has %d heads, V %d", kv.Value, vh.Value)
		}
	}
	return d, nil
}

// attnTensor is a Q, K or V (or cache) tensor read as [B, H, S, D]: element
// (b, h, s, d) is data[b*bs + h*hs + s*ss + d].
type attnTensor struct {
	data       []float64
	b, h, s, d int
	bs, hs, ss int
}

func (t *attnTensor) row(b, h, s int) []float64 {
	off := b*t.bs + h*t.hs + s*t.ss
	return t.data[off : off+t.d]
}

// attnView reads x (3-D [B, S, H*D] with heads H, or 4-D) as [B, H, S, D].
func attnView(x *ir.Tensor, heads int64) (*attnTensor, error) {
	v := Float64s(x)
	if len(x.Dims) == 4 {
		b, h, s, d := int(x.Dims[0]), int(x.Dims[1]), int(x.Dims[2]), int(x.Dims[3])
		return &attnTensor{data: v, b: b, h: h, s: s, d: d, bs: h * s * d, hs: s * d, ss: d}, nil
	}
	if heads <= 0 || x.Dims[2]%heads != 0 {
		return nil, fmt.Errorf("hidden size %d does not split into %d heads", x.Dims[2], heads)
	}
	b, s, h, d := int(x.Dims[0]), int(x.Dims[1]), int(heads), int(x.Dims[2]/heads)
	return &attnTensor{data: v, b: b, h: h, s: s, d: d, bs: s * h * d, hs: d, ss: h * d}, nil
}

// concatSeq prepends past ([B, H, P, D]) to t along the sequence; the
// result is contiguous 4-D.
func concatSeq(past *ir.Tensor, t *attnTensor) (*attnTensor, error) {
	p := 0
	var pv []float64
	if past != nil {
		if len(past.Dims) != 4 || int(past.Dims[0]) != t.b || int(past.Dims[1]) != t.h || int(past.Dims[3]) != t.d {
			return nil, fmt.Errorf("past of shape %v does not fit [%d, %d, P, %d]", ir.FormatList(past.Dims), t.b, t.h, t.d)
		}
		p, pv = int(past.Dims[2]), Float64s(past)
	}
	s := p + t.s
	out := &attnTensor{data: make([]float64, t.b*t.h*s*t.d), b: t.b, h: t.h, s: s, d: t.d, bs: t.h * s * t.d, hs: s * t.d, ss: t.d}
	for b := range t.b {
		for h := range t.h {
			for i := range s {
				dst := out.row(b, h, i)
				if i < p {
					copy(dst, pv[((b*t.h+h)*p+i)*t.d:][:t.d])
				} else {
					copy(dst, t.row(b, h, i-p))
				}
			}
		}
	}
	return out, nil
}

// attnBias builds the additive bias [B, Hq, Sq, T] from the mask, is_causal
// and nonpad_kv_seqlen.
func attnBias(c *KernelContext, batch, heads, qSeq, total, past int) ([]float64, error) {
	bias := make([]float64, batch*heads*qSeq*total)
	out := []int64{int64(batch), int64(heads), int64(qSeq), int64(total)}
	if m := c.In(attnMask); m != nil {
		if len(m.Dims) < 2 || len(m.Dims) > 4 {
			return nil, fmt.Errorf("attn_mask must have rank 2 to 4, has shape %v", ir.FormatList(m.Dims))
		}
		if m.DType != ir.Bool && !m.DType.IsFloat() && !m.DType.IsSigned() && !m.DType.IsUnsigned() {
			return nil, fmt.Errorf("attn_mask must be bool or numeric, is %s", m.DType)
		}
		mt := m.Dims[len(m.Dims)-1]
		if mt > int64(total) {
			return nil, fmt.Errorf("attn_mask of shape %v is longer than the %d keys", ir.FormatList(m.Dims), total)
		}
		// Broadcast the mask over [B, Hq, Sq, mt], then pad the keys.
		head := append([]int64{}, out[:3]...)
		if !broadcastsTo(m.Dims[:len(m.Dims)-1], head) {
			return nil, fmt.Errorf("attn_mask of shape %v does not broadcast to %v", ir.FormatList(m.Dims), ir.FormatList(out))
		}
		vals := Float64s(m)
		isBool := m.DType == ir.Bool
		idx := BroadcastIndex(m.Dims, append(head, mt))
		for k := range bias {
			j := k % total
			row := k / total
			if int64(j) >= mt {
				bias[k] = math.Inf(-1)
				continue
			}
			v := vals[idx[row*int(mt)+j]]
			if isBool {
				if v != 0 {
					v = 0
				} else {
					v = math.Inf(-1)
				}
			}
			bias[k] = v
		}
	}
	nonpad, err := attnNonpadLengths(c, batch, total)
	if err != nil {
		return nil, err
	}
	causal := c.Int("is_causal") != 0
	for b := range batch {
		offset := past
		if nonpad != nil {
			offset = int(nonpad[b]) - qSeq
		}
		for h := range heads {
			for i := range qSeq {
				row := bias[((b*heads+h)*qSeq+i)*total:][:total]
				for j := range row {
					if causal && j > i+offset || nonpad != nil && int64(j) >= nonpad[b] {
						row[j] = math.Inf(-1)
					}
				}
			}
		}
	}
	return bias, nil
}

// attnNonpadLengths reads nonpad_kv_seqlen (opset 24), or nil.
func attnNonpadLengths(c *KernelContext, batch, total int) ([]int64, error) {
	t := c.In(attnNonpad)
	if t == nil {
		return nil, nil
	}
	if t.DType != ir.Int64 || t.Len() != int64(batch) {
		return nil, fmt.Errorf("nonpad_kv_seqlen must be %d int64 values, is %s%v", batch, t.DType, ir.FormatList(t.Dims))
	}
	n := Int64s(t)
	for _, v := range n {
		if v < 0 || v > int64(total) {
			return nil, fmt.Errorf("nonpad_kv_seqlen %v is outside [0, %d]", n, total)
		}
	}
	return n, nil
}

func runAttention(c *KernelContext) error {
	q, k, v := c.In(attnQ), c.In(attnK), c.In(attnV)
	if err := checkType(c, q.DType); err != nil {
		return err
	}
	if err := checkType(c, v.DType); err != nil {
		return err
	}
	if k.DType != q.DType {
		return c.Errorf("K is %s, Q is %s", k.DType, q.DType)
	}
	if err := attnAttrsCheck(c.attrs); err != nil {
		return c.Errorf("%v", err)
	}
	rank := len(q.Dims)
	if rank != 3 && rank != 4 || len(k.Dims) != rank || len(v.Dims) != rank {
		return c.Errorf("Q, K and V must all be 3-D or all 4-D, are %v, %v and %v", ir.FormatList(q.Dims), ir.FormatList(k.Dims), ir.FormatList(v.Dims))
	}
	if (c.In(attnPastKey) == nil) != (c.In(attnPastValue) == nil) {
		return c.Errorf("past_key and past_value go together")
	}
	var qHeads, kvHeads int64
	if rank == 3 {
		var err error
		if qHeads, kvHeads, err = attnHeads(c.attrs); err != nil {
			return c.Errorf("%v", err)
		}
	}
	qt, err := attnView(q, qHeads)
	if err != nil {
		return c.Errorf("Q: %v", err)
	}
	kt, err := attnView(k, kvHeads)
	if err != nil {
		return c.Errorf("K: %v", err)
	}
	vt, err := attnView(v, kvHeads)
	if err != nil {
		return c.Errorf("V: %v", err)
	}
	if kt.b != qt.b || vt.b != qt.b || kt.h != vt.h || kt.s != vt.s || kt.d != qt.d {
		return c.Errorf("Q %v, K %v and V %v do not fit together", ir.FormatList(q.Dims), ir.FormatList(k.Dims), ir.FormatList(v.Dims))
	}
	if kt.h == 0 || qt.h%kt.h != 0 {
		return c.Errorf("%d query heads are not a multiple of %d key/value heads", qt.h, kt.h)
	}
	if c.In(attnNonpad) != nil && c.In(attnPastKey) != nil {
		return c.Errorf("nonpad_kv_seqlen cannot be used with past_key and past_value")
	}
	past := 0
	if pk := c.In(attnPastKey); pk != nil && len(pk.Dims) == 4 {
		past = int(pk.Dims[2])
	}
	if kt, err = concatSeq(c.In(attnPastKey), kt); err != nil {
		return c.Errorf("past_key: %v", err)
	}
	if vt, err = concatSeq(c.In(attnPastValue), vt); err != nil {
		return c.Errorf("past_value: %v", err)
	}
	total := kt.s
	bias, err := attnBias(c, qt.b, qt.h, qt.s, total, past)
	if err != nil {
		return c.Errorf("%v", err)
	}
	y, qk := attend(c, qt, kt, vt, bias)
	yDims := []int64{int64(qt.b), int64(qt.h), int64(qt.s), int64(vt.d)}
	if rank == 3 {
		y = headsToHidden(y, qt.b, qt.h, qt.s, vt.d)
		yDims = []int64{int64(qt.b), int64(qt.s), int64(qt.h * vt.d)}
	}
	c.Set(attnY, FromFloat64s(q.DType, yDims, y))
	c.Set(attnPresentKey, FromFloat64s(k.DType, []int64{int64(kt.b), int64(kt.h), int64(total), int64(kt.d)}, kt.data))
	c.Set(attnPresentValue, FromFloat64s(v.DType, []int64{int64(vt.b), int64(vt.h), int64(total), int64(vt.d)}, vt.data))
	c.Set(attnQK, FromFloat64s(q.DType, []int64{int64(qt.b), int64(qt.h), int64(qt.s), int64(total)}, qk))
	return nil
}

// attend computes Y [B, Hq, Sq, Dv] and qk_matmul_output [B, Hq, Sq, T].
func attend(c *KernelContext, q, k, v *attnTensor, bias []float64) (y, qkOut []float64) {
	scale := attnScale(c.attrs, int64(q.d))
	softcap := float64(c.Float("softcap"))
	mode := c.Int("qk_matmul_output_mode")
	group := q.h / k.h
	total := k.s
	y = make([]float64, q.b*q.h*q.s*v.d)
	qkOut = make([]float64, q.b*q.h*q.s*total)
	parallelFor(q.b*q.h, func(bh int) {
		b, h := bh/q.h, bh%q.h
		kvh := h / group
		scores := make([]float64, total)
		for i := range q.s {
			qr := q.row(b, h, i)
			out := qkOut[((b*q.h+h)*q.s+i)*total:][:total]
			bi := bias[((b*q.h+h)*q.s+i)*total:][:total]
			for j := range total {
				s := scale * dot(qr, k.row(b, kvh, j))
				if mode == 0 {
					out[j] = s
				}
				if softcap > 0 {
					s = softcap * math.Tanh(s/softcap)
				}
				if mode == 1 {
					out[j] = s
				}
				s += bi[j]
				if mode == 2 {
					out[j] = s
				}
				scores[j] = s
			}
			softmax(scores)
			if mode == 3 {
				copy(out, scores)
			}
			yr := y[((b*q.h+h)*q.s+i)*v.d:][:v.d]
			for j, p := range scores {
				for d, e := range v.row(b, kvh, j) {
					yr[d] += p * e
				}
			}
		}
	})
	return y, qkOut
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// headsToHidden turns [B, H, S, D] into [B, S, H*D].
func headsToHidden(x []float64, batch, heads, seq, d int) []float64 {
	out := make([]float64, len(x))
	for b := range batch {
		for h := range heads {
			for s := range seq {
				copy(out[((b*seq+s)*heads+h)*d:][:d], x[((b*heads+h)*seq+s)*d:][:d])
			}
		}
	}
	return out
}

// RotaryEmbedding rotates pairs of each head's first rotary_embedding_dim
// (default: all) features by the angle of the token's position: x1' = cos
// x1 - sin x2, x2' = sin x1 + cos x2, where the pairs are the two halves
// of the rotated features, or with interleaved adjacent features. The
// input is [B, H, S, D], or 3-D [B, S, H*D] with num_heads. cos_cache and
// sin_cache are [max_position, R/2] indexed by position_ids [B, S], or
// without position_ids [B, S, R/2].

func inferRotary(c *InferContext) error {
	x := c.In(0)
	if x.Shape.Ranked {
		switch r := x.Shape.Rank(); {
		case r == 3 && c.Int("num_heads") <= 0:
			return c.Errorf("a 3-D input needs a positive num_heads")
		case r != 3 && r != 4:
			return c.Errorf("input must be 3-D or 4-D, is %s", x.Shape)
		}
	}
	if c.Int("rotary_embedding_dim") < 0 || c.Int("rotary_embedding_dim")%2 != 0 {
		return c.Errorf("rotary_embedding_dim must be even and not negative, is %d", c.Int("rotary_embedding_dim"))
	}
	want := 3
	if c.HasInput(3) {
		want = 2
		if p := c.In(3); p.Elem != ir.Undefined && p.Elem != ir.Int64 {
			return c.Errorf("position_ids must be int64, is %s", p.Elem)
		}
	}
	for i := 1; i < 3; i++ {
		if s := c.In(i).Shape; s.Ranked && s.Rank() != want {
			return c.Errorf("input %d must have rank %d, has shape %s", i, want, s)
		}
	}
	return SameAsInput(c)
}

func runRotary(c *KernelContext) error {
	x, cosCache, sinCache, positions := c.In(0), c.In(1), c.In(2), c.In(3)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	var heads int64
	if len(x.Dims) == 3 {
		if heads = c.Int("num_heads"); heads <= 0 {
			return c.Errorf("a 3-D input needs a positive num_heads")
		}
	} else if len(x.Dims) != 4 {
		return c.Errorf("input must be 3-D or 4-D, has shape %v", ir.FormatList(x.Dims))
	}
	t, err := attnView(x, heads)
	if err != nil {
		return c.Errorf("%v", err)
	}
	rot64, err := rotaryDim(c.attrs, int64(t.d))
	if err != nil {
		return c.Errorf("%v", err)
	}
	half := int(rot64) / 2
	cosRows, sinRows, err := rotaryAngles(cosCache, sinCache, positions, t.b, t.s, half)
	if err != nil {
		return c.Errorf("%v", err)
	}
	interleaved := c.Int("interleaved") != 0
	for b := range t.b {
		for s := range t.s {
			cs, sn := cosRows[(b*t.s+s)*half:][:half], sinRows[(b*t.s+s)*half:][:half]
			for h := range t.h {
				rotate(t.row(b, h, s), cs, sn, interleaved)
			}
		}
	}
	c.Set(0, FromFloat64s(x.DType, x.Dims, t.data))
	return nil
}

// rotaryAngles returns the cos and sin rows, [B*S, half], of each token.
func rotaryAngles(cosCache, sinCache, positions *ir.Tensor, batch, seq, half int) (cosRows, sinRows []float64, err error) {
	if !equalDims(cosCache.Dims, sinCache.Dims) {
		return nil, nil, fmt.Errorf("cos_cache %v and sin_cache %v differ in shape", ir.FormatList(cosCache.Dims), ir.FormatList(sinCache.Dims))
	}
	if !cosCache.DType.IsFloat() || !sinCache.DType.IsFloat() {
		return nil, nil, fmt.Errorf("cos_cache and sin_cache must be floating-point, are %s and %s", cosCache.DType, sinCache.DType)
	}
	if positions != nil && positions.DType != ir.Int64 {
		return nil, nil, fmt.Errorf("position_ids must be int64, is %s", positions.DType)
	}
	cv, sv := Float64s(cosCache), Float64s(sinCache)
	if positions == nil {
		if want := []int64{int64(batch), int64(seq), int64(half)}; !equalDims(cosCache.Dims, want) {
			return nil, nil, fmt.Errorf("without position_ids the caches must be %v, are %v", ir.FormatList(want), ir.FormatList(cosCache.Dims))
		}
		return cv, sv, nil
	}
	if len(cosCache.Dims) != 2 || cosCache.Dims[1] != int64(half) {
		return nil, nil, fmt.Errorf("with position_ids the caches must be [max_position, %d], are %v", half, ir.FormatList(cosCache.Dims))
	}
	if !equalDims(positions.Dims, []int64{int64(batch), int64(seq)}) {
		return nil, nil, fmt.Errorf("position_ids must be [%d, %d], is %v", batch, seq, ir.FormatList(positions.Dims))
	}
	cosRows, sinRows = make([]float64, batch*seq*half), make([]float64, batch*seq*half)
	for k, p := range Int64s(positions) {
		if p < 0 || p >= cosCache.Dims[0] {
			return nil, nil, fmt.Errorf("position %d is outside the caches' %d positions", p, cosCache.Dims[0])
		}
		copy(cosRows[k*half:][:half], cv[int(p)*half:][:half])
		copy(sinRows[k*half:][:half], sv[int(p)*half:][:half])
	}
	return cosRows, sinRows, nil
}

// rotate rotates the first 2*len(cs) features of a head in place.
func rotate(x, cs, sn []float64, interleaved bool) {
	half := len(cs)
	for i := range half {
		a, b := i, i+half
		if interleaved {
			a, b = 2*i, 2*i+1
		}
		x1, x2 := x[a], x[b]
		x[a] = cs[i]*x1 - sn[i]*x2
		x[b] = sn[i]*x1 + cs[i]*x2
	}
}

func equalDims(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
