package ops

import (
	"fmt"
	"math"
	"slices"

	"github.com/kiln-ml/kiln/ir"
)

// The normalization family: Softmax, LogSoftmax and Hardmax,
// BatchNormalization, InstanceNormalization, LayerNormalization and LRN.
// The kernels walk the tensor with the reduction type of reduce.go.

// Softmax, LogSoftmax and Hardmax apply a function to lines of the input.
// Before opset 13 a line is everything from axis on (the input is coerced
// to 2-D at axis, default 1); from 13 it runs along axis (default -1).

func softmaxRows(name string, line func(xs []float64)) []*Schema {
	row := func(since, axis int64) *Schema {
		return &Schema{Name: name, Since: since, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
			Attrs: []AttrDef{defInt("axis", axis)}, Types: floatTypes,
			Infer: inferSoftmax, Run: runSoftmax(line)}
	}
	return []*Schema{row(1, 1), row(13, -1)}
}

func inferSoftmax(c *InferContext) error {
	if x := c.In(0); x.Shape.Ranked {
		if _, err := NormAxis(c.Int("axis"), len(x.Shape.Dims)); err != nil {
			return c.Errorf("%v", err)
		}
	}
	return SameAsInput(c)
}

// SoftmaxSpan resolves a Softmax, LogSoftmax or Hardmax node for an input
// of rank rank, as every backend must: a line is the axes [lo, hi) of the
// input, everything from axis on before opset 13, the axis alone from it.
func (c *KernelContext) SoftmaxSpan(rank int) (lo, hi int, err error) {
	axis, err := NormAxis(c.Int("axis"), rank)
	if err != nil {
		return 0, 0, c.Errorf("%v", err)
	}
	if c.schema.Since < 13 {
		return axis, rank, nil
	}
	return axis, axis + 1, nil
}

func runSoftmax(line func(xs []float64)) func(c *KernelContext) error {
	return func(c *KernelContext) error {
		x := c.In(0)
		if err := checkType(c, x.DType); err != nil {
			return err
		}
		lo, hi, err := c.SoftmaxSpan(len(x.Dims))
		if err != nil {
			return err
		}
		reduced := make([]bool, len(x.Dims))
		for a := lo; a < hi; a++ {
			reduced[a] = true
		}
		v := Float64s(x)
		mapGroups(newReduction(x.Dims, reduced), v, line)
		c.Set(0, FromFloat64s(x.DType, x.Dims, v))
		return nil
	}
}

// softmax and logSoftmax subtract the line's maximum first so that large
// inputs do not overflow exp.
func softmax(xs []float64) {
	m := math.Inf(-1)
	for _, x := range xs {
		m = max(m, x)
	}
	var s float64
	for i, x := range xs {
		xs[i] = math.Exp(x - m)
		s += xs[i]
	}
	for i := range xs {
		xs[i] /= s
	}
}

func logSoftmax(xs []float64) {
	m := math.Inf(-1)
	for _, x := range xs {
		m = max(m, x)
	}
	var s float64
	for _, x := range xs {
		s += math.Exp(x - m)
	}
	ls := math.Log(s)
	for i, x := range xs {
		xs[i] = x - m - ls
	}
}

// hardmax puts 1 at the first maximum and 0 elsewhere.
func hardmax(xs []float64) {
	if len(xs) == 0 {
		return
	}
	best := argBest(xs, 1, false)
	for i := range xs {
		xs[i] = 0
	}
	xs[best] = 1
}

// BatchNormalization normalizes each channel (axis 1) with the given
// mean and variance: Y = (X - mean) / sqrt(var + epsilon) * scale + B.
// Opsets 6 and 7 also allow spatial=0 (per-activation parameters of shape
// [C, D1, ...]). From opset 14, training_mode=1 normalizes with the batch's
// statistics instead and outputs the updated running mean and variance.
// The training outputs of opsets 6 to 13 are not implemented: models
// exported for inference do not ask for them.

var batchNormRows = []*Schema{
	batchNormRow(6, 5, defFloat("epsilon", 1e-5), defInt("is_test", 0), defFloat("momentum", 0.9), defInt("spatial", 1)),
	batchNormRow(7, 5, defFloat("epsilon", 1e-5), defFloat("momentum", 0.9), defInt("spatial", 1)),
	batchNormRow(9, 5, defFloat("epsilon", 1e-5), defFloat("momentum", 0.9)),
	batchNormRow(14, 3, defFloat("epsilon", 1e-5), defFloat("momentum", 0.9), defInt("training_mode", 0)),
}

func batchNormRow(since int64, maxOut int, attrs ...AttrDef) *Schema {
	return &Schema{Name: "BatchNormalization", Since: since, MinInputs: 5, MaxInputs: 5, MinOutputs: 1, MaxOutputs: maxOut,
		Attrs: attrs, Types: floatTypes, Infer: inferBatchNorm, Run: runBatchNorm}
}

// batchNormSpatial reports whether the parameters are per channel.
func batchNormSpatial(a attrs) bool { return !a.declares("spatial") || a.Int("spatial") != 0 }

func inferBatchNorm(c *InferContext) error {
	x := c.In(0)
	if x.Shape.Ranked {
		if len(x.Shape.Dims) < 2 {
			return c.Errorf("input must be N x C x D1 x ..., is %s", x)
		}
		want := x.Shape.Dims[1:2]
		if !batchNormSpatial(c.attrs) {
			want = x.Shape.Dims[1:]
		}
		for i := 1; i < 5; i++ {
			if err := checkParamShape(c.In(i), want); err != nil {
				return c.Errorf("input %d: %v", i, err)
			}
		}
	}
	if err := SameAsInput(c); err != nil {
		return err
	}
	// Running mean and variance (and before opset 14, the saved mean and
	// variance) have the mean's and variance's types.
	for i := 1; i < len(c.Node.Outputs); i++ {
		c.Set(i, c.In(3+(i-1)%2).Clone())
	}
	return nil
}

// checkParamShape rejects a parameter whose shape surely differs from want.
func checkParamShape(p ir.Type, want []ir.Dim) error {
	if !p.Shape.Ranked {
		return nil
	}
	if len(p.Shape.Dims) != len(want) {
		return fmt.Errorf("shape %s, want rank %d", p.Shape, len(want))
	}
	for i, d := range p.Shape.Dims {
		if d.IsStatic() && want[i].IsStatic() && d.Value != want[i].Value {
			return fmt.Errorf("shape %s, want %s", p.Shape, ir.ShapeOf(want...))
		}
	}
	return nil
}

// BatchNorm is a BatchNormalization node resolved: whether it normalizes
// with the batch's statistics (training_mode, opset 14) and updates the
// running ones, whether its parameters are per channel (spatial, opsets 6
// and 7; else per element of [C, D1, ...]), epsilon and momentum.
type BatchNorm struct {
	Training, Spatial bool
	Epsilon, Momentum float64
}

// BatchNormSpec resolves a BatchNormalization node for an input of rank
// rank, as every backend must.
func (c *KernelContext) BatchNormSpec(rank int) (*BatchNorm, error) {
	if !c.declares("training_mode") {
		for _, o := range c.Node.Outputs[1:] {
			if o != nil {
				return nil, &UnsupportedError{Domain: c.Node.Domain, Op: c.Node.OpType, Opset: c.Opset,
					Reason: "training outputs before opset 14"}
			}
		}
	}
	if rank < 2 {
		return nil, c.Errorf("input must be N x C x D1 x ..., has rank %d", rank)
	}
	return &BatchNorm{
		Training: c.declares("training_mode") && c.Int("training_mode") != 0,
		Spatial:  batchNormSpatial(c.attrs),
		Epsilon:  float64(c.Float("epsilon")),
		Momentum: float64(c.Float("momentum")),
	}, nil
}

func runBatchNorm(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	spec, err := c.BatchNormSpec(len(x.Dims))
	if err != nil {
		return err
	}
	training := spec.Training
	// Parameter p of element i is p[(i / inner) % params].
	inner := ir.Product(x.Dims[2:])
	params := x.Dims[1]
	if !spec.Spatial {
		inner, params = 1, ir.Product(x.Dims[1:])
	}
	var p [4][]float64 // scale, B, mean, var
	for i := range p {
		in := c.In(i + 1)
		if in.Len() != params {
			return c.Errorf("input %d has shape %v, want %d values", i+1, ir.FormatList(in.Dims), params)
		}
		p[i] = Float64s(in)
	}
	scale, bias, mean, variance := p[0], p[1], p[2], p[3]
	xs := Float64s(x)
	if training {
		// Normalize with the batch's statistics over every axis but 1, and
		// move the running statistics towards them.
		reduced := make([]bool, len(x.Dims))
		for i := range reduced {
			reduced[i] = i != 1
		}
		r := newReduction(x.Dims, reduced)
		batchMean := foldGroups(r, xs, meanOf)
		batchVar := foldGroups(r, xs, varianceOf)
		mom := spec.Momentum
		running := func(old, batch []float64) []float64 {
			out := make([]float64, len(old))
			for i := range out {
				out[i] = old[i]*mom + batch[i]*(1-mom)
			}
			return out
		}
		c.Set(1, FromFloat64s(c.In(3).DType, c.In(3).Dims, running(mean, batchMean)))
		c.Set(2, FromFloat64s(c.In(4).DType, c.In(4).Dims, running(variance, batchVar)))
		mean, variance = batchMean, batchVar
	}
	eps := spec.Epsilon
	ys := make([]float64, len(xs))
	for i, v := range xs {
		ch := (int64(i) / inner) % params
		ys[i] = (v-mean[ch])/math.Sqrt(variance[ch]+eps)*scale[ch] + bias[ch]
	}
	c.Set(0, FromFloat64s(x.DType, x.Dims, ys))
	return nil
}

// meanOf is the mean of a group (NaN when empty).
func meanOf(xs []float64) float64 { return sumF(xs) / float64(len(xs)) }

// varianceOf is the population variance of a group.
func varianceOf(xs []float64) float64 {
	m := meanOf(xs)
	var s float64
	for _, x := range xs {
		s += (x - m) * (x - m)
	}
	return s / float64(len(xs))
}

// InstanceNormalization normalizes each (sample, channel) over its
// spatial axes: Y = (X - mean) / sqrt(var + epsilon) * scale[c] + B[c].

var instanceNormRows = []*Schema{{
	Name: "InstanceNormalization", Since: 6, MinInputs: 3, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
	Attrs: []AttrDef{defFloat("epsilon", 1e-5)}, Types: floatTypes,
	Infer: inferInstanceNorm, Run: runInstanceNorm,
}}

func inferInstanceNorm(c *InferContext) error {
	x := c.In(0)
	if x.Shape.Ranked {
		if len(x.Shape.Dims) < 3 {
			return c.Errorf("input must be N x C x D1 x ..., is %s", x)
		}
		for i := 1; i < 3; i++ {
			if err := checkParamShape(c.In(i), x.Shape.Dims[1:2]); err != nil {
				return c.Errorf("input %d: %v", i, err)
			}
		}
	}
	return SameAsInput(c)
}

func runInstanceNorm(c *KernelContext) error {
	x, scale, bias := c.In(0), c.In(1), c.In(2)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	if len(x.Dims) < 3 {
		return c.Errorf("input must be N x C x D1 x ..., has shape %v", ir.FormatList(x.Dims))
	}
	channels := x.Dims[1]
	if scale.Len() != channels || bias.Len() != channels {
		return c.Errorf("scale %v and B %v must have %d values", ir.FormatList(scale.Dims), ir.FormatList(bias.Dims), channels)
	}
	s, b := Float64s(scale), Float64s(bias)
	eps := float64(c.Float("epsilon"))
	v := Float64s(x)
	// Groups are the (n, c) pairs in row-major order.
	g := 0
	mapGroups(fromAxis(x.Dims, 2), v, func(xs []float64) {
		ch := int64(g) % channels
		g++
		normalize(xs, eps, s[ch], b[ch])
	})
	c.Set(0, FromFloat64s(x.DType, x.Dims, v))
	return nil
}

// normalize maps a group to (x - mean) / sqrt(var + eps) * scale + bias and
// returns its mean and 1 / sqrt(var + eps).
func normalize(xs []float64, eps, scale, bias float64) (mean, invStd float64) {
	mean = meanOf(xs)
	invStd = 1 / math.Sqrt(varianceOf(xs)+eps)
	for i, x := range xs {
		xs[i] = (x-mean)*invStd*scale + bias
	}
	return mean, invStd
}

// LayerNormalization (opset 17) normalizes over the axes from axis on,
// then applies Scale and B, which broadcast to those axes' shape. Mean and
// InvStdDev, when asked for, have X's shape with 1 on the normalized axes
// and stash_type's element type.

var layerNormRows = []*Schema{{
	Name: "LayerNormalization", Since: 17, MinInputs: 2, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 3,
	Attrs: []AttrDef{defInt("axis", -1), defFloat("epsilon", 1e-5), defInt("stash_type", int64(ir.Float32))},
	Types: floatTypes, Infer: inferLayerNorm, Run: runLayerNorm,
}}

func stashType(a attrs) (ir.DType, error) {
	d := ir.DType(a.Int("stash_type"))
	if !d.IsFloat() {
		return 0, fmt.Errorf("stash_type %d is not a floating-point type", a.Int("stash_type"))
	}
	return d, nil
}

func inferLayerNorm(c *InferContext) error {
	x := c.In(0)
	stash, err := stashType(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	stats := ir.TensorType(stash, ir.Shape{})
	if x.Shape.Ranked {
		axis, err := NormAxis(c.Int("axis"), len(x.Shape.Dims))
		if err != nil {
			return c.Errorf("%v", err)
		}
		norm := ir.ShapeOf(x.Shape.Dims[axis:]...)
		for i := 1; i < 3; i++ {
			if p := c.In(i); c.HasInput(i) && p.Shape.Ranked {
				if b, err := BroadcastShape(norm, p.Shape); err != nil || len(b.Dims) != len(norm.Dims) {
					return c.Errorf("input %d of shape %s does not broadcast to the normalized shape %s", i, p.Shape, norm)
				}
			}
		}
		stats.Shape = x.Shape.Clone()
		for i := axis; i < len(stats.Shape.Dims); i++ {
			stats.Shape.Dims[i] = ir.D(1)
		}
	}
	c.Set(0, x.Clone())
	c.Set(1, stats)
	c.Set(2, stats.Clone())
	return nil
}

// LayerNorm is a LayerNormalization node resolved: it normalizes over the
// axes from Axis on; Mean and InvStdDev have element type Stash.
type LayerNorm struct {
	Axis    int
	Epsilon float64
	Stash   ir.DType
}

// LayerNormSpec resolves a LayerNormalization node for an input of rank
// rank, as every backend must: a negative axis, stash_type a float type.
func (c *KernelContext) LayerNormSpec(rank int) (*LayerNorm, error) {
	stash, err := stashType(c.attrs)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	axis, err := NormAxis(c.Int("axis"), rank)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	return &LayerNorm{Axis: axis, Epsilon: float64(c.Float("epsilon")), Stash: stash}, nil
}

func runLayerNorm(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	spec, err := c.LayerNormSpec(len(x.Dims))
	if err != nil {
		return err
	}
	axis, stash := spec.Axis, spec.Stash
	normDims := x.Dims[axis:]
	// Scale and B (B = 0 when absent) per element of a normalized group.
	var p [2][]float64
	for i := range p {
		t := c.In(1 + i)
		if t == nil {
			p[i] = make([]float64, ir.Product(normDims))
			continue
		}
		if !broadcastsTo(t.Dims, normDims) {
			return c.Errorf("input %d of shape %v does not broadcast to the normalized shape %v", 1+i, ir.FormatList(t.Dims), ir.FormatList(normDims))
		}
		vals := Float64s(t)
		p[i] = make([]float64, ir.Product(normDims))
		for k, j := range BroadcastIndex(t.Dims, normDims) {
			p[i][k] = vals[j]
		}
	}
	scale, bias := p[0], p[1]
	eps := spec.Epsilon
	r := fromAxis(x.Dims, axis)
	v := Float64s(x)
	means := make([]float64, 0, len(r.base))
	invStds := make([]float64, 0, len(r.base))
	mapGroups(r, v, func(xs []float64) {
		m, inv := normalize(xs, eps, 1, 0)
		for k := range xs {
			xs[k] = xs[k]*scale[k] + bias[k]
		}
		means, invStds = append(means, m), append(invStds, inv)
	})
	statDims := slices.Clone(x.Dims)
	for i := axis; i < len(statDims); i++ {
		statDims[i] = 1
	}
	c.Set(0, FromFloat64s(x.DType, x.Dims, v))
	c.Set(1, FromFloat64s(stash, statDims, means))
	c.Set(2, FromFloat64s(stash, statDims, invStds))
	return nil
}

// broadcastsTo reports whether shape from broadcasts unidirectionally to to.
func broadcastsTo(from, to []int64) bool {
	if len(from) > len(to) {
		return false
	}
	off := len(to) - len(from)
	for i, d := range from {
		if d != 1 && d != to[off+i] {
			return false
		}
	}
	return true
}

// LRN normalizes each element by the squares of its neighbours across
// channels: Y = X / (bias + alpha/size * sum of X^2 over the channels
// [c - floor((size-1)/2), c + ceil((size-1)/2)])^beta.

var lrnRows = []*Schema{{
	Name: "LRN", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
	Attrs: []AttrDef{
		defFloat("alpha", 1e-4), defFloat("beta", 0.75), defFloat("bias", 1),
		{Name: "size", Kind: ir.AttrInt, Required: true},
	},
	Types: floatTypes, Infer: inferLRN, Run: runLRN,
}}

func inferLRN(c *InferContext) error {
	if x := c.In(0); x.Shape.Ranked && len(x.Shape.Dims) < 2 {
		return c.Errorf("input must be N x C x D1 x ..., is %s", x)
	}
	if c.Int("size") <= 0 {
		return c.Errorf("size must be positive, is %d", c.Int("size"))
	}
	return SameAsInput(c)
}

// LRN is an LRN node resolved: each element is divided by (Bias +
// Alpha/Size * the sum of squares over the channels [c - Below, c +
// Above])^Beta.
type LRN struct {
	Size, Below, Above int64
	Alpha, Beta, Bias  float64
}

// LRNSpec resolves an LRN node for an input of rank rank, as every
// backend must: the window is floor((size-1)/2) channels below and
// ceil((size-1)/2) above.
func (c *KernelContext) LRNSpec(rank int) (*LRN, error) {
	size := c.Int("size")
	if rank < 2 || size <= 0 {
		return nil, c.Errorf("needs an N x C x D1 x ... input and a positive size, has rank %d and %d", rank, size)
	}
	return &LRN{Size: size, Below: (size - 1) / 2, Above: size / 2,
		Alpha: float64(c.Float("alpha")), Beta: float64(c.Float("beta")), Bias: float64(c.Float("bias"))}, nil
}

func runLRN(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	spec, err := c.LRNSpec(len(x.Dims))
	if err != nil {
		return err
	}
	size, below, above := spec.Size, spec.Below, spec.Above
	alpha, beta, bias := spec.Alpha, spec.Beta, spec.Bias
	n, channels, inner := x.Dims[0], x.Dims[1], ir.Product(x.Dims[2:])
	xs := Float64s(x)
	ys := make([]float64, len(xs))
	for b := int64(0); b < n; b++ {
		for ch := int64(0); ch < channels; ch++ {
			for s := int64(0); s < inner; s++ {
				var sq float64
				for k := max(0, ch-below); k <= min(channels-1, ch+above); k++ {
					v := xs[(b*channels+k)*inner+s]
					sq += v * v
				}
				i := (b*channels+ch)*inner + s
				ys[i] = xs[i] / math.Pow(bias+alpha/float64(size)*sq, beta)
			}
		}
	}
	c.Set(0, FromFloat64s(x.DType, x.Dims, ys))
	return nil
}

func init() {
	var rows []*Schema
	rows = append(rows, softmaxRows("Softmax", softmax)...)
	rows = append(rows, softmaxRows("LogSoftmax", logSoftmax)...)
	rows = append(rows, softmaxRows("Hardmax", hardmax)...)
	rows = append(rows, batchNormRows...)
	rows = append(rows, instanceNormRows...)
	rows = append(rows, layerNormRows...)
	rows = append(rows, lrnRows...)
	register(rows)
}
