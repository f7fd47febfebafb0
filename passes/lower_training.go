package passes

import (
	"fmt"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/passes/autodiff"
)

// lowerTrainingPass rewrites ONNX's training ops into the primitive ops
// every backend compiles, as their ONNX function bodies would: the losses
// into LogSoftmax, GatherElements and reductions, the optimizers of
// ai.onnx.preview.training into elementwise updates (which
// fuse-elementwise then fuses), and Gradient nodes into their gradient
// graphs (passes/autodiff). The reference executor runs the ops
// themselves: conformance tests compare the two.
func lowerTrainingPass(c *Context, m *ir.Model) error {
	if err := autodiff.ExpandGradients(m); err != nil {
		return err
	}
	var todo []*ir.Node
	for _, n := range m.Graph.Nodes {
		if lowerable(n) {
			todo = append(todo, n)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	if m.Opset("") == 0 {
		// A model of training ops alone (an optimizer step) imports no
		// ONNX opset: the primitive ops need one.
		m.OpsetImports = append(m.OpsetImports, ir.OpsetImport{Domain: "", Version: lowerOpset})
	}
	known, err := ops.InferShapesWithin(m, c.Limits)
	if err != nil {
		return err
	}
	b := autodiff.NewBuilder(m, known, "lower/")
	for _, n := range todo {
		var outs []*ir.Value
		var err error
		if n.Domain == "" || n.Domain == "ai.onnx" {
			outs, err = lowerLoss(b, n)
		} else {
			outs, err = lowerOptimizer(b, n)
		}
		if err == nil {
			err = b.Err()
		}
		if err != nil {
			return fmt.Errorf("lowering %s: %w", n, err)
		}
		removeNodes(m.Graph, n)
		for i, o := range n.Outputs {
			if o != nil && outs[i] != nil {
				// The new value takes the old one's place and name (it may
				// be a graph output).
				m.Graph.ReplaceUses(o, outs[i])
				outs[i].Name = o.Name
			}
		}
	}
	return m.Graph.TopoSort()
}

// lowerOpset is the ONNX opset imported for the primitive ops of a model
// that imports none.
const lowerOpset = 17

func lowerable(n *ir.Node) bool {
	switch {
	case n.Domain == "" || n.Domain == "ai.onnx":
		return n.OpType == "NegativeLogLikelihoodLoss" || n.OpType == "SoftmaxCrossEntropyLoss"
	case n.Domain == ops.TrainingDomain:
		_, ok := ops.OptimizerGroups[n.OpType]
		return ok
	}
	return false
}

func removeNodes(g *ir.Graph, n *ir.Node) {
	for i, m := range g.Nodes {
		if m == n {
			g.Nodes = append(g.Nodes[:i], g.Nodes[i+1:]...)
			return
		}
	}
}

// lowerLoss: loss[n, d...] = -logp[n, target, d...]·weight[target], 0
// where the target is ignore_index; summed, or averaged over the weights.
func lowerLoss(b *autodiff.Builder, n *ir.Node) ([]*ir.Value, error) {
	s, err := b.Opsets.Schema(n)
	if err != nil {
		return nil, err
	}
	kc := ops.NewKernelContext(s, n, b.Opsets[n.Domain], nil)
	spec, err := kc.LossSpec()
	if err != nil {
		return nil, err
	}
	x, t, w := n.Input(0), n.Input(1), n.Input(2)
	r := x.Type.Shape.Rank()
	if r < 2 {
		return nil, fmt.Errorf("the input's rank must be known, at least 2")
	}
	d := x.Type.Elem
	outs := make([]*ir.Value, len(n.Outputs))
	logp := x
	if n.OpType == "SoftmaxCrossEntropyLoss" {
		if b.Opset() >= 13 || r == 2 {
			logp = b.Op("LogSoftmax", []*ir.Value{x}, ir.AttrI("axis", 1))
		} else {
			// Before opset 13 LogSoftmax runs over every axis from its
			// axis on: move the classes last.
			perm, inv := []int64{0}, make([]int64, r)
			for a := 2; a < r; a++ {
				perm = append(perm, int64(a))
			}
			perm = append(perm, 1)
			for i, p := range perm {
				inv[p] = int64(i)
			}
			ls := b.Op("LogSoftmax", []*ir.Value{b.Transpose(x, perm...)}, ir.AttrI("axis", int64(r-1)))
			logp = b.Transpose(ls, inv...)
		}
		if len(outs) > 1 {
			outs[1] = logp
		}
	}
	tsafe := t
	var valid *ir.Value
	if spec.HasIgnore {
		ii := b.Const("ignore_index", ops.FromFloat64s(t.Type.Elem, nil, []float64{float64(spec.Ignore)}))
		valid = b.Op("Not", []*ir.Value{b.Op("Equal", []*ir.Value{t, ii})})
		tsafe = b.Where(valid, t, b.Const("zero_index", ops.FromFloat64s(t.Type.Elem, nil, []float64{0})))
	}
	picked := b.Op("GatherElements", []*ir.Value{logp, b.Unsqueeze(tsafe, 1)}, ir.AttrI("axis", 1))
	loss := b.Neg(b.Squeeze(picked, 1))
	var weight *ir.Value
	if w != nil {
		weight = b.Op("Gather", []*ir.Value{w, tsafe}, ir.AttrI("axis", 0))
	}
	if valid != nil {
		if weight == nil {
			weight = b.Cast(valid, d)
		} else {
			weight = b.Where(valid, weight, b.Scalar(d, 0))
		}
	}
	if weight != nil {
		loss = b.Mul(loss, weight)
	}
	switch spec.Reduction {
	case "sum":
		loss = b.ReduceSum(loss, nil, false)
	case "mean":
		if weight != nil {
			loss = b.Div(b.ReduceSum(loss, nil, false), b.ReduceSum(weight, nil, false))
		} else {
			loss = b.Reduce("ReduceMean", loss, nil, false)
		}
	}
	outs[0] = loss
	return outs, nil
}

// lowerOptimizer writes one optimizer step per tensor as elementwise ops,
// with the formulas of ir/ops.OptimizerStep.
func lowerOptimizer(b *autodiff.Builder, n *ir.Node) ([]*ir.Value, error) {
	groups := ops.OptimizerGroups[n.OpType]
	count, err := ops.OptimizerTensors(n, groups)
	if err != nil {
		return nil, err
	}
	s, err := b.Opsets.Schema(n)
	if err != nil {
		return nil, err
	}
	kc := ops.NewKernelContext(s, n, b.Opsets[n.Domain], nil)
	f := func(name string) float64 { return float64(kc.Float(name)) }
	r, t := n.Input(0), n.Input(1)
	if r.Type.Shape.Rank() != 0 {
		r = b.Op("Reshape", []*ir.Value{r, b.Int64s()})
	}
	positive := b.Op("Greater", []*ir.Value{t, b.Const("zero_step", ir.Scalar(ir.Int64, int64(0)))})
	outs := make([]*ir.Value, len(n.Outputs))
	for i := 0; i < count; i++ {
		x, g := n.Input(2+i), n.Input(2+count+i)
		d := x.Type.Elem
		k := func(v float64) *ir.Value { return b.Scalar(d, v) }
		rr := r
		if r.Type.Elem != d {
			rr = b.Cast(r, d)
		}
		tf := b.Cast(t, d)
		greg := g
		if norm := f("norm_coefficient"); norm != 0 {
			greg = b.Add(b.Mul(k(norm), x), g)
		}
		sq := b.Mul(greg, greg)
		switch n.OpType {
		case "Adagrad":
			h := b.Add(n.Input(2+2*count+i), sq)
			lr := b.Div(rr, b.Add(k(1), b.Mul(tf, k(f("decay_factor")))))
			den := b.Add(b.Op("Sqrt", []*ir.Value{h}), k(f("epsilon")))
			outs[i] = b.Sub(x, b.Div(b.Mul(lr, greg), den))
			outs[count+i] = h
		case "Momentum":
			beta := b.Where(positive, k(f("beta")), k(1))
			v := b.Add(b.Mul(k(f("alpha")), n.Input(2+2*count+i)), b.Mul(beta, greg))
			step := v
			if kc.String("mode") == "nesterov" {
				step = b.Add(greg, b.Mul(k(f("alpha")), v))
			} else if kc.String("mode") != "standard" {
				return nil, fmt.Errorf("mode %q is not standard or nesterov", kc.String("mode"))
			}
			outs[i] = b.Sub(x, b.Mul(rr, step))
			outs[count+i] = v
		case "Adam":
			alpha, beta := f("alpha"), f("beta")
			v := b.Add(b.Mul(k(alpha), n.Input(2+2*count+i)), b.Mul(k(1-alpha), greg))
			h := b.Add(b.Mul(k(beta), n.Input(2+3*count+i)), b.Mul(k(1-beta), sq))
			pow := func(base float64) *ir.Value { return b.Op("Pow", []*ir.Value{k(base), tf}) }
			corrected := b.Div(b.Mul(rr, b.Op("Sqrt", []*ir.Value{b.Sub(k(1), pow(beta))})), b.Sub(k(1), pow(alpha)))
			lr := b.Where(positive, corrected, rr)
			den := b.Add(b.Op("Sqrt", []*ir.Value{h}), k(f("epsilon")))
			xn := b.Sub(x, b.Mul(lr, b.Div(v, den)))
			if post := f("norm_coefficient_post"); post != 0 {
				xn = b.Mul(k(1-post), xn)
			}
			outs[i], outs[count+i], outs[2*count+i] = xn, v, h
		}
	}
	return outs, nil
}
