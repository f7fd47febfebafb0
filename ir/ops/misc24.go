package ops

import (
	"fmt"
	"math"

	"github.com/kiln-ml/kiln/ir"
)

// Ops new in opsets 24 to 26 that belong to no larger family: Swish
// (24), TensorScatter (24, a KV-cache write), CumProd (26, CumSum's
// scan with a product) and BitCast (26).

var misc24Rows = concatRows(
	unaryRows(unaryOp{name: "Swish", since: 24, types: floatTypes, attrs: []AttrDef{defFloat("alpha", 1)}, f: swish}),
	[]*Schema{{
		Name: "TensorScatter", Since: 24, MinInputs: 2, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defInt("axis", -2), defString("mode", "linear")},
		Types: concatTypes(numericTypes, []ir.DType{ir.Bool}), Infer: inferTensorScatter, Run: runTensorScatter,
	}, {
		Name: "CumProd", Since: 26, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defInt("exclusive", 0), defInt("reverse", 0)},
		Types: reduceTypes, Infer: inferCumSum, Run: func(c *KernelContext) error { return runCumulative(c, scanProd) },
	}, {
		Name: "BitCast", Since: 26, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "to", Kind: ir.AttrInt, Required: true}},
		Types: bitCastTypes(), Infer: inferBitCast, Run: runBitCast,
	}},
)

func init() { register(misc24Rows) }

// Swish(x) = x·sigmoid(alpha·x).
func swish(a attrs) func(float64) float64 {
	alpha := float64(a.Float("alpha"))
	return func(x float64) float64 { return x * sigmoid(alpha*x) }
}

// CumProd is CumSum with a product: the same inputs and attributes,
// resolved by KernelContext.CumSumSpec for every backend.
var scanProd = scanOp{1, func(a, b float64) float64 { return a * b }, func(a, b int64) int64 { return a * b }}

// --- TensorScatter ----------------------------------------------------------

// TensorScatter writes update into a copy of past_cache along axis (the
// sequence axis; axis 0 is the batch), at write_indices[b] for batch b
// (0 when absent). In circular mode positions wrap around the cache;
// in linear mode they must fit.

func tensorScatterMode(a attrs) (circular bool, ok bool) {
	switch a.String("mode") {
	case "linear":
		return false, true
	case "circular":
		return true, true
	}
	return false, false
}

// tensorScatterAxis resolves axis for a cache of rank rank: it may be
// negative, and may not be the batch axis.
func tensorScatterAxis(axis int64, rank int) (int, error) {
	ax, err := NormAxis(axis, rank)
	if err == nil && ax == 0 {
		err = fmt.Errorf("axis must not be 0, the batch axis")
	}
	return ax, err
}

func inferTensorScatter(c *InferContext) error {
	cache, upd, idx := c.In(0), c.In(1), c.In(2)
	if _, ok := tensorScatterMode(c.attrs); !ok {
		return c.Errorf("mode %q is neither linear nor circular", c.String("mode"))
	}
	if upd.Elem != ir.Undefined && cache.Elem != ir.Undefined && upd.Elem != cache.Elem {
		return c.Errorf("update is %s, past_cache is %s", upd.Elem, cache.Elem)
	}
	if c.HasInput(2) && (idx.Elem != ir.Undefined && idx.Elem != ir.Int64 || idx.Shape.Ranked && idx.Shape.Rank() != 1) {
		return c.Errorf("write_indices must be a 1-D int64 tensor, is %s", idx)
	}
	if cache.Shape.Ranked {
		rank := cache.Shape.Rank()
		ax, err := tensorScatterAxis(c.Int("axis"), rank)
		if err != nil {
			return c.Errorf("%v", err)
		}
		if upd.Shape.Ranked {
			if err := tensorScatterShapes(knownOrNeg(cache.Shape), knownOrNeg(upd.Shape), ax); err != nil {
				return c.Errorf("%v", err)
			}
		}
	}
	c.Set(0, cache.Clone())
	return nil
}

// knownOrNeg gives a shape's static dims and -1 for the others.
func knownOrNeg(s ir.Shape) []int64 {
	out := make([]int64, len(s.Dims))
	for i, d := range s.Dims {
		out[i] = -1
		if d.IsStatic() {
			out[i] = d.Value
		}
	}
	return out
}

// tensorScatterShapes checks update against the cache: the same rank,
// the same dims off the axis, no longer along it. Dims of -1 are unknown.
func tensorScatterShapes(cache, upd []int64, axis int) error {
	if len(upd) != len(cache) {
		return fmt.Errorf("update has rank %d, past_cache %d", len(upd), len(cache))
	}
	for i := range cache {
		if cache[i] < 0 || upd[i] < 0 {
			continue
		}
		if i != axis && upd[i] != cache[i] || i == axis && upd[i] > cache[i] {
			return fmt.Errorf("update shape %v does not fit past_cache shape %v along axis %d", ir.FormatList(upd), ir.FormatList(cache), axis)
		}
	}
	return nil
}

func runTensorScatter(c *KernelContext) error {
	cache, upd, idxT := c.In(0), c.In(1), c.In(2)
	if err := checkType(c, cache.DType); err != nil {
		return err
	}
	if upd.DType != cache.DType {
		return c.Errorf("update is %s, past_cache is %s", upd.DType, cache.DType)
	}
	circular, ok := tensorScatterMode(c.attrs)
	if !ok {
		return c.Errorf("mode %q is neither linear nor circular", c.String("mode"))
	}
	ax, err := tensorScatterAxis(c.Int("axis"), len(cache.Dims))
	if err != nil {
		return c.Errorf("%v", err)
	}
	if err := tensorScatterShapes(cache.Dims, upd.Dims, ax); err != nil {
		return c.Errorf("%v", err)
	}
	batch := cache.Dims[0]
	starts := make([]int64, batch)
	if idxT != nil {
		if idxT.DType != ir.Int64 || len(idxT.Dims) != 1 || idxT.Dims[0] != batch {
			return c.Errorf("write_indices must be int64 of shape [%d], is %s", batch, idxT.Type())
		}
		starts = Int64s(idxT)
	}
	out := cache.Clone()
	size := int64(cache.DType.Size())
	inner := ir.Product(cache.Dims[ax+1:]) * size // bytes of one sequence position
	perBatch := ir.Product(cache.Dims[1:ax])      // prefixes of one batch entry
	maxLen, seqLen := cache.Dims[ax], upd.Dims[ax]
	for p := int64(0); p < ir.Product(cache.Dims[:ax]); p++ {
		start := starts[p/perBatch]
		for s := int64(0); s < seqLen; s++ {
			pos := start + s
			if circular {
				pos = (pos%maxLen + maxLen) % maxLen
			} else if pos < 0 || pos >= maxLen {
				return c.Errorf("write position %d (write_indices[%d] = %d) is outside the cache's %d positions", pos, p/perBatch, start, maxLen)
			}
			dst, src := (p*maxLen+pos)*inner, (p*seqLen+s)*inner
			copy(out.Raw[dst:dst+inner], upd.Raw[src:src+inner])
		}
	}
	c.Set(0, out)
	return nil
}

// --- BitCast ----------------------------------------------------------------

// bitCastTypes is every type with a fixed-width raw form: BitCast moves
// bytes, so it needs no arithmetic on them.
func bitCastTypes() []ir.DType {
	var out []ir.DType
	for d := ir.DType(1); d < 64; d++ {
		if d.Valid() && d.Size() != 0 {
			out = append(out, d)
		}
	}
	return out
}

// checkBitCast says why from's elements cannot be reinterpreted as
// to's: BitCast needs the same width in bytes (or bits, for the packed
// types) and no strings.
func checkBitCast(from ir.DType, to int64) error {
	d := ir.DType(to)
	if to <= 0 || to > math.MaxInt32 || !d.Valid() || d.Size() == 0 {
		return fmt.Errorf("to = %d is not a fixed-width element type", to)
	}
	if from != ir.Undefined && (from.Size() != d.Size() || from.PackedBits() != d.PackedBits()) {
		return fmt.Errorf("cannot reinterpret %s as %s: their widths differ", from, d)
	}
	return nil
}

func inferBitCast(c *InferContext) error {
	x := c.In(0)
	if err := checkBitCast(x.Elem, c.Int("to")); err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, ir.TensorType(ir.DType(c.Int("to")), x.Shape.Clone()))
	return nil
}

func runBitCast(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	if err := checkBitCast(x.DType, c.Int("to")); err != nil {
		return c.Errorf("%v", err)
	}
	out := ir.NewTensor(ir.DType(c.Int("to")), x.Dims...)
	copy(out.Raw, x.Raw)
	c.Set(0, out)
	return nil
}
