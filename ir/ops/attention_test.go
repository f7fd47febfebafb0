package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// attnCase is an Attention problem in 4-D terms for naiveAttention.
type attnCase struct {
	b, hq, hkv, sq, skv, past, d, dv int
	q, k, v, pastK, pastV            []float64 // 4-D, row-major
	mask                             []float64 // [sq, maskLen], bool as 0/1; nil for none
	maskLen                          int
	boolMask, causal                 bool
	scale, softcap                   float64
}

// naiveAttention follows the definition element by element: the key/value
// head of query head h is h / (hq/hkv), a key j is masked by a false mask,
// a mask shorter than the keys, or (causal) j > i + past.
func naiveAttention(c attnCase) (y, presentK, presentV, biased []float64) {
	total := c.past + c.skv
	at := func(x []float64, heads, seq, d, b, h, s, e int) float64 { return x[((b*heads+h)*seq+s)*d+e] }
	key := func(b, h, j, e int) float64 {
		if j < c.past {
			return at(c.pastK, c.hkv, c.past, c.d, b, h, j, e)
		}
		return at(c.k, c.hkv, c.skv, c.d, b, h, j-c.past, e)
	}
	val := func(b, h, j, e int) float64 {
		if j < c.past {
			return at(c.pastV, c.hkv, c.past, c.dv, b, h, j, e)
		}
		return at(c.v, c.hkv, c.skv, c.dv, b, h, j-c.past, e)
	}
	for b := range c.b {
		for h := range c.hkv {
			for j := range total {
				for e := range c.d {
					presentK = append(presentK, key(b, h, j, e))
				}
				for e := range c.dv {
					presentV = append(presentV, val(b, h, j, e))
				}
			}
		}
	}
	for b := range c.b {
		for h := range c.hq {
			kvh := h / (c.hq / c.hkv)
			for i := range c.sq {
				w := make([]float64, total)
				for j := range total {
					var s float64
					for e := range c.d {
						s += at(c.q, c.hq, c.sq, c.d, b, h, i, e) * key(b, kvh, j, e)
					}
					s *= c.scale
					if c.softcap > 0 {
						s = c.softcap * math.Tanh(s/c.softcap)
					}
					switch {
					case c.mask != nil && j >= c.maskLen:
						s = math.Inf(-1)
					case c.mask != nil && c.boolMask && c.mask[i*c.maskLen+j] == 0:
						s = math.Inf(-1)
					case c.mask != nil && !c.boolMask:
						s += c.mask[i*c.maskLen+j]
					}
					if c.causal && j > i+c.past {
						s = math.Inf(-1)
					}
					w[j] = s
				}
				biased = append(biased, w...)
				m := math.Inf(-1)
				for _, s := range w {
					m = math.Max(m, s)
				}
				var sum float64
				for j := range w {
					w[j] = math.Exp(w[j] - m)
					sum += w[j]
				}
				for e := range c.dv {
					var acc float64
					for j := range total {
						acc += w[j] / sum * val(b, kvh, j, e)
					}
					y = append(y, acc)
				}
			}
		}
	}
	return y, presentK, presentV, biased
}

// randFloats draws normal values that float32 holds exactly.
func randFloats(rng *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(float32(rng.NormFloat64()))
	}
	return v
}

func TestAttentionAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 1))
	c := attnCase{b: 2, hq: 6, hkv: 2, sq: 3, skv: 4, past: 2, d: 4, dv: 5, maskLen: 5, scale: 0.7, softcap: 1.5}
	c.q = randFloats(rng, c.b*c.hq*c.sq*c.d)
	c.k = randFloats(rng, c.b*c.hkv*c.skv*c.d)
	c.v = randFloats(rng, c.b*c.hkv*c.skv*c.dv)
	c.pastK = randFloats(rng, c.b*c.hkv*c.past*c.d)
	c.pastV = randFloats(rng, c.b*c.hkv*c.past*c.dv)
	total := c.past + c.skv

	for _, tc := range []struct {
		name         string
		boolMask     bool
		causal, is3D bool
	}{
		{"4d float mask", false, false, false},
		{"4d bool mask causal", true, true, false},
		{"3d float mask causal", false, true, true},
		{"3d bool mask", true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := c
			c.boolMask, c.causal = tc.boolMask, tc.causal
			// A mask shorter than the 6 keys, padded with -Inf; a bool
			// mask keeps every first key so no row is all masked.
			c.mask = randFloats(rng, c.sq*c.maskLen)
			var mask *ir.Tensor
			if c.boolMask {
				b := make([]bool, len(c.mask))
				for i := range c.mask {
					b[i] = c.mask[i] > -0.5 || i%c.maskLen == 0
					c.mask[i] = b2f(b[i])
				}
				mask = ir.FromSlice(ir.Bool, []int64{int64(c.sq), int64(c.maskLen)}, b)
			} else {
				mask = FromFloat64s(ir.Float32, []int64{int64(c.sq), int64(c.maskLen)}, c.mask)
			}
			wantY, wantK, wantV, wantQK := naiveAttention(c)

			dims4 := func(h, s, d int) []int64 { return []int64{int64(c.b), int64(h), int64(s), int64(d)} }
			q := FromFloat64s(ir.Float32, dims4(c.hq, c.sq, c.d), c.q)
			k := FromFloat64s(ir.Float32, dims4(c.hkv, c.skv, c.d), c.k)
			v := FromFloat64s(ir.Float32, dims4(c.hkv, c.skv, c.dv), c.v)
			attrs := []*ir.Attribute{ir.AttrF("scale", float32(c.scale)), ir.AttrF("softcap", float32(c.softcap)),
				ir.AttrI("qk_matmul_output_mode", 2)}
			if c.causal {
				attrs = append(attrs, ir.AttrI("is_causal", 1))
			}
			if tc.is3D {
				dims3 := func(h, s, d int) []int64 { return []int64{int64(c.b), int64(s), int64(h * d)} }
				q = FromFloat64s(ir.Float32, dims3(c.hq, c.sq, c.d), headsToHidden(c.q, c.b, c.hq, c.sq, c.d))
				k = FromFloat64s(ir.Float32, dims3(c.hkv, c.skv, c.d), headsToHidden(c.k, c.b, c.hkv, c.skv, c.d))
				v = FromFloat64s(ir.Float32, dims3(c.hkv, c.skv, c.dv), headsToHidden(c.v, c.b, c.hkv, c.skv, c.dv))
				wantY = headsToHidden(wantY, c.b, c.hq, c.sq, c.dv)
				attrs = append(attrs, ir.AttrI("q_num_heads", int64(c.hq)), ir.AttrI("kv_num_heads", int64(c.hkv)))
			}
			pk := FromFloat64s(ir.Float32, dims4(c.hkv, c.past, c.d), c.pastK)
			pv := FromFloat64s(ir.Float32, dims4(c.hkv, c.past, c.dv), c.pastV)
			out, err := callKernel(t, "Attention", 23, []*ir.Tensor{q, k, v, mask, pk, pv}, 4, attrs...)
			require.NoError(t, err)
			assertClose(t, wantY, Float64s(out[0]), 1e-5, 1e-6, "Y")
			assertClose(t, wantK, Float64s(out[1]), 0, 0, "present_key")
			assertClose(t, wantV, Float64s(out[2]), 0, 0, "present_value")
			assertClose(t, wantQK, Float64s(out[3]), 1e-5, 1e-6, "qk_matmul_output")
			assert.Equal(t, dims4(c.hq, c.sq, total), out[3].Dims)
		})
	}
}

// With one key, the softmax is 1 whatever the scores: Y is that key's value
// for every query head of its group.
func TestAttentionSingleKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 2))
	q := randTensor(rng, ir.Float64, 1, 4, 3, 2)
	k := randTensor(rng, ir.Float64, 1, 2, 1, 2)
	v := randTensor(rng, ir.Float64, 1, 2, 1, 3)
	out, err := callKernel(t, "Attention", 23, []*ir.Tensor{q, k, v}, 4, ir.AttrI("qk_matmul_output_mode", 3))
	require.NoError(t, err)
	vv, y := Float64s(v), Float64s(out[0])
	for h := range 4 {
		for i := range 3 {
			assertClose(t, vv[h/2*3:][:3], y[(h*3+i)*3:][:3], 1e-12, 0)
		}
	}
	assertClose(t, []float64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, Float64s(out[3]), 1e-12, 0, "softmax of one key")
}

// nonpad_kv_seqlen (opset 24) masks the keys past each batch's length:
// the result equals attention over the kept keys alone.
func TestAttentionNonpadLengths(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 3))
	q := randTensor(rng, ir.Float32, 2, 2, 3, 4)
	k := randTensor(rng, ir.Float32, 2, 2, 5, 4)
	v := randTensor(rng, ir.Float32, 2, 2, 5, 3)
	lengths := []int64{5, 2}
	out, err := callKernel(t, "Attention", 24, []*ir.Tensor{q, k, v, nil, nil, nil, i64s(lengths...)}, 1)
	require.NoError(t, err)
	y := Float64s(out[0])
	for b, n := range lengths {
		slice := func(x *ir.Tensor, d int64) *ir.Tensor {
			xv := Float64s(x)
			var kept []float64
			for h := range 2 {
				kept = append(kept, xv[(b*2+h)*5*int(d):][:n*d]...)
			}
			return FromFloat64s(ir.Float32, []int64{1, 2, n, d}, kept)
		}
		qb := FromFloat64s(ir.Float32, []int64{1, 2, 3, 4}, Float64s(q)[b*24:][:24])
		want, err := callKernel(t, "Attention", 23, []*ir.Tensor{qb, slice(k, 4), slice(v, 3)}, 1)
		require.NoError(t, err)
		assertClose(t, Float64s(want[0]), y[b*18:][:18], 1e-6, 1e-7, "batch", b)
	}
	_, err = callKernel(t, "Attention", 24, []*ir.Tensor{q, k, v, nil, nil, nil, i64s(6, 1)}, 1)
	assert.ErrorContains(t, err, "outside [0, 5]")
}

func TestAttentionErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 4))
	q4 := randTensor(rng, ir.Float32, 1, 3, 2, 4)
	k4 := randTensor(rng, ir.Float32, 1, 2, 2, 4)
	v4 := randTensor(rng, ir.Float32, 1, 2, 2, 4)
	_, err := callKernel(t, "Attention", 23, []*ir.Tensor{q4, k4, v4}, 1)
	assert.ErrorContains(t, err, "not a multiple")

	q3 := randTensor(rng, ir.Float32, 1, 2, 8)
	_, err = callKernel(t, "Attention", 23, []*ir.Tensor{q3, q3, q3}, 1)
	assert.ErrorContains(t, err, "q_num_heads")
	_, err = callKernel(t, "Attention", 23, []*ir.Tensor{q3, q3, q3}, 1, ir.AttrI("q_num_heads", 3), ir.AttrI("kv_num_heads", 1))
	assert.ErrorContains(t, err, "does not split")
	_, err = callKernel(t, "Attention", 23, []*ir.Tensor{q3, k4, v4}, 1)
	assert.ErrorContains(t, err, "3-D or all 4-D")

	k := randTensor(rng, ir.Float32, 1, 3, 2, 4)
	_, err = callKernel(t, "Attention", 23, []*ir.Tensor{q4, k, k, nil, k}, 1)
	assert.ErrorContains(t, err, "go together")
	_, err = callKernel(t, "Attention", 23, []*ir.Tensor{q4, k, k}, 1, ir.AttrI("qk_matmul_output_mode", 4))
	assert.ErrorContains(t, err, "qk_matmul_output_mode")
	_, err = callKernel(t, "Attention", 23, []*ir.Tensor{q4, k, k, randTensor(rng, ir.Float32, 2, 3)}, 1)
	assert.ErrorContains(t, err, "longer than")
	_, err = callKernel(t, "Attention", 23, []*ir.Tensor{q4, k, k, randTensor(rng, ir.Float32, 3, 2)}, 1)
	assert.ErrorContains(t, err, "does not broadcast")
	_, err = callKernel(t, "Attention", 23, []*ir.Tensor{q4, k, k, nil, randTensor(rng, ir.Float32, 1, 3, 2, 5), k}, 1)
	assert.ErrorContains(t, err, "past_key")
}

func TestAttentionInferSymbolic(t *testing.T) {
	f := ir.Float32
	n, s, p := ir.Sym("N"), ir.Sym("S"), ir.Sym("P")
	q := ir.TensorType(f, ir.ShapeOf(n, s, ir.D(72)))
	k := ir.TensorType(f, ir.ShapeOf(n, ir.D(6), ir.D(24)))
	v := ir.TensorType(f, ir.ShapeOf(n, ir.D(6), ir.D(30)))
	past := ir.TensorType(f, ir.ShapeOf(n, ir.D(3), p, ir.D(8)))
	pastV := ir.TensorType(f, ir.ShapeOf(n, ir.D(3), p, ir.D(10)))
	c := inferAttn(t, 23, []ir.Type{q, k, v, {}, past, pastV}, ir.AttrI("q_num_heads", 9), ir.AttrI("kv_num_heads", 3))
	assert.Equal(t, "[N,S,90]", c.Outputs[0].Shape.String())
	total := ir.DimAdd(p, ir.D(6))
	assert.True(t, c.Outputs[1].Shape.Equal(ir.ShapeOf(n, ir.D(3), total, ir.D(8))), "present_key %s", c.Outputs[1].Shape)
	assert.True(t, c.Outputs[2].Shape.Equal(ir.ShapeOf(n, ir.D(3), total, ir.D(10))), "present_value %s", c.Outputs[2].Shape)
	assert.True(t, c.Outputs[3].Shape.Equal(ir.ShapeOf(n, ir.D(9), s, total)), "qk %s", c.Outputs[3].Shape)

	// 4-D: heads and head sizes come from the inputs.
	q4 := ir.TensorType(f, ir.ShapeOf(n, ir.D(4), s, ir.D(8)))
	k4 := ir.TensorType(f, ir.ShapeOf(n, ir.D(2), ir.D(5), ir.D(8)))
	v4 := ir.TensorType(f, ir.ShapeOf(n, ir.D(2), ir.D(5), ir.D(3)))
	c = inferAttn(t, 23, []ir.Type{q4, k4, v4})
	assert.Equal(t, "[N,4,S,3]", c.Outputs[0].Shape.String())

	s23, err := Lookup("", "Attention", 23)
	require.NoError(t, err)
	for _, bad := range [][]ir.Type{
		{q, k4, v4},
		{ir.TensorType(f, ir.ShapeOf(n, ir.D(3), s, ir.D(8))), k4, v4},
		{q4, ir.TensorType(f, ir.ShapeOf(n, ir.D(2), ir.D(5), ir.D(7))), v4},
	} {
		node := &ir.Node{OpType: "Attention", Inputs: []*ir.Value{{}, {}, {}}, Outputs: []*ir.Value{{Name: "y"}}}
		assert.Error(t, s23.Infer(NewInferContext(s23, node, 23, bad, make([]*ir.Tensor, 3))), "%v", bad)
	}
}

func inferAttn(t *testing.T, opset int64, ins []ir.Type, attrs ...*ir.Attribute) *InferContext {
	t.Helper()
	s, err := Lookup("", "Attention", opset)
	require.NoError(t, err)
	n := &ir.Node{OpType: "Attention", Attrs: attrs}
	for _, in := range ins {
		var v *ir.Value
		if in.Kind != ir.UnknownKind {
			v = &ir.Value{}
		}
		n.Inputs = append(n.Inputs, v)
	}
	for range 4 {
		n.Outputs = append(n.Outputs, &ir.Value{Name: "o"})
	}
	c := NewInferContext(s, n, opset, ins, make([]*ir.Tensor, len(ins)))
	require.NoError(t, s.Infer(c))
	return c
}

// naiveRotary rotates pair (a, b) of each head of x [B, H, S, D] by the
// angle at its position, positions[b][s].
func naiveRotary(x []float64, b, h, s, d, rot int, interleaved bool, angle func(b, s, i int) float64) []float64 {
	out := append([]float64{}, x...)
	for bi := range b {
		for hi := range h {
			for si := range s {
				base := ((bi*h+hi)*s + si) * d
				for i := range rot / 2 {
					a, c := base+i, base+i+rot/2
					if interleaved {
						a, c = base+2*i, base+2*i+1
					}
					th := angle(bi, si, i)
					out[a] = x[a]*math.Cos(th) - x[c]*math.Sin(th)
					out[c] = x[a]*math.Sin(th) + x[c]*math.Cos(th)
				}
			}
		}
	}
	return out
}

func TestRotaryEmbedding(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 5))
	const b, h, s, d, maxPos = 2, 3, 4, 8, 10
	x := randFloats(rng, b*h*s*d)
	for _, tc := range []struct {
		rot         int
		interleaved bool
		is3D        bool
	}{{8, false, false}, {4, true, false}, {6, false, true}, {8, true, true}} {
		half := tc.rot / 2
		theta := func(p, i int) float64 { return float64(p) / math.Pow(100, float64(i)/float64(half)) }
		cosV, sinV := make([]float64, maxPos*half), make([]float64, maxPos*half)
		for p := range maxPos {
			for i := range half {
				cosV[p*half+i], sinV[p*half+i] = math.Cos(theta(p, i)), math.Sin(theta(p, i))
			}
		}
		pos := make([]int64, b*s)
		for i := range pos {
			pos[i] = rng.Int64N(maxPos)
		}
		want := naiveRotary(x, b, h, s, d, tc.rot, tc.interleaved, func(bi, si, i int) float64 { return theta(int(pos[bi*s+si]), i) })
		in := FromFloat64s(ir.Float64, []int64{b, h, s, d}, x)
		attrs := []*ir.Attribute{ir.AttrI("interleaved", int64(b2f(tc.interleaved))), ir.AttrI("rotary_embedding_dim", int64(tc.rot))}
		if tc.is3D {
			in = FromFloat64s(ir.Float64, []int64{b, s, h * d}, headsToHidden(x, b, h, s, d))
			want = headsToHidden(want, b, h, s, d)
			attrs = append(attrs, ir.AttrI("num_heads", h))
		}
		cosT := FromFloat64s(ir.Float64, []int64{maxPos, int64(half)}, cosV)
		sinT := FromFloat64s(ir.Float64, []int64{maxPos, int64(half)}, sinV)
		s23, err := Lookup("", "RotaryEmbedding", 23)
		require.NoError(t, err)
		// The kernel's float types list leaves float64 out as ONNX does;
		// compute in float32 and compare loosely.
		require.False(t, s23.SupportsType(ir.Float64))
		in32 := FromFloat64s(ir.Float32, in.Dims, Float64s(in))
		out, err := callKernel(t, "RotaryEmbedding", 23, []*ir.Tensor{in32,
			FromFloat64s(ir.Float32, cosT.Dims, cosV), FromFloat64s(ir.Float32, sinT.Dims, sinV), ir.FromSlice(ir.Int64, []int64{b, s}, pos)}, 1, attrs...)
		require.NoError(t, err)
		assertClose(t, want, Float64s(out[0]), 1e-5, 1e-6, tc)
	}

	// Position 0 (cos 1, sin 0) is the identity; a position past the cache
	// is an error.
	in := FromFloat64s(ir.Float32, []int64{1, 1, 2, 4}, x[:8])
	ones, zeros := f32([]int64{1, 2}, 1, 1), f32([]int64{1, 2}, 0, 0)
	out, err := callKernel(t, "RotaryEmbedding", 23, []*ir.Tensor{in, ones, zeros, ir.FromSlice(ir.Int64, []int64{1, 2}, []int64{0, 0})}, 1)
	require.NoError(t, err)
	assertClose(t, Float64s(in), Float64s(out[0]), 0, 0)
	_, err = callKernel(t, "RotaryEmbedding", 23, []*ir.Tensor{in, ones, zeros, ir.FromSlice(ir.Int64, []int64{1, 2}, []int64{0, 1})}, 1)
	assert.ErrorContains(t, err, "outside the caches")
	_, err = callKernel(t, "RotaryEmbedding", 23, []*ir.Tensor{in, ones, zeros}, 1)
	assert.ErrorContains(t, err, "without position_ids")
	_, err = callKernel(t, "RotaryEmbedding", 23, []*ir.Tensor{FromFloat64s(ir.Float32, []int64{1, 2, 8}, x[:16]), ones, zeros}, 1)
	assert.ErrorContains(t, err, "num_heads")
	_, err = callKernel(t, "RotaryEmbedding", 23, []*ir.Tensor{in, ones, zeros}, 1, ir.AttrI("rotary_embedding_dim", 6))
	assert.ErrorContains(t, err, "at most the head size")
}
