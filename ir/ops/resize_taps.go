package ops

import "math"

// Resize's taps, written once over Arith: the reference computes them
// with Go values for the lengths it sees, and the kernel layer builds
// them as expressions of lengths known only at run time (sizes from a
// shape subgraph, as in F.interpolate(size=other.shape[2:])), so both
// pick the same input samples: every floor and ceiling of a coordinate
// is computed in the same rounding.

// ResizeRule is how one axis maps an output position to its taps: the
// node's modes and the number of taps per position, which depends on
// the scale only under antialias (whose filter widens when shrinking).
type ResizeRule struct {
	attrs  resizeAttrs
	filter float64 // antialias's filter scale, min(scale, 1); 1 without it
	start  int64   // the first tap's offset from the sample left of the coordinate
	n      int     // taps per position
}

func newResizeRule(r resizeAttrs, scale float64) ResizeRule {
	rule := ResizeRule{attrs: r, filter: 1, n: 1}
	if r.mode == "nearest" {
		return rule
	}
	if r.antialias {
		rule.filter = min(scale, 1)
	}
	reach := 1.0 // the kernel's support: linear 1, cubic 2
	if r.mode == "cubic" {
		reach = 2
	}
	rule.start = int64(math.Floor(-reach/rule.filter)) + 1
	rule.n = int(2 - 2*rule.start)
	return rule
}

// ResizeAxis is one axis' geometry as Arith values (float64): the input
// and output lengths, the scale, the resized length (scale times the
// input's, or the size asked for) and the crop region (tf_crop_and_resize).
type ResizeAxis[V any] struct {
	In, Out, Scale, Length, RoiStart, RoiEnd V
}

// ResizeTaps are output position x's taps along an axis: each one's
// input index (an integer-valued float, clamped to the input) and weight
// (0 for a tap the reference drops), and whether x lies inside the crop
// region (1 or 0; outside, it takes the extrapolation value).
func ResizeTaps[V any](a Arith[V], r ResizeRule, g ResizeAxis[V], x V) (index, weight []V, inside V) {
	zero, one := a.Float(0), a.Float(1)
	ceil := func(v V) V { return a.FSub(zero, arithFloor(a, a.FSub(zero, v))) }
	last := a.FSub(g.In, one)
	clamp := func(i V) V { return a.Select(a.Less(i, zero), zero, a.Select(a.Less(last, i), last, i)) }
	xo := resizeSource(a, r.attrs, g, x)
	inside = one
	if r.attrs.coord == "tf_crop_and_resize" {
		inside = a.Select(a.Less(xo, zero), zero, a.Select(a.Less(last, xo), zero, one))
	}
	if r.attrs.mode == "nearest" {
		var j V
		switch r.attrs.nearest {
		case "simple":
			j = a.Select(a.Less(g.Scale, one), ceil(xo), arithFloor(a, xo))
		case "round_prefer_floor":
			j = ceil(a.FSub(xo, a.Float(0.5)))
		case "round_prefer_ceil":
			j = arithFloor(a, a.FAdd(xo, a.Float(0.5)))
		case "floor":
			j = arithFloor(a, xo)
		default: // ceil
			j = ceil(xo)
		}
		return []V{clamp(j)}, []V{one}, inside
	}
	// The samples are base+start .. base+start+n-1, where base+1 is the
	// first input position at or right of xo and ratio in (0, 1].
	base := a.FSub(ceil(xo), one)
	ratio := a.FSub(xo, base)
	sum := zero
	for j := range r.n {
		off := float64(r.start + int64(j))
		d := a.FMul(a.FSub(a.Float(off), ratio), a.Float(r.filter))
		var w V
		if r.attrs.mode == "cubic" {
			w = cubicArith(a, a.Abs(d), r.attrs.cubicA)
		} else {
			w = a.FSub(one, a.Abs(d))
			w = a.Select(a.Less(w, zero), zero, w)
		}
		i := a.FAdd(base, a.Float(off))
		if r.attrs.exclude {
			w = a.Select(a.Less(i, zero), zero, a.Select(a.Less(i, g.In), w, zero))
		}
		sum = a.FAdd(sum, w)
		index, weight = append(index, clamp(i)), append(weight, w)
	}
	if r.attrs.antialias || r.attrs.exclude {
		for j := range weight {
			weight[j] = a.FDiv(weight[j], sum)
		}
	}
	return index, weight, inside
}

// resizeSource maps output position x to the input coordinate it
// samples, per the coordinate transformation mode.
func resizeSource[V any](a Arith[V], r resizeAttrs, g ResizeAxis[V], x V) V {
	zero, one, half := a.Float(0), a.Float(1), a.Float(0.5)
	isOne := func(v, then, els V) V { return a.Select(a.LessEq(v, one), a.Select(a.LessEq(one, v), then, els), els) }
	halfPixel := a.FSub(a.FDiv(a.FAdd(x, half), g.Scale), half)
	last := a.FSub(g.In, one)
	switch r.coord {
	case "half_pixel":
		return halfPixel
	case "half_pixel_symmetric":
		// Centres the sampled region when the output length was rounded.
		offset := a.FMul(a.FDiv(g.In, a.Float(2)), a.FSub(one, a.FDiv(g.Out, g.Length)))
		return a.FSub(a.FAdd(offset, a.FDiv(a.FAdd(x, half), g.Scale)), half)
	case "pytorch_half_pixel":
		return a.Select(a.LessEq(g.Out, one), zero, halfPixel)
	case "align_corners":
		return isOne(g.Length, zero, a.FDiv(a.FMul(x, last), a.FSub(g.Length, one)))
	case "tf_half_pixel_for_nn":
		return a.FDiv(a.FAdd(x, half), g.Scale)
	case "tf_crop_and_resize":
		span := a.FSub(g.RoiEnd, g.RoiStart)
		centre := a.FDiv(a.FMul(span, last), a.Float(2))
		return isOne(g.Length, centre,
			a.FAdd(a.FMul(g.RoiStart, last), a.FDiv(a.FMul(a.FMul(x, span), last), a.FSub(g.Length, one))))
	}
	return a.FDiv(x, g.Scale) // asymmetric
}

// cubicArith is Keys' cubic convolution kernel with coefficient c at
// distance x ≥ 0.
func cubicArith[V any](a Arith[V], x V, c float64) V {
	near := a.FAdd(a.FMul(a.FMul(a.FSub(a.FMul(a.Float(c+2), x), a.Float(c+3)), x), x), a.Float(1))
	far := a.FSub(a.FMul(a.FAdd(a.FMul(a.FSub(a.FMul(a.Float(c), x), a.Float(5*c)), x), a.Float(8*c)), x), a.Float(4*c))
	return a.Select(a.LessEq(x, a.Float(1)), near, a.Select(a.Less(x, a.Float(2)), far, a.Float(0)))
}
