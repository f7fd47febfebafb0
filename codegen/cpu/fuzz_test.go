package cpu

import (
	"errors"
	"math"
	"math/rand"
	"testing"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/passes"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// FuzzCompile builds small random graphs (a chain of ops over random
// shapes and element types, with NaN, ±Inf and -0 among the data) and
// compiles them as cc build does: the build must either give an engine
// whose outputs match the reference executor's, or fail with an error.
// It must never crash. Inputs the fuzzer finds failing land in
// testdata/fuzz/FuzzCompile and run with every go test.
func FuzzCompile(f *testing.F) {
	needLLC(f)
	for _, seed := range [][]byte{
		{0, 3, 4, 5, 6, 2, 1, 2, 3},
		{1, 2, 7, 3, 9, 4, 8, 0, 11, 5},
		{5, 4, 2, 2, 2, 2, 6, 1, 14, 3, 12},
		{3, 1, 17, 2, 13, 7, 10, 9},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, feeds := fuzzModel(data)
		if m == nil {
			return
		}
		if _, err := ops.InferShapes(m); err != nil {
			return // an invalid graph: the frontend's and inference's job
		}
		ref, err := reference.New(m)
		if err != nil {
			return
		}
		want, err := ref.Run(feeds)
		if err != nil {
			return // e.g. an integer division by zero the reference refuses
		}
		if err := passes.Run(&passes.Context{OptLevel: 2, Verify: true, Target: fusionOnly{}}, passes.O2, m); err != nil {
			t.Fatalf("passes: %v", err)
		}
		res, err := Compile(m, Options{Winograd: WinogradOff})
		if err != nil {
			if !refusal(err) {
				t.Fatalf("compile: an internal error on a model the reference runs: %v\n%s", err, describe(m))
			}
			return
		}
		e, err := Load(res)
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		defer e.Close()
		got, err := e.Run(feeds, 2, nil)
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		for name, w := range want {
			if err := compareOut(got[name], w); err != nil {
				t.Fatalf("output %s: %v\n%s", name, err, describe(m))
			}
		}
	})
}

// refusal reports whether a build error is one a user may get for a valid
// model: an op, opset or dtype the backend lacks, or a size over a limit.
// Any other error on a model the reference executor runs is a compiler bug,
// an internal error by another name, and fails the fuzz target like a panic.
func refusal(err error) bool {
	var ue *ops.UnsupportedError
	return errors.As(err, &ue) || errors.Is(err, ir.ErrLimit)
}

// describe prints a model's nodes for a failure message.
func describe(m *ir.Model) string {
	s := ""
	for _, n := range m.Graph.Nodes {
		s += n.String() + "\n"
	}
	return s
}

// fuzzReader draws small numbers from the fuzzer's bytes (zeros once they
// run out).
type fuzzReader struct {
	data []byte
	pos  int
}

func (r *fuzzReader) next(n int) int {
	if n <= 0 {
		return 0
	}
	if r.pos >= len(r.data) {
		return 0
	}
	b := int(r.data[r.pos])
	r.pos++
	return b % n
}

// fuzzModel turns data into a model and its inputs' values.
func fuzzModel(data []byte) (*ir.Model, map[string]*ir.Tensor) {
	r := &fuzzReader{data: data}
	types := []ir.DType{ir.Float32, ir.Float32, ir.Float32, ir.Float64, ir.Float16, ir.Int32, ir.Int64, ir.Uint8}
	dt := types[r.next(len(types))]
	rank := r.next(5)
	dims := make([]int64, rank)
	for i := range dims {
		dims[i] = int64(r.next(7) + 1)
		if r.next(16) == 0 {
			dims[i] = 0
		}
	}
	g := ir.NewGraph("fuzz")
	rng := rand.New(rand.NewSource(int64(len(data))))
	feeds := map[string]*ir.Tensor{}
	x := g.AddInput("x", ir.TensorType(dt, ir.S(dims...)))
	feeds["x"] = fuzzTensor(rng, dt, dims)
	m := ir.NewModel(g, 18)
	cur := x
	nops := r.next(4) + 1
	for i := 0; i < nops; i++ {
		d, ok := cur.Type.Shape.Ints()
		if !ok {
			break
		}
		v := fuzzOp(g, r, rng, feeds, cur, d)
		if v == nil {
			break
		}
		g.SetOutputs(v)
		if _, err := ops.InferShapes(m); err != nil {
			return nil, nil
		}
		cur = v
	}
	if cur == x {
		return nil, nil
	}
	g.SetOutputs(cur)
	return m, feeds
}

// fuzzOp applies one op to cur (of inferred dims d), or returns nil when
// the chosen op does not apply.
func fuzzOp(g *ir.Graph, r *fuzzReader, rng *rand.Rand, feeds map[string]*ir.Tensor, cur *ir.Value, d []int64) *ir.Value {
	dt := cur.Type.Elem
	float := dt.IsFloat()
	rank := len(d)
	axis := func() int64 {
		if rank == 0 {
			return 0
		}
		return int64(r.next(2*rank) - rank)
	}
	switch r.next(18) {
	case 0, 1:
		names := []string{"Relu", "Abs", "Neg"}
		if float {
			names = append(names, "Sigmoid", "Exp", "Tanh", "Sqrt", "Floor", "Log", "Erf", "Sin", "HardSwish", "Softplus")
		}
		op := names[r.next(len(names))]
		if op == "Neg" && dt == ir.Uint8 || op == "Relu" && dt == ir.Uint8 {
			return nil
		}
		return g.Apply(op, []*ir.Value{cur})
	case 2, 3, 4:
		names := []string{"Add", "Sub", "Mul", "Max", "Min"}
		if float {
			names = append(names, "Div", "Pow")
		}
		op := names[r.next(len(names))]
		// A broadcast operand: a suffix of cur's dims with some set to 1.
		n := r.next(rank + 1)
		yd := append([]int64{}, d[rank-n:]...)
		for i := range yd {
			if r.next(3) == 0 {
				yd[i] = 1
			}
		}
		var y *ir.Value
		if r.next(2) == 0 {
			name := g.UniqueName("y")
			y = g.AddInput(name, ir.TensorType(dt, ir.S(yd...)))
			feeds[name] = fuzzTensor(rng, dt, yd)
		} else {
			y = g.AddInitializer(g.UniqueName("c"), fuzzTensor(rng, dt, yd))
		}
		ins := []*ir.Value{cur, y}
		if r.next(2) == 0 {
			ins = []*ir.Value{y, cur}
		}
		return g.Apply(op, ins)
	case 5:
		if rank < 2 {
			return nil
		}
		perm := rng.Perm(rank)
		p := make([]int64, rank)
		nd := make([]int64, rank)
		for i, v := range perm {
			p[i], nd[i] = int64(v), d[v]
		}
		return g.Apply("Transpose", []*ir.Value{cur}, ir.AttrIs("perm", p...))
	case 6:
		if rank == 0 {
			return nil
		}
		a := axis()
		start := int64(r.next(9) - 4)
		end := int64(r.next(9) - 4)
		if r.next(3) == 0 {
			end = math.MaxInt64
		}
		step := int64(r.next(5) - 2)
		if step == 0 {
			step = 1
		}
		ins := []*ir.Value{cur}
		for _, v := range []int64{start, end, a, step} {
			ins = append(ins, g.AddInitializer(g.UniqueName("s"), ir.FromSlice(ir.Int64, []int64{1}, []int64{v})))
		}
		return g.Apply("Slice", ins)
	case 7, 8:
		if rank == 0 {
			return nil
		}
		names := []string{"ReduceSum", "ReduceMax", "ReduceMin", "ReduceMean", "ReduceProd"}
		if float {
			names = append(names, "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare")
		}
		op := names[r.next(len(names))]
		axes := g.AddInitializer(g.UniqueName("axes"), ir.FromSlice(ir.Int64, []int64{1}, []int64{axis()}))
		return g.Apply(op, []*ir.Value{cur, axes}, ir.AttrI("keepdims", int64(r.next(2))))
	case 9:
		if !float || rank == 0 {
			return nil
		}
		op := []string{"Softmax", "LogSoftmax"}[r.next(2)]
		return g.Apply(op, []*ir.Value{cur}, ir.AttrI("axis", axis()))
	case 10:
		if rank == 0 {
			return nil
		}
		return g.Apply("Concat", []*ir.Value{cur, cur}, ir.AttrI("axis", axis()))
	case 11:
		shape := g.AddInitializer(g.UniqueName("shape"), ir.FromSlice(ir.Int64, []int64{1}, []int64{-1}))
		return g.Apply("Reshape", []*ir.Value{cur, shape})
	case 12:
		to := []ir.DType{ir.Float32, ir.Int32, ir.Uint8, ir.Float16, ir.Bool, ir.Int64}[r.next(6)]
		return g.Apply("Cast", []*ir.Value{cur}, ir.AttrI("to", int64(to)))
	case 13:
		lo := g.AddInitializer(g.UniqueName("lo"), fuzzScalar(dt, -1))
		hi := g.AddInitializer(g.UniqueName("hi"), fuzzScalar(dt, 2))
		return g.Apply("Clip", []*ir.Value{cur, lo, hi})
	case 14:
		if rank == 0 {
			return nil
		}
		pads := make([]int64, 2*rank)
		for i := range pads {
			pads[i] = int64(r.next(4) - 1)
		}
		p := g.AddInitializer(g.UniqueName("pads"), ir.FromSlice(ir.Int64, []int64{int64(len(pads))}, pads))
		mode := []string{"constant", "edge", "reflect"}[r.next(3)]
		return g.Apply("Pad", []*ir.Value{cur, p}, ir.AttrS("mode", mode))
	case 15:
		if rank == 0 {
			return nil
		}
		a := axis()
		n := d[(int(a)+rank)%rank]
		if n == 0 {
			return nil
		}
		idx := []int64{int64(r.next(int(2*n))) - n, int64(r.next(int(n)))}
		ind := g.AddInitializer(g.UniqueName("idx"), ir.FromSlice(ir.Int64, []int64{2}, idx))
		return g.Apply("Gather", []*ir.Value{cur, ind}, ir.AttrI("axis", a))
	case 16:
		zero := g.AddInitializer(g.UniqueName("z"), fuzzScalar(dt, 0))
		cond := g.Apply("Greater", []*ir.Value{cur, zero})
		return g.Apply("Where", []*ir.Value{cond, cur, zero})
	case 17:
		if rank == 0 || !float {
			return nil
		}
		return g.Apply("CumSum", []*ir.Value{cur, g.AddInitializer(g.UniqueName("ax"), ir.FromSlice(ir.Int64, nil, []int64{axis()}))},
			ir.AttrI("exclusive", int64(r.next(2))), ir.AttrI("reverse", int64(r.next(2))))
	}
	return nil
}

func fuzzScalar(dt ir.DType, v float64) *ir.Tensor {
	return ops.FromFloat64s(dt, nil, []float64{v})
}

// fuzzTensor is random data: normal floats with NaN, ±Inf and -0 among
// them; small integers.
func fuzzTensor(rng *rand.Rand, dt ir.DType, dims []int64) *ir.Tensor {
	n := ir.Product(dims)
	v := make([]float64, n)
	for i := range v {
		switch {
		case dt.IsFloat():
			v[i] = rng.NormFloat64() * 2
			switch rng.Intn(24) {
			case 0:
				v[i] = math.NaN()
			case 1:
				v[i] = math.Inf(1)
			case 2:
				v[i] = math.Inf(-1)
			case 3:
				v[i] = math.Copysign(0, -1)
			}
		case dt.IsUnsigned():
			v[i] = float64(rng.Intn(12))
		default:
			v[i] = float64(rng.Intn(13) - 6)
		}
	}
	return ops.FromFloat64s(dt, dims, v)
}
