package autodiff

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// arg is one input of a case: a float64 tensor drawn uniformly from
// [lo, hi] (default [-1, 1]; never all zeros) that is differentiated, or a
// constant (data) that is not.
type arg struct {
	dims   []int64
	lo, hi float64
	data   *ir.Tensor
	absent bool
}

func in(dims ...int64) arg { return arg{dims: dims} }

// pos draws from [0.5, 2]: ops defined for positive inputs only.
func pos(dims ...int64) arg { return arg{dims: dims, lo: 0.5, hi: 2} }

func within(lo, hi float64, dims ...int64) arg { return arg{dims: dims, lo: lo, hi: hi} }

func ints(vals ...int64) arg {
	return arg{data: ir.FromSlice(ir.Int64, []int64{int64(len(vals))}, vals)}
}

func tensor(t *ir.Tensor) arg { return arg{data: t} }

var none = arg{absent: true}

// gradCase is one op application whose gradient is checked against
// central finite differences.
type gradCase struct {
	op, domain string
	opset      int64 // of the default domain; 17 when 0
	attrs      []*ir.Attribute
	args       []arg
	outs       int // 1 when 0
}

func (c gradCase) String() string {
	var shapes []string
	for _, a := range c.args {
		switch {
		case a.absent:
			shapes = append(shapes, "-")
		case a.data != nil:
			shapes = append(shapes, fmt.Sprintf("const%v", a.data.Dims))
		default:
			shapes = append(shapes, fmt.Sprint(a.dims))
		}
	}
	var attrs []string
	for _, a := range c.attrs {
		attrs = append(attrs, a.Name)
	}
	return fmt.Sprintf("%s-%d(%s)<%s>", c.op, c.opset, strings.Join(shapes, ", "), strings.Join(attrs, ","))
}

// build makes the model L = Σ_k sum(y_k · R_k), with R_k random, and the
// gradient of L with respect to each differentiated input as outputs
// grad_i.
func (c gradCase) build(rng *rand.Rand) (m *ir.Model, feeds map[string]*ir.Tensor, wrt []string, err error) {
	g := ir.NewGraph("case")
	feeds = map[string]*ir.Tensor{}
	var ins []*ir.Value
	for i, a := range c.args {
		name := fmt.Sprintf("x%d", i)
		switch {
		case a.absent:
			ins = append(ins, nil)
		case a.data != nil:
			ins = append(ins, g.AddInitializer(name, a.data.Clone()))
		default:
			lo, hi := a.lo, a.hi
			if lo == 0 && hi == 0 {
				lo, hi = -1, 1
			}
			t := ir.NewTensor(ir.Float64, a.dims...)
			d := ir.Data[float64](t)
			for k := range d {
				d[k] = lo + (hi-lo)*rng.Float64()
			}
			feeds[name] = t
			ins = append(ins, g.AddInput(name, t.Type()))
			wrt = append(wrt, name)
		}
	}
	outs := max(c.outs, 1)
	n := g.AddNode(c.op, ins, outs, c.attrs...)
	n.Domain = c.domain
	opset := c.opset
	if opset == 0 {
		opset = 17
	}
	m = ir.NewModel(g, opset)
	if c.domain != "" {
		m.OpsetImports = append(m.OpsetImports, ir.OpsetImport{Domain: c.domain, Version: 1})
	}
	g.SetOutputs(n.Outputs...)
	known, err := ops.InferShapes(m)
	if err != nil {
		return nil, nil, nil, err
	}
	b := NewBuilder(m, known, "loss/")
	var terms []*ir.Value
	for _, y := range n.Outputs {
		if !y.Type.Elem.IsFloat() {
			continue
		}
		dims, ok := y.Type.Shape.Ints()
		if !ok {
			return nil, nil, nil, fmt.Errorf("output %q has no static shape", y.Name)
		}
		r := ir.NewTensor(ir.Float64, dims...)
		for k, d := 0, ir.Data[float64](r); k < len(d); k++ {
			d[k] = rng.NormFloat64()
		}
		terms = append(terms, b.ReduceSum(b.Mul(y, b.Const("r", r)), nil, false))
	}
	loss := terms[0]
	if len(terms) > 1 {
		loss = b.Op("Sum", terms)
	}
	if b.Err() != nil {
		return nil, nil, nil, b.Err()
	}
	var xs []*ir.Value
	for _, v := range g.Inputs {
		xs = append(xs, v)
	}
	grads, err := backward(NewBuilder(m, known, "grad/"), []*ir.Value{loss}, []*ir.Value{b.Scalar(ir.Float64, 1)}, xs)
	if err != nil {
		return nil, nil, nil, err
	}
	loss.Name = "loss"
	outputs := []*ir.Value{loss}
	for i, gr := range grads {
		if gr == nil {
			return nil, nil, nil, fmt.Errorf("no gradient for input %s", wrt[i])
		}
		gr = b.Op("Identity", []*ir.Value{gr})
		gr.Name = "grad_" + wrt[i]
		outputs = append(outputs, gr)
	}
	g.SetOutputs(outputs...)
	if _, err := ops.InferShapes(m); err != nil {
		return nil, nil, nil, err
	}
	return m, feeds, wrt, nil
}

// checkGradient compares each gradient with central differences of the
// loss; it returns the worst relative L2 error.
func checkGradient(t *testing.T, c gradCase, seed int64) float64 {
	rng := rand.New(rand.NewSource(seed))
	m, feeds, wrt, err := c.build(rng)
	require.NoError(t, err, "%v", c)
	require.NoError(t, m.Verify(), "%v", c)
	e, err := reference.New(m)
	require.NoError(t, err, "%v", c)
	got, err := e.Run(feeds)
	require.NoError(t, err, "%v", c)
	lossAt := func() float64 {
		out, err := e.Run(feeds)
		require.NoError(t, err)
		return out["loss"].Float64At(0)
	}
	worst := 0.0
	for _, name := range wrt {
		x := ir.Data[float64](feeds[name])
		ad := ir.Data[float64](got["grad_"+name])
		require.Len(t, ad, len(x), "%v: gradient of %s", c, name)
		var num, den float64
		for k := range x {
			const h = 1e-5
			x0 := x[k]
			x[k] = x0 + h
			up := lossAt()
			x[k] = x0 - h
			down := lossAt()
			x[k] = x0
			fd := (up - down) / (2 * h)
			num += (ad[k] - fd) * (ad[k] - fd)
			den += fd * fd
		}
		require.Greater(t, den, 1e-12, "%v: the gradient of %s is zero: the case tests nothing", c, name)
		rel := math.Sqrt(num / den)
		assert.LessOrEqual(t, rel, 1e-6, "%v: gradient of %s: relative error %.3g", c, name, rel)
		worst = max(worst, rel)
	}
	return worst
}

// TestRulesFiniteDifferences checks every case; TestEveryRuleHasCases
// makes sure each rule has one.
func TestRulesFiniteDifferences(t *testing.T) {
	for i, c := range gradCases {
		t.Run(c.String(), func(t *testing.T) {
			checkGradient(t, c, int64(1000+i))
		})
	}
}

func TestEveryRuleHasCases(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range gradCases {
		covered[qualified(c.domain, c.op)] = true
	}
	for _, op := range Differentiable() {
		assert.True(t, covered[op], "rule %s has no finite-difference case in gradCases", op)
	}
}

// Every op of the registry has a rule or a reason not to.
func TestEveryOpHasADecision(t *testing.T) {
	for _, s := range ops.All() {
		rule, why, ok := Lookup(s.Domain, s.Name)
		if assert.True(t, ok, "%s has no gradient entry: add a rule or notDifferentiable with a reason", qualified(s.Domain, s.Name)) {
			assert.True(t, rule != nil || why != "", qualified(s.Domain, s.Name))
		}
	}
	for k := range rules {
		_, err := ops.Lookup(k.domain, k.op, 1<<30)
		assert.NoError(t, err, "a gradient entry for an op the registry lacks")
	}
}
