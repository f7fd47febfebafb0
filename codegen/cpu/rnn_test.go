package cpu

import (
	"math/rand"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

// TestLSTM compares the LSTM lowering with the reference on odd sizes
// (hidden sizes that are not a multiple of the vector width, one block,
// an odd block count), both directions, peepholes, clip, input_forget,
// initial states, layout 1 and outputs left out.
func TestLSTM(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	small := func(d ...int64) *ir.Tensor {
		x := randTensor(r, d...)
		f := x.Float32s()
		for i := range f {
			f[i] *= 0.3
		}
		return x
	}
	cases := []struct {
		name                   string
		seq, batch, in, hidden int64
		dir                    string
		bias, init, peep       bool
		attrs                  []*ir.Attribute
		outs                   []bool // Y, Y_h, Y_c present
		opset                  int64
	}{
		{name: "zoo_like", seq: 7, batch: 1, in: 9, hidden: 32, dir: "forward", bias: true, init: true, outs: []bool{true, false, false}},
		{name: "odd_hidden", seq: 5, batch: 2, in: 3, hidden: 21, dir: "forward", bias: true, outs: []bool{true, true, true}},
		{name: "three_blocks", seq: 4, batch: 1, in: 5, hidden: 48, dir: "reverse", bias: true, init: true, outs: []bool{true, true, true}},
		{name: "bidirectional", seq: 6, batch: 3, in: 4, hidden: 10, dir: "bidirectional", bias: true, init: true, outs: []bool{true, true, true}},
		{name: "peep_clip_forget", seq: 5, batch: 2, in: 6, hidden: 17, dir: "forward", bias: true, init: true, peep: true,
			attrs: []*ir.Attribute{ir.AttrF("clip", 0.7), ir.AttrI("input_forget", 1)}, outs: []bool{true, true, true}},
		{name: "state_only", seq: 3, batch: 1, in: 4, hidden: 16, dir: "forward", outs: []bool{false, true, true}},
		{name: "layout1", seq: 4, batch: 2, in: 3, hidden: 12, dir: "bidirectional", bias: true, init: true,
			attrs: []*ir.Attribute{ir.AttrI("layout", 1)}, outs: []bool{true, true, true}, opset: 14},
		{name: "relu_cell", seq: 4, batch: 1, in: 3, hidden: 8, dir: "forward", bias: true,
			attrs: []*ir.Attribute{ir.AttrSs("activations", "Sigmoid", "Relu", "Tanh")}, outs: []bool{true, true, true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dirs := int64(1)
			if c.dir == "bidirectional" {
				dirs = 2
			}
			xd := []int64{c.seq, c.batch, c.in}
			sd := []int64{dirs, c.batch, c.hidden}
			for _, a := range c.attrs {
				if a.Name == "layout" {
					xd = []int64{c.batch, c.seq, c.in}
					sd = []int64{c.batch, dirs, c.hidden}
				}
			}
			g := ir.NewGraph(c.name)
			x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(xd...)))
			feeds := map[string]*ir.Tensor{"x": randTensor(r, xd...)}
			ins := []*ir.Value{x, g.AddInitializer("W", small(dirs, 4*c.hidden, c.in)), g.AddInitializer("R", small(dirs, 4*c.hidden, c.hidden))}
			opt := func(v *ir.Value, ok bool) *ir.Value {
				if ok {
					return v
				}
				return nil
			}
			ins = append(ins, opt(g.AddInitializer("B", small(dirs, 8*c.hidden)), c.bias), nil)
			if c.init {
				h0 := g.AddInput("h0", ir.TensorType(ir.Float32, ir.S(sd...)))
				feeds["h0"] = randTensor(r, sd...)
				ins = append(ins, h0, g.AddInitializer("c0", randTensor(r, sd...)))
			} else {
				ins = append(ins, nil, nil)
			}
			ins = append(ins, opt(g.AddInitializer("P", small(dirs, 3*c.hidden)), c.peep))
			for len(ins) > 0 && ins[len(ins)-1] == nil {
				ins = ins[:len(ins)-1]
			}
			attrs := append([]*ir.Attribute{ir.AttrI("hidden_size", c.hidden), ir.AttrS("direction", c.dir)}, c.attrs...)
			n := g.AddNode("LSTM", ins, 3, attrs...)
			var outs []*ir.Value
			for i, keep := range c.outs {
				if keep {
					outs = append(outs, n.Outputs[i])
				} else {
					n.Outputs[i] = nil
				}
			}
			for len(n.Outputs) > 0 && n.Outputs[len(n.Outputs)-1] == nil {
				n.Outputs = n.Outputs[:len(n.Outputs)-1]
			}
			g.SetOutputs(outs...)
			opset := c.opset
			if opset == 0 {
				opset = 13
			}
			check(t, ir.NewModel(g, opset), feeds, 1e-5)
		})
	}
}
