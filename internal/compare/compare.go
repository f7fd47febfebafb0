package compare

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// Engine is one side of a comparison: a loaded engine and its file.
type Engine struct {
	Path   string
	Engine *runtime.Engine
}

// Data is what both engines run on, one run at a time (dataset.Set, or
// random inputs).
type Data interface {
	Runs() int
	Run(i int) map[string]*ir.Tensor
	SamplesIn(i int) int
	RunSource(i int) string
}

// Options say how to compare.
type Options struct {
	Threads int
	// Warmup is the untimed time both engines run first, Duration the timed
	// time; they take turns, so each gets about half.
	Warmup, Duration time.Duration
	// Labels, one per sample, give each engine's top-1 accuracy.
	Labels []int64
	// PerLayer compares the engines' debug outputs (cc build
	// --mark-outputs) tensor by tensor.
	PerLayer bool
	Limits   ir.Limits
}

// Report is a comparison's result. B is measured against A.
type Report struct {
	A, B      Side
	Speedup   float64 // A's median latency over B's
	Agreement Agreement
	// Samples and Runs count the data compared; Threads each engine's.
	Samples, Runs, Threads int
	// DebugOutputs counts the debug outputs A and B store on every run
	// (their latencies include storing them).
	DebugOutputs [2]int

	// PerLayer says the layers were compared: each matched tensor's SQNR
	// of B against A, worst first; Quantized says they are B's quantized
	// tensors (else B has none and every matched tensor is listed).
	PerLayer  bool
	Layers    []Layer
	Quantized bool
	// KeepFP32 are the nodes whose tensors are the worst (up to three):
	// cc quantize --keep-fp32 leaves them in float.
	KeepFP32 []string
	// Unmatched are B's debug tensors A has no counterpart for.
	Unmatched []string
}

// Side is one engine's measurements.
type Side struct {
	Path string
	// Precision is the engine's ("fp32", "int8").
	Precision string
	Latency   Latency
	// LatenciesMS are the timed runs' latencies, in run order.
	LatenciesMS []float64
	// Accuracy is top-1 accuracy against the labels (NaN without).
	Accuracy float64
}

// Layer is one tensor's SQNR of B against A.
type Layer struct {
	// Name is the source model's value; Node the node that computed it.
	Name, Node string
	SQNR       float64
	layout     bool // a layout op's tensor: its error is its input's
}

// Compatible checks that two engines take the same inputs and give the
// same outputs (names, dtypes and shapes; debug outputs aside), naming
// the first difference.
func Compatible(a, b Engine) error {
	diff := func(what string, as, bs []engine.Binding) error {
		for _, x := range as {
			i := slices.IndexFunc(bs, func(y engine.Binding) bool { return y.Name == x.Name })
			if i < 0 {
				return fmt.Errorf("%s has %s %q (%s), %s does not (its %ss: %s)", a.Path, what, x.Name, x.ShapeString(), b.Path, what, names(bs))
			}
			y := bs[i]
			if x.DType != y.DType || !slices.Equal(x.Shape, y.Shape) || !slices.Equal(x.Dims, y.Dims) {
				return fmt.Errorf("%s %q is %s in %s, %s in %s", what, x.Name, x.ShapeString(), a.Path, y.ShapeString(), b.Path)
			}
		}
		for _, y := range bs {
			if !slices.ContainsFunc(as, func(x engine.Binding) bool { return x.Name == y.Name }) {
				return fmt.Errorf("%s has %s %q (%s), %s does not (its %ss: %s)", b.Path, what, y.Name, y.ShapeString(), a.Path, what, names(as))
			}
		}
		return nil
	}
	if err := diff("input", a.Engine.Inputs(), b.Engine.Inputs()); err != nil {
		return fmt.Errorf("the engines are not of the same model: %w", err)
	}
	if err := diff("output", modelOutputs(a.Engine), modelOutputs(b.Engine)); err != nil {
		return fmt.Errorf("the engines are not of the same model: %w", err)
	}
	return nil
}

func names(bs []engine.Binding) string {
	s := make([]string, len(bs))
	for i, b := range bs {
		s[i] = fmt.Sprintf("%q", b.Name)
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// modelOutputs are an engine's outputs less its debug outputs.
func modelOutputs(e *runtime.Engine) []engine.Binding {
	return slices.DeleteFunc(e.Outputs(), engine.Binding.IsDebug)
}

func debugOutputs(e *runtime.Engine) []engine.Binding {
	return slices.DeleteFunc(e.Outputs(), func(b engine.Binding) bool { return !b.IsDebug() })
}

// Run compares b against a on data: first one pass over all of it for
// agreement (and accuracy, and per-layer SQNR), then latency, the two
// engines taking turns run by run so that a drift in the machine's speed
// hits both.
func Run(a, b Engine, data Data, opts Options) (*Report, error) {
	if err := Compatible(a, b); err != nil {
		return nil, err
	}
	if data.Runs() == 0 {
		return nil, errors.New("no data to run")
	}
	r := &Report{A: Side{Path: a.Path, Precision: a.Engine.Meta.Precision, Accuracy: math.NaN()},
		B: Side{Path: b.Path, Precision: b.Engine.Meta.Precision, Accuracy: math.NaN()}, Runs: data.Runs()}
	for i := range data.Runs() {
		r.Samples += data.SamplesIn(i)
	}
	if opts.Labels != nil && len(opts.Labels) != r.Samples {
		return nil, fmt.Errorf("--labels: %d labels for %d samples", len(opts.Labels), r.Samples)
	}
	r.DebugOutputs = [2]int{len(debugOutputs(a.Engine)), len(debugOutputs(b.Engine))}
	var layers *layerSet
	if opts.PerLayer {
		var err error
		if layers, err = matchLayers(a, b); err != nil {
			return nil, err
		}
		r.PerLayer, r.Quantized = true, layers.quantized
	}
	ctxA, err := a.Engine.NewContext(runtime.Options{Threads: opts.Threads, Limits: opts.Limits})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.Path, err)
	}
	ctxB, err := b.Engine.NewContext(runtime.Options{Threads: opts.Threads, Limits: opts.Limits})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.Path, err)
	}
	r.Threads = max(ctxA.Threads(), ctxB.Threads())
	if err := r.agree(a, b, ctxA, ctxB, data, opts, layers); err != nil {
		return nil, err
	}
	if layers != nil {
		r.Layers, r.KeepFP32 = layers.result()
		r.Unmatched = layers.unmatched
	}
	if err := r.time(a, b, ctxA, ctxB, data, opts); err != nil {
		return nil, err
	}
	return r, nil
}

// run runs one engine on run i of the data, naming the engine and the
// data on failure.
func run(e Engine, ctx *runtime.Context, data Data, i int) (map[string]*ir.Tensor, error) {
	out, err := ctx.Run(data.Run(i))
	if err != nil {
		return nil, fmt.Errorf("%s: running %s: %w", e.Path, data.RunSource(i), err)
	}
	return out, nil
}

// agree runs both engines once over the data and accumulates the
// agreement of every model output, top-1 agreement and accuracy on the
// first, and each matched tensor's SQNR.
func (r *Report) agree(a, b Engine, ctxA, ctxB *runtime.Context, data Data, opts Options, layers *layerSet) error {
	outputs := modelOutputs(a.Engine)
	first := outputs[0].Name
	correct := [2]int{}
	sample := 0
	for i := range data.Runs() {
		outA, err := run(a, ctxA, data, i)
		if err != nil {
			return err
		}
		outB, err := run(b, ctxB, data, i)
		if err != nil {
			return err
		}
		for _, o := range outputs {
			x, y := outA[o.Name], outB[o.Name]
			if !slices.Equal(x.Dims, y.Dims) { // Compatible checked the bindings; a dynamic shape could still differ
				return fmt.Errorf("output %q is %s%v from %s, %s%v from %s on %s", o.Name, x.DType, x.Dims, a.Path, y.DType, y.Dims, b.Path, data.RunSource(i))
			}
			r.Agreement.Add(floats(x, nil), floats(y, nil))
		}
		x, y := outA[first], outB[first]
		if classes := topClasses(x); classes > 0 {
			fa, fb := floats(x, nil), floats(y, nil)
			r.Agreement.AddTop1(fa, fb, classes)
			if opts.Labels != nil {
				rows, n := len(fa)/classes, data.SamplesIn(i)
				if rows != n {
					return fmt.Errorf("--labels: output %q (%s%v) has %d rows of class scores for the %d samples of %s", first, x.DType, x.Dims, rows, n, data.RunSource(i))
				}
				for row := range rows {
					label := opts.Labels[sample+row]
					for k, f := range [][]float64{fa, fb} {
						if int64(Argmax(f[row*classes:(row+1)*classes])) == label {
							correct[k]++
						}
					}
				}
			}
		} else if opts.Labels != nil {
			return fmt.Errorf("--labels: output %q (%s%v) holds no class scores (its last dim must count at least 2 classes)", first, x.DType, x.Dims)
		}
		sample += data.SamplesIn(i)
		if layers != nil {
			layers.add(outA, outB, data.Run(i))
		}
	}
	if opts.Labels != nil {
		r.A.Accuracy = float64(correct[0]) / float64(r.Samples)
		r.B.Accuracy = float64(correct[1]) / float64(r.Samples)
	}
	return nil
}

// topClasses is the number of classes per row of an output of class
// scores (its last dim), or 0 when it has fewer than two.
func topClasses(t *ir.Tensor) int {
	if len(t.Dims) == 0 || t.Dims[len(t.Dims)-1] < 2 {
		return 0
	}
	return int(t.Dims[len(t.Dims)-1])
}

// time measures both engines' latency: warmup, then timed runs, A and B
// taking turns (and turns at going first), cycling through the data.
func (r *Report) time(a, b Engine, ctxA, ctxB *runtime.Context, data Data, opts Options) error {
	sides := [2]struct {
		e   Engine
		ctx *runtime.Context
		lat *[]float64
	}{{a, ctxA, &r.A.LatenciesMS}, {b, ctxB, &r.B.LatenciesMS}}
	for start, i := time.Now(), 0; time.Since(start) < opts.Warmup; i++ {
		for _, s := range sides {
			if _, err := run(s.e, s.ctx, data, i%data.Runs()); err != nil {
				return err
			}
		}
	}
	start := time.Now()
	for i := 0; i == 0 || time.Since(start) < opts.Duration; i++ {
		feeds := data.Run(i % data.Runs())
		for k := range 2 {
			s := sides[(i+k)%2]
			t := time.Now()
			if _, err := s.ctx.Run(feeds); err != nil {
				return fmt.Errorf("%s: running %s: %w", s.e.Path, data.RunSource(i%data.Runs()), err)
			}
			*s.lat = append(*s.lat, float64(time.Since(t).Nanoseconds())/1e6)
		}
	}
	r.A.Latency, r.B.Latency = Summarize(r.A.LatenciesMS), Summarize(r.B.LatenciesMS)
	r.Speedup = r.A.Latency.Median / r.B.Latency.Median
	return nil
}

// floats returns t's elements as float64, dequantized when d gives a
// scale: (q − zero point) · scale, computed in float32 as
// DequantizeLinear does.
func floats(t *ir.Tensor, d *engine.Debug) []float64 {
	out := make([]float64, t.Len())
	for i := range out {
		out[i] = t.Float64At(i)
	}
	if d == nil || len(d.Scale) == 0 {
		return out
	}
	stride, n := 1, 1
	if len(d.Scale) > 1 {
		n = int(t.Dims[d.Axis])
		stride = int(ir.Product(t.Dims[d.Axis+1:]))
	}
	for i, q := range out {
		c := (i / stride) % n
		zp := int32(0)
		if len(d.ZeroPoint) > 0 {
			zp = d.ZeroPoint[c]
		}
		out[i] = float64(float32(q-float64(zp)) * d.Scale[c])
	}
	return out
}
