package ops

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/dimexpr"
)

// Test helpers shared by the op families' tests (written with the
// reduce, norm and rnn families; the others use them too).

// callInfer runs op's inference at opset on inputs of the given types
// (the zero Type for an omitted optional input) with the given constant
// values (nil where unknown), after checking the node against its schema.
func callInfer(op string, opset int64, ins []ir.Type, consts []*ir.Tensor, nOut int, attrs ...*ir.Attribute) ([]ir.Type, error) {
	return callInferSym(op, opset, ins, consts, nil, nOut, attrs...)
}

// callInferSym is callInfer with symbolic input values (nil where none).
func callInferSym(op string, opset int64, ins []ir.Type, consts []*ir.Tensor, syms []*SymTensor, nOut int, attrs ...*ir.Attribute) ([]ir.Type, error) {
	s, err := Lookup("", op, opset)
	if err != nil {
		return nil, err
	}
	n := &ir.Node{OpType: op, Attrs: attrs}
	for i, t := range ins {
		var v *ir.Value
		if t.Kind != ir.UnknownKind {
			v = &ir.Value{Name: fmt.Sprint("in", i), Type: t}
		}
		n.Inputs = append(n.Inputs, v)
	}
	for i := range nOut {
		n.Outputs = append(n.Outputs, &ir.Value{Name: fmt.Sprint("out", i)})
	}
	if err := s.CheckNode(n); err != nil {
		return nil, err
	}
	consts = append(consts, make([]*ir.Tensor, len(ins))...)[:len(ins)]
	c := NewInferContext(s, n, opset, ins, consts)
	c.SymInputs = syms
	if err := s.Infer(c); err != nil {
		return nil, err
	}
	return c.Outputs, nil
}

// callKernel runs op's reference kernel at opset on inputs (nil for an
// omitted optional input) and checks that each output agrees with the
// inferred type of the node.
func callKernel(t *testing.T, op string, opset int64, ins []*ir.Tensor, nOut int, attrs ...*ir.Attribute) ([]*ir.Tensor, error) {
	t.Helper()
	s, err := Lookup("", op, opset)
	require.NoError(t, err)
	types := make([]ir.Type, len(ins))
	n := &ir.Node{OpType: op, Attrs: attrs}
	for i, in := range ins {
		var v *ir.Value
		if in != nil {
			types[i] = in.Type()
			v = &ir.Value{Name: fmt.Sprint("in", i), Type: types[i]}
		}
		n.Inputs = append(n.Inputs, v)
	}
	for i := range nOut {
		n.Outputs = append(n.Outputs, &ir.Value{Name: fmt.Sprint("out", i)})
	}
	if err := s.CheckNode(n); err != nil {
		return nil, err
	}
	c := NewKernelContext(s, n, opset, ins)
	if err := s.Run(c); err != nil {
		return nil, err
	}
	if inferred, err := callInfer(op, opset, types, ins, nOut, attrs...); assert.NoError(t, err) {
		for i, o := range c.Outputs {
			if o != nil {
				assert.Equal(t, inferred[i].String(), o.Type().String(), "output %d: inferred type vs kernel result", i)
			}
		}
	}
	return c.Outputs, nil
}

// randTensor makes a tensor of normal random values (rounded for integer
// types), never all zeros.
func randTensor(rng *rand.Rand, dtype ir.DType, dims ...int64) *ir.Tensor {
	v := make([]float64, ir.Product(dims))
	for i := range v {
		v[i] = rng.NormFloat64()
		if !dtype.IsFloat() {
			v[i] = math.Round(v[i] * 10)
		}
		if dtype.IsUnsigned() {
			v[i] = math.Abs(v[i])
		}
	}
	return FromFloat64s(dtype, dims, v)
}

func f32(dims []int64, v ...float32) *ir.Tensor { return ir.FromSlice(ir.Float32, dims, v) }

func i64s(v ...int64) *ir.Tensor { return ir.FromSlice(ir.Int64, []int64{int64(len(v))}, v) }

// assertClose compares element by element within atol + rtol*|want|.
func assertClose(t *testing.T, want, got []float64, rtol, atol float64, msg ...any) {
	t.Helper()
	if !assert.Equal(t, len(want), len(got), msg...) {
		return
	}
	for i := range want {
		if math.IsNaN(want[i]) && math.IsNaN(got[i]) || want[i] == got[i] {
			continue
		}
		if math.Abs(got[i]-want[i]) > atol+rtol*math.Abs(want[i]) {
			assert.Failf(t, "values differ", "element %d: want %v, got %v %v", i, want[i], got[i], fmt.Sprint(msg...))
			return
		}
	}
}

// updateGolden is the -update flag of the golden tests. Several families'
// test files want it, so it is registered once, by whichever asks first.
func updateGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

// shapeCase is one line of a family's shape-inference golden file.
type shapeCase struct {
	op     string
	opset  int64
	ins    []ir.Type
	consts []*ir.Tensor
	syms   []*SymTensor // symbolic input values, nil where none
	nOut   int
	attrs  []*ir.Attribute
}

// checkShapeGolden infers each case and compares the printed results with
// testdata/ops/<family>/shapes.txt (rewritten with -update).
func checkShapeGolden(t *testing.T, family string, cases []shapeCase) {
	t.Helper()
	var b strings.Builder
	for _, c := range cases {
		var attrs, ins []string
		for _, a := range c.attrs {
			attrs = append(attrs, a.Name+"="+attrString(a))
		}
		for i, in := range c.ins {
			s := "_"
			if in.Kind != ir.UnknownKind {
				s = in.String()
			}
			if i < len(c.consts) && c.consts[i] != nil {
				s += "=" + fmt.Sprint(Int64s(c.consts[i]))
			}
			if i < len(c.syms) && c.syms[i] != nil {
				s += "=" + fmt.Sprint(c.syms[i].Elems)
			}
			ins = append(ins, s)
		}
		fmt.Fprintf(&b, "%s-%d(%s) %s -> ", c.op, c.opset, strings.Join(attrs, ", "), strings.Join(ins, ", "))
		outs, err := callInferSym(c.op, c.opset, c.ins, c.consts, c.syms, c.nOut, c.attrs...)
		if err != nil {
			fmt.Fprintf(&b, "error: %v\n", err)
			continue
		}
		var printed []string
		for _, o := range outs {
			printed = append(printed, o.String())
		}
		fmt.Fprintf(&b, "%s\n", strings.Join(printed, ", "))
	}
	path := filepath.Join("..", "..", "testdata", "ops", family, "shapes.txt")
	if updateGolden() {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create it")
	assert.Equal(t, string(want), b.String())
}

func attrString(a *ir.Attribute) string {
	switch a.Kind {
	case ir.AttrInt:
		return fmt.Sprint(a.I)
	case ir.AttrFloat:
		return fmt.Sprint(a.F)
	case ir.AttrString:
		return fmt.Sprintf("%q", a.S)
	case ir.AttrInts:
		return fmt.Sprint(a.Ints)
	case ir.AttrFloats:
		return fmt.Sprint(a.Floats)
	case ir.AttrStrings:
		return fmt.Sprintf("%q", a.Strings)
	}
	return a.Kind.String()
}

// symInts is a symbolic int64 vector value: elements are dimexpr strings
// ("N", "-1", "2*S"), or "?" for unknown.
func symInts(elems ...string) *SymTensor {
	s := &SymTensor{DType: ir.Int64, Dims: []int64{int64(len(elems))}}
	for _, e := range elems {
		if e == "?" {
			s.Elems = append(s.Elems, nil)
			continue
		}
		x, err := dimexpr.Parse(e)
		if err != nil {
			panic(err)
		}
		s.Elems = append(s.Elems, x)
	}
	return s
}

// symScalar is a symbolic int64 scalar value.
func symScalar(e string) *SymTensor {
	s := symInts(e)
	s.Dims = nil
	return s
}

func tt(elem ir.DType, dims ...int64) ir.Type { return ir.TensorType(elem, ir.S(dims...)) }

func sym(elem ir.DType, dims ...any) ir.Type {
	s := ir.Shape{Ranked: true}
	for _, d := range dims {
		switch d := d.(type) {
		case string:
			s.Dims = append(s.Dims, ir.Sym(d))
		case int:
			s.Dims = append(s.Dims, dimOf(int64(d)))
		}
	}
	return ir.TensorType(elem, s)
}
