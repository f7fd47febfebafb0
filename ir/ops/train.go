package ops

import (
	"fmt"
	"math"
	"slices"

	"github.com/kiln-ml/kiln/ir"
)

// The training family: ONNX's losses (NegativeLogLikelihoodLoss,
// SoftmaxCrossEntropyLoss) and the ops of ai.onnx.preview.training: the
// optimizers Adagrad, Adam and Momentum, and Gradient. The formulas are
// those of ONNX's operator documentation and its node tests' reference
// implementations.

// TrainingDomain is the domain of ONNX's training ops.
const TrainingDomain = "ai.onnx.preview.training"

// Gradient is the op type of ai.onnx.preview.training.Gradient.
const Gradient = "Gradient"

var lossTypes = floatTypes

var trainOps = []*Schema{
	lossRow("NegativeLogLikelihoodLoss", 12, 1), lossRow("NegativeLogLikelihoodLoss", 13, 1),
	lossRow("SoftmaxCrossEntropyLoss", 12, 2), lossRow("SoftmaxCrossEntropyLoss", 13, 2),
	optimizerRow("Adagrad", 2, []AttrDef{defFloat("decay_factor", 0), defFloat("epsilon", 0), defFloat("norm_coefficient", 0)}),
	optimizerRow("Adam", 3, []AttrDef{defFloat("alpha", 0.9), defFloat("beta", 0.999), defFloat("epsilon", 0),
		defFloat("norm_coefficient", 0), defFloat("norm_coefficient_post", 0)}),
	optimizerRow("Momentum", 2, []AttrDef{{Name: "alpha", Kind: ir.AttrFloat, Required: true}, {Name: "beta", Kind: ir.AttrFloat, Required: true},
		{Name: "mode", Kind: ir.AttrString, Required: true}, {Name: "norm_coefficient", Kind: ir.AttrFloat, Required: true}}),
	{Domain: TrainingDomain, Name: Gradient, Since: 1, MinInputs: 1, MaxInputs: -1, MinOutputs: 1, MaxOutputs: -1,
		Attrs: []AttrDef{{Name: "xs", Kind: ir.AttrStrings, Required: true}, {Name: "y", Kind: ir.AttrString, Required: true},
			{Name: "zs", Kind: ir.AttrStrings}},
		Types: floatTypes, Infer: inferGradient, Run: runGradient},
}

func init() { register(trainOps) }

// lossRow is a loss: (input or scores, target, optional weight) ->
// (loss, and for SoftmaxCrossEntropyLoss the optional log_prob).
func lossRow(name string, since int64, maxOut int) *Schema {
	return &Schema{Name: name, Since: since, MinInputs: 2, MaxInputs: 3, MinOutputs: 1, MaxOutputs: maxOut,
		Attrs: []AttrDef{{Name: "ignore_index", Kind: ir.AttrInt}, defString("reduction", "mean")},
		Types: lossTypes, Infer: inferLoss, Run: runLoss}
}

// LossSpec is a loss node's attributes, resolved.
type LossSpec struct {
	Reduction string // "none", "sum" or "mean"
	// Ignore is the target value whose elements count for nothing, when
	// HasIgnore.
	Ignore    int64
	HasIgnore bool
}

// LossSpec resolves a loss node's attributes.
func (a attrs) lossSpec() (LossSpec, error) {
	s := LossSpec{Reduction: a.String("reduction"), HasIgnore: a.Has("ignore_index")}
	if s.HasIgnore {
		s.Ignore = a.Int("ignore_index")
	}
	switch s.Reduction {
	case "none", "sum", "mean":
	default:
		return s, fmt.Errorf("reduction %q is not none, sum or mean", s.Reduction)
	}
	return s, nil
}

// LossSpec returns the node's resolved attributes (for backends).
func (c *KernelContext) LossSpec() (LossSpec, error) { return c.lossSpec() }

func inferLoss(c *InferContext) error {
	x, t := c.In(0), c.In(1)
	spec, err := c.lossSpec()
	if err != nil {
		return c.Errorf("%v", err)
	}
	if t.Elem != ir.Undefined && t.Elem != ir.Int32 && t.Elem != ir.Int64 {
		return c.Errorf("target is %s, want int32 or int64", t.Elem)
	}
	if x.Shape.Ranked && len(x.Shape.Dims) < 2 {
		return c.Errorf("input has rank %d, want [N, C, ...]", len(x.Shape.Dims))
	}
	if x.Shape.Ranked && t.Shape.Ranked {
		if len(t.Shape.Dims) != len(x.Shape.Dims)-1 {
			return c.Errorf("target %s does not fit input %s: want [N, d1, ...] for [N, C, d1, ...]", t.Shape, x.Shape)
		}
	}
	if c.HasInput(2) {
		if w := c.In(2); w.Shape.Ranked && len(w.Shape.Dims) != 1 {
			return c.Errorf("weight has shape %s, want [C]", w.Shape)
		}
	}
	loss := ir.TensorType(x.Elem, ir.S())
	if spec.Reduction == "none" {
		loss = ir.TensorType(x.Elem, t.Shape.Clone())
	}
	c.Set(0, loss)
	if len(c.Node.Outputs) > 1 {
		c.Set(1, x.Clone())
	}
	return nil
}

// runLoss computes either loss: SoftmaxCrossEntropyLoss is the
// NegativeLogLikelihoodLoss of the scores' log-softmax along axis 1.
func runLoss(c *KernelContext) error {
	x, t := c.In(0), c.In(1)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	spec, err := c.lossSpec()
	if err != nil {
		return c.Errorf("%v", err)
	}
	if len(x.Dims) < 2 || len(t.Dims) != len(x.Dims)-1 || t.Dims[0] != x.Dims[0] {
		return c.Errorf("input %v and target %v: want [N, C, d1, ...] and [N, d1, ...]", ir.FormatList(x.Dims), ir.FormatList(t.Dims))
	}
	for i := 2; i < len(x.Dims); i++ {
		if t.Dims[i-1] != x.Dims[i] {
			return c.Errorf("input %v and target %v: want [N, C, d1, ...] and [N, d1, ...]", ir.FormatList(x.Dims), ir.FormatList(t.Dims))
		}
	}
	n, classes := x.Dims[0], x.Dims[1]
	inner := ir.Product(x.Dims[2:])
	v := Float64s(x)
	if c.Node.OpType == "SoftmaxCrossEntropyLoss" {
		line := make([]float64, classes)
		for b := int64(0); b < n; b++ {
			for d := int64(0); d < inner; d++ {
				for k := range line {
					line[k] = v[(b*classes+int64(k))*inner+d]
				}
				logSoftmax(line)
				for k := range line {
					v[(b*classes+int64(k))*inner+d] = line[k]
				}
			}
		}
		if len(c.Node.Outputs) > 1 && c.Node.Outputs[1] != nil {
			c.Set(1, FromFloat64s(x.DType, x.Dims, v))
		}
	}
	var weight []float64
	if w := c.In(2); w != nil {
		if len(w.Dims) != 1 || w.Dims[0] != classes {
			return c.Errorf("weight has shape %v, want [%d]", ir.FormatList(w.Dims), classes)
		}
		weight = Float64s(w)
	}
	targets := Int64s(t)
	loss := make([]float64, len(targets))
	var sum, wsum float64
	for i, k := range targets {
		if spec.HasIgnore && k == spec.Ignore {
			continue
		}
		if k < 0 || k >= classes {
			return c.Errorf("target %d at %d is outside [0, %d)", k, i, classes)
		}
		b, d := int64(i)/inner, int64(i)%inner
		w := 1.0
		if weight != nil {
			w = weight[k]
		}
		loss[i] = -v[(b*classes+k)*inner+d] * w
		sum += loss[i]
		wsum += w
	}
	switch spec.Reduction {
	case "none":
		c.Set(0, FromFloat64s(x.DType, t.Dims, loss))
	case "sum":
		c.Set(0, FromFloat64s(x.DType, nil, []float64{sum}))
	default:
		c.Set(0, FromFloat64s(x.DType, nil, []float64{sum / wsum}))
	}
	return nil
}

// optimizerRow is an optimizer of ai.onnx.preview.training: inputs R (the
// learning rate), T (the step count), then groups of n tensors each (X,
// G, and the state: Adagrad's H, Momentum's V, Adam's V and H); outputs
// the new X and state, group by group. groups counts the output groups.
func optimizerRow(name string, groups int, attrs []AttrDef) *Schema {
	return &Schema{Domain: TrainingDomain, Name: name, Since: 1, MinInputs: 2 + groups + 1, MaxInputs: -1,
		MinOutputs: groups, MaxOutputs: -1, Attrs: attrs, Types: []ir.DType{ir.Float32, ir.Float64},
		Infer: inferOptimizer(groups), Run: runOptimizer(groups)}
}

// OptimizerTensors returns how many tensors n an optimizer node updates,
// from its arity: 2 + (groups+1)·n inputs, groups·n outputs.
func OptimizerTensors(node *ir.Node, groups int) (int, error) {
	ins, outs := len(node.Inputs)-2, len(node.Outputs)
	if ins <= 0 || ins%(groups+1) != 0 || outs != ins/(groups+1)*groups {
		return 0, fmt.Errorf("%s: %d inputs and %d outputs: want 2 + %d·n inputs and %d·n outputs", node, len(node.Inputs), outs, groups+1, groups)
	}
	return ins / (groups + 1), nil
}

// OptimizerGroups is the number of output groups of each optimizer.
var OptimizerGroups = map[string]int{"Adagrad": 2, "Adam": 3, "Momentum": 2}

func inferOptimizer(groups int) func(c *InferContext) error {
	return func(c *InferContext) error {
		n, err := OptimizerTensors(c.Node, groups)
		if err != nil {
			return err
		}
		if r := c.In(0); r.Shape.Ranked && r.Shape.NumElements() != 1 {
			return c.Errorf("R has shape %s, want a scalar", r.Shape)
		}
		if t := c.In(1); t.Elem != ir.Undefined && t.Elem != ir.Int64 {
			return c.Errorf("T is %s, want int64", t.Elem)
		}
		if c.Node.OpType == "Momentum" {
			if m := c.String("mode"); m != "standard" && m != "nesterov" {
				return c.Errorf("mode %q is not standard or nesterov", m)
			}
		}
		for g := 0; g < groups; g++ {
			src := 2 + n*g // X for group 0, then the state
			if g > 0 {
				src = 2 + n*(g+1)
			}
			for i := 0; i < n; i++ {
				c.Set(g*n+i, c.In(src+i).Clone())
			}
		}
		return nil
	}
}

func runOptimizer(groups int) func(c *KernelContext) error {
	return func(c *KernelContext) error {
		n, err := OptimizerTensors(c.Node, groups)
		if err != nil {
			return err
		}
		if err := checkType(c, c.In(0).DType); err != nil {
			return err
		}
		if c.In(0).Len() != 1 || c.In(1).Len() != 1 {
			return c.Errorf("R and T must be scalars, got %v and %v", ir.FormatList(c.In(0).Dims), ir.FormatList(c.In(1).Dims))
		}
		r, t := c.In(0).Float64At(0), Int64s(c.In(1))[0]
		for i := 0; i < n; i++ {
			tensors := make([]*ir.Tensor, groups+1)
			vals := make([][]float64, groups+1)
			for g := range tensors {
				tensors[g] = c.In(2 + g*n + i)
				if !slices.Equal(tensors[g].Dims, tensors[0].Dims) {
					return c.Errorf("input %d has shape %v but X has %v", 2+g*n+i, ir.FormatList(tensors[g].Dims), ir.FormatList(tensors[0].Dims))
				}
				vals[g] = Float64s(tensors[g])
			}
			outs := OptimizerStep(c.attrs, c.Node.OpType, r, t, vals)
			for g, o := range outs {
				c.Set(g*n+i, FromFloat64s(tensors[0].DType, tensors[0].Dims, o))
			}
		}
		return nil
	}
}

// OptimizerStep applies one optimizer update to one tensor: in holds X, G
// and the state, out the new X and state.
func OptimizerStep(a attrs, op string, r float64, t int64, in [][]float64) [][]float64 {
	f := func(name string) float64 { return float64(a.Float(name)) }
	x, g := in[0], in[1]
	norm := f("norm_coefficient")
	greg := make([]float64, len(x))
	for k := range x {
		greg[k] = norm*x[k] + g[k]
	}
	xNew := make([]float64, len(x))
	switch op {
	case "Adagrad":
		rr := r / (1 + float64(t)*f("decay_factor"))
		h := make([]float64, len(x))
		for k := range x {
			h[k] = in[2][k] + greg[k]*greg[k]
			xNew[k] = x[k] - rr*greg[k]/(math.Sqrt(h[k])+f("epsilon"))
		}
		return [][]float64{xNew, h}
	case "Momentum":
		alpha, beta := f("alpha"), f("beta")
		if t <= 0 {
			beta = 1
		}
		nesterov := a.String("mode") == "nesterov"
		v := make([]float64, len(x))
		for k := range x {
			v[k] = alpha*in[2][k] + beta*greg[k]
			if nesterov {
				xNew[k] = x[k] - r*(greg[k]+alpha*v[k])
			} else {
				xNew[k] = x[k] - r*v[k]
			}
		}
		return [][]float64{xNew, v}
	default: // Adam
		alpha, beta, eps, post := f("alpha"), f("beta"), f("epsilon"), f("norm_coefficient_post")
		rr := r
		if t > 0 {
			rr = r * math.Sqrt(1-math.Pow(beta, float64(t))) / (1 - math.Pow(alpha, float64(t)))
		}
		v, h := make([]float64, len(x)), make([]float64, len(x))
		for k := range x {
			v[k] = alpha*in[2][k] + (1-alpha)*greg[k]
			h[k] = beta*in[3][k] + (1-beta)*greg[k]*greg[k]
			xNew[k] = (1 - post) * (x[k] - rr*v[k]/(math.Sqrt(h[k])+eps))
		}
		return [][]float64{xNew, v, h}
	}
}

// Gradient (ai.onnx.preview.training) differentiates the value its y
// attribute names with respect to the values xs names, in the graph that
// holds the node; its inputs are those xs and then the zs. It is a
// statement about its graph, not a function of its inputs, so no kernel
// can compute it alone: passes/autodiff expands each Gradient node into
// the graph's gradient ops (the compiler's pipeline and `cc test` do so
// before anything runs), and this kernel only says so.
func inferGradient(c *InferContext) error {
	xs := c.Strings("xs")
	if len(xs) != len(c.Node.Outputs) {
		return c.Errorf("has %d outputs for %d xs", len(c.Node.Outputs), len(xs))
	}
	if len(c.Node.Inputs) != len(xs)+len(c.Strings("zs")) {
		return c.Errorf("has %d inputs, want the %d xs and %d zs", len(c.Node.Inputs), len(xs), len(c.Strings("zs")))
	}
	for i := range xs {
		c.Set(i, c.In(i).Clone())
	}
	return nil
}

func runGradient(c *KernelContext) error {
	return c.Errorf("Gradient differentiates its graph: expand it with passes/autodiff (autodiff.ExpandGradients) before running the graph")
}
