package ops

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/kiln-ml/kiln/ir"
)

// The random ops: RandomUniform, RandomNormal, their *Like forms,
// Bernoulli and Multinomial (Schema.Random: never folded, never merged).
//
// Every executor draws the same values: element i of a node's output is a
// function of the node's stream key and i alone (a counter-based
// generator), written once below over Arith, which the reference
// computes with Go values and the kernel layer builds as expressions. The
// generator is SplitMix64's: word i of key k is mix64(k + (i+1)·γ).
// Only exactly rounded operations (+, -, ·, /, √ in float64, integer and
// bit operations) are used, each rounded on its own, so the bits agree
// wherever IEEE arithmetic is honoured; ln and cos, which Box–Muller
// needs, are polynomials here rather than a library's.
//
// The key of a node with a seed comes from the seed alone, so nodes with
// one seed draw the same stream, as in ONNX's reference. A node without
// a seed draws a fresh key on each reference run (math/rand/v2); a
// compiled engine fixes one when it is built (RandomSpec.Key, from the
// node's output name), since it takes no per-run seed.

var randomOps = randomRows()

func init() { register(randomOps) }

// randomRows: every op changed at 22 only by adding bfloat16.
func randomRows() []*Schema {
	old := []ir.DType{ir.Float32, ir.Float64, ir.Float16}
	bernoulliOut := concatTypes(numericTypes, []ir.DType{ir.Bool})
	seed := AttrDef{Name: "seed", Kind: ir.AttrFloat}
	optDType := AttrDef{Name: "dtype", Kind: ir.AttrInt}
	uniform := []AttrDef{defFloat("high", 1), defFloat("low", 0), seed}
	normal := []AttrDef{defFloat("mean", 0), defFloat("scale", 1), seed}
	shape := AttrDef{Name: "shape", Kind: ir.AttrInts, Required: true}
	var rows []*Schema
	for _, v := range []struct {
		since int64
		types []ir.DType
	}{{1, old}, {22, floatTypes}} {
		rows = append(rows,
			&Schema{Name: "RandomUniform", Since: v.since, MinOutputs: 1, MaxOutputs: 1,
				Attrs: append([]AttrDef{defInt("dtype", int64(ir.Float32)), shape}, uniform...),
				Types: v.types, Infer: inferRandomShaped(v.types), Run: runRandom},
			&Schema{Name: "RandomNormal", Since: v.since, MinOutputs: 1, MaxOutputs: 1,
				Attrs: append([]AttrDef{defInt("dtype", int64(ir.Float32)), shape}, normal...),
				Types: v.types, Infer: inferRandomShaped(v.types), Run: runRandom},
			&Schema{Name: "RandomUniformLike", Since: v.since, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
				Attrs: append([]AttrDef{optDType}, uniform...),
				Types: allTypes, Infer: inferRandomLike(nil, v.types), Run: runRandom},
			&Schema{Name: "RandomNormalLike", Since: v.since, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
				Attrs: append([]AttrDef{optDType}, normal...),
				Types: allTypes, Infer: inferRandomLike(nil, v.types), Run: runRandom},
			&Schema{Name: "Multinomial", Since: max(v.since, 7), MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
				Attrs: []AttrDef{defInt("dtype", int64(ir.Int32)), defInt("sample_size", 1), seed},
				Types: v.types, Infer: inferMultinomial, Run: runMultinomial},
			&Schema{Name: "Bernoulli", Since: max(v.since, 15), MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
				Attrs: []AttrDef{optDType, seed},
				Types: v.types, Infer: inferRandomLike(v.types, bernoulliOut), Run: runRandom},
		)
	}
	for _, s := range rows {
		s.Random = true
	}
	return rows
}

// randomOp reports whether n is a random op (Schema.Random) at any
// version: Evaluable asks without the model's opsets.
func randomOp(n *ir.Node) bool {
	d := n.Domain
	if d == "ai.onnx" {
		d = ""
	}
	for _, s := range registry[opKey{d, n.OpType}] {
		if s.Random {
			return true
		}
	}
	return false
}

// ---- inference ----

func inferRandomShaped(out []ir.DType) func(c *InferContext) error {
	return func(c *InferContext) error {
		d := ir.DType(c.Int("dtype"))
		if !slices.Contains(out, d) {
			return c.Errorf("dtype %s is not one of %v", d, out)
		}
		shape := c.Ints("shape")
		for _, n := range shape {
			if n < 0 {
				return c.Errorf("shape %v has a negative dim", ir.FormatList(shape))
			}
		}
		c.Set(0, ir.TensorType(d, ir.S(shape...)))
		return nil
	}
}

// inferRandomLike: the input's shape, of dtype or else the input's type;
// in (nil: any) limits the input's element type.
func inferRandomLike(in, out []ir.DType) func(c *InferContext) error {
	return func(c *InferContext) error {
		x := c.In(0)
		if in != nil && x.Elem != ir.Undefined && !slices.Contains(in, x.Elem) {
			return c.Errorf("input is %s, want one of %v", x.Elem, in)
		}
		d := x.Elem
		if c.Has("dtype") {
			d = ir.DType(c.Int("dtype"))
		}
		if d != ir.Undefined && !slices.Contains(out, d) {
			return c.Errorf("output type %s is not one of %v (set dtype)", d, out)
		}
		c.Set(0, ir.TensorType(d, x.Shape.Clone()))
		return nil
	}
}

func inferMultinomial(c *InferContext) error {
	x := c.In(0)
	d := ir.DType(c.Int("dtype"))
	if d != ir.Int32 && d != ir.Int64 {
		return c.Errorf("dtype %s is not int32 or int64", d)
	}
	n := c.Int("sample_size")
	if n < 0 {
		return c.Errorf("sample_size %d is negative", n)
	}
	if !x.Shape.Ranked {
		c.Set(0, ir.TensorType(d, ir.ShapeOf(ir.UnknownDim(), ir.D(n))))
		return nil
	}
	if x.Shape.Rank() != 2 {
		return c.Errorf("input has rank %d, want 2 (batch_size, class_size)", x.Shape.Rank())
	}
	c.Set(0, ir.TensorType(d, ir.ShapeOf(x.Shape.Dims[0], ir.D(n))))
	return nil
}

// ---- what a node draws ----

// Law is a random op's distribution.
type Law int

// The laws.
const (
	UniformLaw     Law = iota // Low + (High-Low)·u, u uniform in [0, 1)
	NormalLaw                 // Mean + Scale·z, z standard normal (Box–Muller)
	BernoulliLaw              // 1 where u < p, else 0
	MultinomialLaw            // a class index, by the inverse of the CDF of e^x
)

// RandomSpec is what a random node draws, resolved from its attributes
// for every executor.
type RandomSpec struct {
	Law Law
	// Key is the node's stream. Seeded is false for a node without a
	// seed: Key is then fixed from the node's output name, which compiled
	// engines take; the reference draws a fresh key per run instead.
	Key    uint64
	Seeded bool
	// Out is the output's element type.
	Out                    ir.DType
	Low, High, Mean, Scale float64
	// Samples is Multinomial's sample_size; Classes its input's class
	// count (-1 when not static).
	Samples, Classes int64
}

// RandomSpec resolves the node's draw; the input's element type is its
// value's (the tensor's where the context holds one).
func (c *KernelContext) RandomSpec() (*RandomSpec, error) {
	in := ir.Undefined
	if t := c.In(0); t != nil {
		in = t.DType
	} else if v := c.Node.Input(0); v != nil {
		in = v.Type.Elem
	}
	return c.attrs.randomSpec(in)
}

// RandomSpecOf resolves node n's draw under the model's opsets, from its
// values' types.
func RandomSpecOf(n *ir.Node, opsets Opsets) (*RandomSpec, error) {
	s, err := opsets.Schema(n)
	if err != nil {
		return nil, err
	}
	if !s.Random {
		return nil, fmt.Errorf("%s is not a random op", n)
	}
	in := ir.Undefined
	if v := n.Input(0); v != nil {
		in = v.Type.Elem
	}
	return attrs{n, s}.randomSpec(in)
}

func (a attrs) randomSpec(in ir.DType) (*RandomSpec, error) {
	s := &RandomSpec{Out: in, Classes: -1}
	switch a.schema.Name {
	case "RandomUniform", "RandomUniformLike":
		s.Law, s.Low, s.High = UniformLaw, float64(a.Float("low")), float64(a.Float("high"))
	case "RandomNormal", "RandomNormalLike":
		s.Law, s.Mean, s.Scale = NormalLaw, float64(a.Float("mean")), float64(a.Float("scale"))
	case "Bernoulli":
		s.Law = BernoulliLaw
	case "Multinomial":
		s.Law, s.Samples = MultinomialLaw, a.Int("sample_size")
		if v := a.node.Input(0); v != nil && v.Type.Shape.Rank() == 2 && v.Type.Shape.Dims[1].IsStatic() {
			s.Classes = v.Type.Shape.Dims[1].Value
		}
	default:
		return nil, fmt.Errorf("%s is not a random op", a.node)
	}
	if at := a.get("dtype"); at != nil { // set, or a default (all but the *Like ops and Bernoulli have one)
		s.Out = ir.DType(at.I)
	}
	if at := a.node.Attr("seed"); at != nil {
		s.Key, s.Seeded = mix64(uint64(math.Float32bits(at.F))+splitmixGamma), true
	} else {
		h := fnv.New64a()
		if v := a.node.Output(0); v != nil {
			h.Write([]byte(v.Name))
		}
		s.Key = mix64(h.Sum64())
	}
	return s, nil
}

// Support is the closed range every drawn value lies in, as the output
// type holds it (Normal: any finite value), and whether the values are
// integers: what a test of values drawn by another generator can hold
// them to.
func (s *RandomSpec) Support() (lo, hi float64, integral bool) {
	switch s.Law {
	case UniformLaw:
		r := FromFloat64s(s.Out, []int64{2}, []float64{s.Low, s.High})
		lo, hi = r.Float64At(0), r.Float64At(1)
		return min(lo, hi), max(lo, hi), false
	case BernoulliLaw:
		return 0, 1, true
	case MultinomialLaw:
		if s.Classes < 0 {
			return 0, math.Inf(1), true
		}
		return 0, float64(max(s.Classes-1, 0)), true
	}
	return math.Inf(-1), math.Inf(1), false
}

// ---- the generator ----

// SplitMix64's increment (2^64 / φ) and mixing constants.
const (
	splitmixGamma = 0x9e3779b97f4a7c15
	splitmixMul1  = 0xbf58476d1ce4e5b9
	splitmixMul2  = 0x94d049bb133111eb
)

func mix64(z uint64) uint64 { return mixWord[uint64](goArith{}, z) }

func mixWord[V any](a Arith[V], z V) V {
	z = a.IMul(a.Xor(z, a.Shr(z, 30)), a.Uint(splitmixMul1))
	z = a.IMul(a.Xor(z, a.Shr(z, 27)), a.Uint(splitmixMul2))
	return a.Xor(z, a.Shr(z, 31))
}

// randomWord is word i (a uint64 V) of stream key.
func randomWord[V any](a Arith[V], key uint64, i V) V {
	return mixWord(a, a.IAdd(a.Uint(key), a.IMul(a.IAdd(i, a.Uint(1)), a.Uint(splitmixGamma))))
}

const twoToMinus53 = 0x1p-53

// uniform01 is draw i of the stream in [0, 1): 53 random bits.
func uniform01[V any](a Arith[V], key uint64, i V) V {
	return a.FMul(a.ToFloat(a.Shr(randomWord(a, key, i), 11)), a.Float(twoToMinus53))
}

// RandomDraw is element i (a uint64 V) of the spec's output before its
// rounding to Out, as a float64: p is Bernoulli's probability at i
// (float64; ignored by the other laws). Multinomial draws through
// MultinomialWeight and MultinomialThreshold instead.
func RandomDraw[V any](a Arith[V], s *RandomSpec, i, p V) V {
	switch s.Law {
	case UniformLaw:
		return a.FAdd(a.Float(s.Low), a.FMul(uniform01(a, s.Key, i), a.Float(s.High-s.Low)))
	case NormalLaw:
		return a.FAdd(a.Float(s.Mean), a.FMul(standardNormal(a, s.Key, i), a.Float(s.Scale)))
	case BernoulliLaw:
		return a.Select(a.Less(uniform01(a, s.Key, i), p), a.Float(1), a.Float(0))
	}
	panic(fmt.Sprintf("ops: RandomDraw of law %d", s.Law))
}

// standardNormal is Box–Muller's cosine deviate from words 2i and 2i+1:
// sqrt(-2 ln u1)·cos(2π u2 - π), u1 in (0, 1], u2 in [0, 1) (the shift
// by π flips the sign, which leaves the law as it was).
func standardNormal[V any](a Arith[V], key uint64, i V) V {
	j := a.IMul(i, a.Uint(2))
	u1 := a.FMul(a.FAdd(a.ToFloat(a.Shr(randomWord(a, key, j), 11)), a.Float(1)), a.Float(twoToMinus53))
	u2 := uniform01(a, key, a.IAdd(j, a.Uint(1)))
	r := a.Sqrt(a.FMul(a.Float(-2), arithLog(a, u1)))
	// cos(2π t) for t = u2 - 1/2 in [-1/2, 1/2): on |t| in [0, 1/4]
	// directly, past it as -cos(2π(1/2 - |t|)) (exact by Sterbenz).
	t := a.Abs(a.FSub(u2, a.Float(0.5)))
	flip := a.Less(a.Float(0.25), t)
	c := cosQuarter(a, a.FMul(a.Select(flip, a.FSub(a.Float(0.5), t), t), a.Float(2*math.Pi)))
	return a.FMul(r, a.Select(flip, a.FSub(a.Float(0), c), c))
}

// cosQuarter is cos x for x in [0, π/2]: the Taylor series to x^24
// (its remainder is below 2^-60 there).
func cosQuarter[V any](a Arith[V], x V) V {
	z := a.FMul(x, x)
	coef := func(k int) float64 { // (-1)^k / (2k)!
		f := 1.0
		for j := 1; j <= 2*k; j++ {
			f *= float64(j)
		}
		if k%2 == 1 {
			return -1 / f
		}
		return 1 / f
	}
	p := a.Float(coef(12))
	for k := 11; k >= 0; k-- {
		p = a.FAdd(a.FMul(p, z), a.Float(coef(k)))
	}
	return p
}

// MultinomialWeight is a class's weight e^(x - top), x its
// log-probability and top its row's largest: 0 below e^-708 (and for
// -Inf), NaN for NaN.
func MultinomialWeight[V any](a Arith[V], x, top V) V {
	d := a.FSub(x, top)
	return a.Select(a.Less(d, a.Float(-708)), a.Float(0), arithExp(a, d))
}

// MultinomialThreshold is sample i's point on its row's CDF: a uniform
// draw times the row's total weight. The sample is the number of classes
// whose running total of weights (in class order) is at most it, at most
// the last class: a row with a NaN, or with no finite log-probability,
// draws class 0.
func MultinomialThreshold[V any](a Arith[V], s *RandomSpec, i, total V) V {
	return a.FMul(uniform01(a, s.Key, i), total)
}

// ---- reference kernels ----

// runKey is the key a reference run draws with: a fresh one for a node
// without a seed.
func runKey(s *RandomSpec) uint64 {
	if s.Seeded {
		return s.Key
	}
	return rand.Uint64()
}

func runRandom(c *KernelContext) error {
	s, err := c.RandomSpec()
	if err != nil {
		return c.Errorf("%v", err)
	}
	var dims []int64
	var p []float64
	if x := c.In(0); x != nil {
		if err := checkType(c, x.DType); err != nil {
			return err
		}
		dims = x.Dims
		if s.Law == BernoulliLaw {
			p = Float64s(x)
		}
	} else {
		if err := checkType(c, s.Out); err != nil {
			return err
		}
		dims = c.Ints("shape")
	}
	s.Key = runKey(s)
	var a goArith
	out := make([]float64, ir.Product(dims))
	for i := range out {
		var pi uint64
		if p != nil {
			pi = bt(p[i])
		}
		out[i] = fl(RandomDraw[uint64](a, s, uint64(i), pi))
	}
	c.Set(0, FromFloat64s(s.Out, dims, out))
	return nil
}

func runMultinomial(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	if len(x.Dims) != 2 {
		return c.Errorf("input has shape %v, want (batch_size, class_size)", ir.FormatList(x.Dims))
	}
	s, err := c.RandomSpec()
	if err != nil {
		return c.Errorf("%v", err)
	}
	s.Key = runKey(s)
	batch, classes := x.Dims[0], x.Dims[1]
	if classes == 0 && batch*s.Samples > 0 {
		return c.Errorf("input has no classes to draw from")
	}
	logp := Float64s(x)
	var a goArith
	out := make([]int64, batch*s.Samples)
	cum := make([]uint64, classes)
	for b := range batch {
		row := logp[b*classes : (b+1)*classes]
		top := math.Inf(-1)
		for _, v := range row {
			if math.IsNaN(v) || math.IsNaN(top) {
				top = math.NaN() // as the kernel layer's Max
			} else {
				top = max(top, v)
			}
		}
		for k, v := range row {
			w := MultinomialWeight[uint64](a, bt(v), bt(top))
			if k > 0 {
				w = a.FAdd(cum[k-1], w)
			}
			cum[k] = w
		}
		for j := range s.Samples {
			i := b*s.Samples + j
			threshold := MultinomialThreshold[uint64](a, s, uint64(i), cum[classes-1])
			n := int64(0)
			for _, w := range cum {
				n += int64(a.LessEq(w, threshold))
			}
			out[i] = min(n, classes-1)
		}
	}
	t := ir.NewTensor(s.Out, batch, s.Samples)
	for i, v := range out {
		if s.Out == ir.Int32 {
			ir.Data[int32](t)[i] = int32(v)
		} else {
			ir.Data[int64](t)[i] = v
		}
	}
	c.Set(0, t)
	return nil
}
