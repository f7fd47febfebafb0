package main

import (
	"fmt"
	"math"
	"math/rand"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// opset is the ONNX opset every generated model imports: the one PyTorch
// 2.x exports by default, the first with LayerNormalization.
const opset = 17

// net builds one model through the ir builder and runs each node on the
// reference executor as it is added, on the model's test input. Knowing
// every intermediate lets batch norms take statistics estimated on the
// values that reach them (as the zoo re-estimated its models' running
// statistics), so activations stay O(1) at any depth: a random network
// whose values blow up or vanish saturates its Sigmoids and HardSwishes,
// leaves nothing for `infer check` to compare and, near zero, runs on
// denormals, which times the CPU's microcode rather than the kernels.
type net struct {
	g     *ir.Graph
	rng   *rand.Rand
	input *ir.Tensor
	val   map[*ir.Value]*ir.Tensor
	// foldBN folds each batch norm into the conv before it, as PyTorch's
	// exporter does in eval mode; false keeps BatchNormalization nodes.
	foldBN bool
	// bnChannels counts the channels of every batch norm, folded or not,
	// so a test can relate the initializers to torchvision's parameters.
	bnChannels int64
	err        error
}

// newNet starts a graph with one float32 input "input" of the given dims
// holding N(0,1) data drawn from the seed.
func newNet(name string, seed int64, foldBN bool, dims ...int64) (*net, *ir.Value) {
	b := &net{g: ir.NewGraph(name), rng: rand.New(rand.NewSource(seed)), val: map[*ir.Value]*ir.Tensor{}, foldBN: foldBN}
	b.input = b.normal(1, dims...)
	x := b.g.AddInput("input", ir.TensorType(ir.Float32, ir.S(dims...)))
	b.val[x] = b.input
	return b, x
}

// normal is a tensor of N(0, std²) samples.
func (b *net) normal(std float64, dims ...int64) *ir.Tensor {
	data := make([]float32, ir.Product(dims))
	for i := range data {
		data[i] = float32(b.rng.NormFloat64() * std)
	}
	return ir.FromSlice(ir.Float32, dims, data)
}

// uniform is a tensor of U(lo, hi) samples.
func (b *net) uniform(lo, hi float64, dims ...int64) *ir.Tensor {
	data := make([]float32, ir.Product(dims))
	for i := range data {
		data[i] = float32(lo + (hi-lo)*b.rng.Float64())
	}
	return ir.FromSlice(ir.Float32, dims, data)
}

// param adds a weight initializer.
func (b *net) param(prefix string, t *ir.Tensor) *ir.Value {
	v := b.g.AddInitializer(b.g.UniqueName(prefix), t)
	b.val[v] = t
	return v
}

// scalar adds a 0-d float constant, as PyTorch exports a Python float.
func (b *net) scalar(f float32) *ir.Value { return b.param("const", ir.Scalar(ir.Float32, f)) }

// op appends a single-output node and computes its value. After the first
// failure it keeps building (on nil values) and the error stays in b.err.
func (b *net) op(opType string, inputs []*ir.Value, attrs ...*ir.Attribute) *ir.Value {
	n := b.g.AddNode(opType, inputs, 1, attrs...)
	if b.err == nil {
		b.err = b.eval(n)
	}
	return n.Outputs[0]
}

// eval runs node n alone on the reference executor: a one-node model
// whose inputs are the values n reads.
func (b *net) eval(n *ir.Node) error {
	g := ir.NewGraph("step")
	feeds := map[string]*ir.Tensor{}
	seen := map[*ir.Value]*ir.Value{}
	ins := make([]*ir.Value, len(n.Inputs))
	for i, v := range n.Inputs {
		if v == nil {
			continue
		}
		if seen[v] == nil {
			t := b.val[v]
			if t == nil {
				return fmt.Errorf("%s reads %q, which has no value", n, v.Name)
			}
			if v.Const != nil {
				seen[v] = g.AddInitializer(v.Name, v.Const)
			} else {
				seen[v] = g.AddInput(v.Name, t.Type())
				feeds[v.Name] = t
			}
		}
		ins[i] = seen[v]
	}
	out := g.Apply(n.OpType, ins, n.Attrs...)
	g.SetOutputs(out)
	e, err := reference.New(ir.NewModel(g, opset))
	if err != nil {
		return fmt.Errorf("%s: %w", n, err)
	}
	res, err := e.Run(feeds)
	if err != nil {
		return fmt.Errorf("%s: %w", n, err)
	}
	b.val[n.Outputs[0]] = res[out.Name]
	return nil
}

// dims is the shape of x's value ([1] after a failure, so that building
// can go on to report the first error).
func (b *net) dims(x *ir.Value) []int64 {
	if t := b.val[x]; t != nil {
		return t.Dims
	}
	return []int64{1, 1, 1, 1}
}

// heNormal is a weight tensor with He initialization: N(0, 2/fanIn), the
// variance that keeps a ReLU network's activations at scale.
func (b *net) heNormal(fanIn int64, dims ...int64) *ir.Tensor {
	return b.normal(math.Sqrt(2/float64(fanIn)), dims...)
}

// bias is PyTorch's default bias initialization, U(±1/√fanIn).
func (b *net) bias(fanIn int64, n int64) *ir.Tensor {
	r := 1 / math.Sqrt(float64(fanIn))
	return b.uniform(-r, r, n)
}

// conv is a Conv with He-initialized weights: a k×k kernel, stride, pads
// (k-1)/2 unless pad says otherwise, groups; with a bias when withBias.
func (b *net) conv(x *ir.Value, cout, k, stride, groups int64, withBias bool, pad ...int64) *ir.Value {
	cin := b.dims(x)[1]
	p := (k - 1) / 2
	if len(pad) > 0 {
		p = pad[0]
	}
	w := b.param("conv.weight", b.heNormal(cin/groups*k*k, cout, cin/groups, k, k))
	ins := []*ir.Value{x, w}
	if withBias {
		ins = append(ins, b.param("conv.bias", b.bias(cin/groups*k*k, cout)))
	}
	return b.op("Conv", ins, ir.AttrIs("dilations", 1, 1), ir.AttrI("group", groups),
		ir.AttrIs("kernel_shape", k, k), ir.AttrIs("pads", p, p, p, p), ir.AttrIs("strides", stride, stride))
}

// convBN is a bias-free Conv followed by batch normalization whose running
// statistics are those of the conv's output on the test input: folded into
// the conv's weights and a new bias when b.foldBN, else a
// BatchNormalization node.
func (b *net) convBN(x *ir.Value, cout, k, stride, groups int64, pad ...int64) *ir.Value {
	y := b.conv(x, cout, k, stride, groups, false, pad...)
	b.bnChannels += cout
	if b.err != nil {
		return y // no statistics to estimate; the build has failed
	}
	mean, variance := b.stats(y)
	gamma := b.uniform(0.5, 1, cout).Float32s()
	beta := b.uniform(-0.2, 0.2, cout).Float32s()
	const eps = 1e-5
	if !b.foldBN {
		return b.op("BatchNormalization", []*ir.Value{y,
			b.param("bn.weight", ir.FromSlice(ir.Float32, []int64{cout}, gamma)),
			b.param("bn.bias", ir.FromSlice(ir.Float32, []int64{cout}, beta)),
			b.param("bn.running_mean", ir.FromSlice(ir.Float32, []int64{cout}, mean)),
			b.param("bn.running_var", ir.FromSlice(ir.Float32, []int64{cout}, variance)),
		}, ir.AttrF("epsilon", eps), ir.AttrF("momentum", 0.9))
	}
	// y·a + c with a = γ/√(σ²+ε), c = β − μ·a: scale each output
	// channel's weights by a and give the conv the bias c.
	n := y.Producer
	w := n.Inputs[1].Const.Float32s()
	per := len(w) / int(cout)
	scale, shift := make([]float32, cout), make([]float32, cout)
	for c := range scale {
		scale[c] = gamma[c] / float32(math.Sqrt(float64(variance[c])+eps))
		shift[c] = beta[c] - mean[c]*scale[c]
		for i := c * per; i < (c+1)*per; i++ {
			w[i] *= scale[c]
		}
	}
	n.Inputs = append(n.Inputs, b.param("conv.bias", ir.FromSlice(ir.Float32, []int64{cout}, shift)))
	data := b.val[y].Float32s()
	hw := len(data) / int(cout)
	for c := range scale {
		for i := c * hw; i < (c+1)*hw; i++ {
			data[i] = data[i]*scale[c] + shift[c]
		}
	}
	return y
}

// stats estimates per-channel batch-norm statistics of an NCHW value from
// one sample. With few pixels a channel's own mean and variance say little
// (at 1×1 the variance is 0), so both shrink toward the layer's: the mean
// toward 0, the variance toward that of all the layer's elements, with the
// weight of four pixels; the variance is at least a hundredth of the
// layer's.
func (b *net) stats(y *ir.Value) (mean, variance []float32) {
	d := b.dims(y)
	c := int(d[1])
	mean, variance = make([]float32, c), make([]float32, c)
	data := b.val[y].Float32s()
	hw := len(data) / c
	var sum, sumSq float64
	for _, v := range data {
		sum += float64(v)
		sumSq += float64(v) * float64(v)
	}
	all := sumSq/float64(len(data)) - (sum/float64(len(data)))*(sum/float64(len(data)))
	const prior = 4
	for ch := 0; ch < c; ch++ {
		var s, sq float64
		for _, v := range data[ch*hw : (ch+1)*hw] {
			s += float64(v)
			sq += float64(v) * float64(v)
		}
		m := s / float64(hw)
		v := sq/float64(hw) - m*m
		w := float64(hw) / float64(hw+prior)
		mean[ch] = float32(w * m)
		// A near-constant channel would have its rounding errors scaled
		// up by its mean over its deviation; the floor keeps the network
		// well conditioned, so a compiled engine's summation order moves
		// the output as little as a trained network's.
		variance[ch] = float32(max(w*v+(1-w)*all, all/100) + 1e-6)
	}
	return mean, variance
}

func (b *net) relu(x *ir.Value) *ir.Value    { return b.op("Relu", []*ir.Value{x}) }
func (b *net) sigmoid(x *ir.Value) *ir.Value { return b.op("Sigmoid", []*ir.Value{x}) }
func (b *net) mul(x, y *ir.Value) *ir.Value  { return b.op("Mul", []*ir.Value{x, y}) }
func (b *net) add(x, y *ir.Value) *ir.Value  { return b.op("Add", []*ir.Value{x, y}) }

// silu is x·Sigmoid(x), PyTorch's export of SiLU at opset 17.
func (b *net) silu(x *ir.Value) *ir.Value { return b.mul(x, b.sigmoid(x)) }

func (b *net) hardSwish(x *ir.Value) *ir.Value { return b.op("HardSwish", []*ir.Value{x}) }

// hardSigmoid is PyTorch's Hardsigmoid, relu6(x+3)/6.
func (b *net) hardSigmoid(x *ir.Value) *ir.Value {
	return b.op("HardSigmoid", []*ir.Value{x}, ir.AttrF("alpha", 1.0/6), ir.AttrF("beta", 0.5))
}

// gelu is the exact GELU as PyTorch exports it: x·0.5·(1+erf(x/√2)).
func (b *net) gelu(x *ir.Value) *ir.Value {
	e := b.op("Erf", []*ir.Value{b.op("Div", []*ir.Value{x, b.scalar(float32(math.Sqrt2))})})
	return b.mul(b.mul(x, b.add(e, b.scalar(1))), b.scalar(0.5))
}

func (b *net) globalAvgPool(x *ir.Value) *ir.Value { return b.op("GlobalAveragePool", []*ir.Value{x}) }

// maxPool is a k×k MaxPool; ceil is PyTorch's ceil_mode.
func (b *net) maxPool(x *ir.Value, k, stride, pad int64, ceil bool) *ir.Value {
	c := int64(0)
	if ceil {
		c = 1
	}
	return b.op("MaxPool", []*ir.Value{x}, ir.AttrI("ceil_mode", c), ir.AttrIs("kernel_shape", k, k),
		ir.AttrIs("pads", pad, pad, pad, pad), ir.AttrIs("strides", stride, stride))
}

// transpose permutes x's axes.
func (b *net) transpose(x *ir.Value, perm ...int64) *ir.Value {
	return b.op("Transpose", []*ir.Value{x}, ir.AttrIs("perm", perm...))
}

// layerNorm normalizes over the last axis (eps 1e-6, ConvNeXt's).
func (b *net) layerNorm(x *ir.Value) *ir.Value {
	d := b.dims(x)
	c := d[len(d)-1]
	return b.op("LayerNormalization", []*ir.Value{x,
		b.param("ln.weight", b.uniform(0.5, 1.5, c)), b.param("ln.bias", b.uniform(-0.1, 0.1, c)),
	}, ir.AttrI("axis", -1), ir.AttrF("epsilon", 1e-6))
}

// linear is nn.Linear on the last axis of a rank > 2 tensor, exported as
// MatMul by the transposed weight and Add of the bias.
func (b *net) linear(x *ir.Value, out int64) *ir.Value {
	d := b.dims(x)
	in := d[len(d)-1]
	y := b.op("MatMul", []*ir.Value{x, b.param("fc.weight", b.heNormal(in, in, out))})
	return b.add(y, b.param("fc.bias", b.bias(in, out)))
}

// classifier is nn.Linear on a 2-D tensor: Gemm by the [out, in] weight.
func (b *net) classifier(x *ir.Value, out int64) *ir.Value {
	in := b.dims(x)[1]
	return b.op("Gemm", []*ir.Value{x, b.param("fc.weight", b.heNormal(in, out, in)), b.param("fc.bias", b.bias(in, out))},
		ir.AttrF("alpha", 1), ir.AttrF("beta", 1), ir.AttrI("transB", 1))
}

// flatten is torch.flatten(x, 1).
func (b *net) flatten(x *ir.Value) *ir.Value {
	return b.op("Flatten", []*ir.Value{x}, ir.AttrI("axis", 1))
}

// model finishes the graph with y as its output, named "output" as in the
// zoo's exports, and types every value by shape inference.
func (b *net) model(y *ir.Value) (*ir.Model, error) {
	if b.err != nil {
		return nil, fmt.Errorf("building %s: %w", b.g.Name, b.err)
	}
	// No node or value is named plainly "output": UniqueName derives value
	// names from op types.
	y.Name = "output"
	b.g.SetOutputs(y)
	m := ir.NewModel(b.g, opset)
	if err := m.Verify(); err != nil {
		return nil, fmt.Errorf("building %s: %w", b.g.Name, err)
	}
	if _, err := ops.InferShapes(m); err != nil {
		return nil, fmt.Errorf("building %s: %w", b.g.Name, err)
	}
	return m, nil
}
