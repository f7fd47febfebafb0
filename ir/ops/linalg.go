package ops

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/kiln-ml/kiln/ir"
)

// MatMul, Gemm and Einsum. Floating types compute in float64, integer types
// in int64 (wrapping to the output width, as ONNX Runtime does), through the
// same generic loops.

var (
	matmulTypes9  = []ir.DType{ir.Float16, ir.Float32, ir.Float64, ir.Int32, ir.Int64, ir.Uint32, ir.Uint64}
	matmulTypes13 = []ir.DType{ir.Float16, ir.Float32, ir.Float64, ir.Int32, ir.Int64, ir.Uint32, ir.Uint64, ir.BFloat16}
	einsumTypes   = []ir.DType{ir.Float16, ir.Float32, ir.Float64, ir.Int8, ir.Int16, ir.Int32, ir.Int64,
		ir.Uint8, ir.Uint16, ir.Uint32, ir.Uint64}
)

func gemmAttrs(extra ...AttrDef) []AttrDef {
	return append([]AttrDef{defFloat("alpha", 1), defFloat("beta", 1), defInt("transA", 0), defInt("transB", 0)}, extra...)
}

var linalgOps = []*Schema{
	// MatMul: v9 added the integer types, v13 bfloat16.
	{Name: "MatMul", Since: 1, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Types: convTypes, Infer: inferMatMul, Run: runMatMul},
	{Name: "MatMul", Since: 9, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Types: matmulTypes9, Infer: inferMatMul, Run: runMatMul},
	{Name: "MatMul", Since: 13, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Types: matmulTypes13, Infer: inferMatMul, Run: runMatMul},
	// Gemm: v1 (and v6, which only changed inference) broadcast C only with
	// broadcast=1; v7 always broadcasts C; v9 added the integer types; v11
	// made C optional; v13 added bfloat16.
	{Name: "Gemm", Since: 1, MinInputs: 3, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: gemmAttrs(defInt("broadcast", 0)), Types: convTypes, Infer: inferGemm, Run: runGemm},
	{Name: "Gemm", Since: 7, MinInputs: 3, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: gemmAttrs(), Types: convTypes, Infer: inferGemm, Run: runGemm},
	{Name: "Gemm", Since: 9, MinInputs: 3, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: gemmAttrs(), Types: matmulTypes9, Infer: inferGemm, Run: runGemm},
	{Name: "Gemm", Since: 11, MinInputs: 2, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: gemmAttrs(), Types: matmulTypes9, Infer: inferGemm, Run: runGemm},
	{Name: "Gemm", Since: 13, MinInputs: 2, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: gemmAttrs(), Types: matmulTypes13, Infer: inferGemm, Run: runGemm},
	{Name: "Einsum", Since: 12, MinInputs: 1, MaxInputs: -1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "equation", Kind: ir.AttrString, Required: true}},
		Types: einsumTypes, Infer: inferEinsum, Run: runEinsum},
}

func init() { register(linalgOps) }

// number is what the reference kernels compute in.
type number interface{ float64 | int64 }

// matmulShape infers numpy's matmul: [..., M, K] × [..., K, N] gives
// [broadcast(...), M, N]; a 1-D operand is promoted to a matrix ([K] as
// [1, K] on the left, [K, 1] on the right) and the promoted axis dropped.
func matmulShape(a, b ir.Shape) (ir.Shape, error) {
	if !a.Ranked || !b.Ranked {
		return ir.Shape{}, nil
	}
	if a.Rank() == 0 || b.Rank() == 0 {
		return ir.Shape{}, fmt.Errorf("matmul of %s and %s: operands must have rank >= 1", a, b)
	}
	ad, bd := a.Dims, b.Dims
	if len(ad) == 1 {
		ad = []ir.Dim{ir.D(1), ad[0]}
	}
	if len(bd) == 1 {
		bd = []ir.Dim{bd[0], ir.D(1)}
	}
	ka, kb := ad[len(ad)-1], bd[len(bd)-2]
	if ka.IsStatic() && kb.IsStatic() && ka.Value != kb.Value {
		return ir.Shape{}, fmt.Errorf("matmul of %s and %s: inner dims %d and %d differ", a, b, ka.Value, kb.Value)
	}
	batch, err := BroadcastShape(ir.ShapeOf(ad[:len(ad)-2]...), ir.ShapeOf(bd[:len(bd)-2]...))
	if err != nil {
		return ir.Shape{}, fmt.Errorf("matmul of %s and %s: batch dims: %w", a, b, err)
	}
	if a.Rank() > 1 {
		batch.Dims = append(batch.Dims, ad[len(ad)-2])
	}
	if b.Rank() > 1 {
		batch.Dims = append(batch.Dims, bd[len(bd)-1])
	}
	return batch, nil
}

func inferMatMul(c *InferContext) error {
	elem, err := sameElem(c, 0, 1)
	if err != nil {
		return err
	}
	shape, err := matmulShape(c.In(0).Shape, c.In(1).Shape)
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, ir.TensorType(elem, shape))
	return nil
}

// matmul multiplies static-shaped operands numpy-style (see matmulShape,
// which must have accepted the shapes), returning the output elements.
func matmul[T number](a []T, ad []int64, b []T, bd []int64) []T {
	if len(ad) == 1 {
		ad = []int64{1, ad[0]}
	}
	if len(bd) == 1 {
		bd = []int64{bd[0], 1}
	}
	m, k, n := int(ad[len(ad)-2]), int(ad[len(ad)-1]), int(bd[len(bd)-1])
	ab, bb := ad[:len(ad)-2], bd[:len(bd)-2]
	batch, _ := BroadcastDims(ab, bb)
	ai, bi := BroadcastIndex(ab, batch), BroadcastIndex(bb, batch)
	c := make([]T, len(ai)*m*n)
	// One task per output row: rows are independent and the innermost loop
	// (i-k-j order) walks b and c contiguously.
	parallelFor(len(ai)*m, func(r int) {
		q, i := r/m, r%m
		crow := c[r*n:][:n]
		bq := b[bi[q]*k*n:][:k*n]
		for p, av := range a[(ai[q]*m+i)*k:][:k] {
			brow := bq[p*n:][:n]
			for j := range crow {
				crow[j] += av * brow[j]
			}
		}
	})
	return c
}

func runMatMul(c *KernelContext) error {
	a, b := c.In(0), c.In(1)
	shape, err := matmulShape(a.Shape(), b.Shape())
	if err != nil {
		return c.Errorf("%v", err)
	}
	dims, _ := shape.Ints()
	if a.DType.IsFloat() {
		c.Set(0, FromFloat64s(a.DType, dims, matmul(Float64s(a), a.Dims, Float64s(b), b.Dims)))
	} else {
		c.Set(0, FromInt64s(a.DType, dims, matmul(Int64s(a), a.Dims, Int64s(b), b.Dims)))
	}
	return nil
}

// gemmShape infers Gemm's [M, N] output and checks that C broadcasts to it
// (unidirectionally; exactly [M, N] for v1's broadcast=0).
func gemmShape(at attrs, a, b, cs ir.Shape) (ir.Shape, error) {
	if a.Ranked && a.Rank() != 2 || b.Ranked && b.Rank() != 2 {
		return ir.Shape{}, fmt.Errorf("A is %s and B %s, want matrices", a, b)
	}
	ad, bd := dimsOf(a, 2), dimsOf(b, 2)
	if at.Int("transA") != 0 {
		ad = []ir.Dim{ad[1], ad[0]}
	}
	if at.Int("transB") != 0 {
		bd = []ir.Dim{bd[1], bd[0]}
	}
	if ad[1].IsStatic() && bd[0].IsStatic() && ad[1].Value != bd[0].Value {
		return ir.Shape{}, fmt.Errorf("A' is [%s,%s] and B' [%s,%s]: inner dims differ", ad[0], ad[1], bd[0], bd[1])
	}
	out := ir.ShapeOf(ad[0], bd[1])
	if !cs.Ranked {
		return out, nil
	}
	exact := at.declares("broadcast") && at.Int("broadcast") == 0
	if cs.Rank() > 2 || exact && cs.Rank() != 2 {
		return ir.Shape{}, fmt.Errorf("C is %s, which does not broadcast to [M, N] = %s", cs, out)
	}
	for i, d := range cs.Dims {
		o := out.Dims[2-cs.Rank()+i]
		if d.IsStatic() && o.IsStatic() && d.Value != o.Value && (d.Value != 1 || exact) {
			return ir.Shape{}, fmt.Errorf("C is %s, which does not broadcast to [M, N] = %s", cs, out)
		}
	}
	return out, nil
}

func inferGemm(c *InferContext) error {
	elem, err := sameElem(c, 0, 1, 2)
	if err != nil {
		return err
	}
	var cs ir.Shape
	if c.HasInput(2) {
		cs = c.In(2).Shape
	}
	shape, err := gemmShape(c.attrs, c.In(0).Shape, c.In(1).Shape, cs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, ir.TensorType(elem, shape))
	return nil
}

// transpose2 returns the transpose of an r×c row-major matrix.
func transpose2[T number](x []T, r, c int) []T {
	out := make([]T, len(x))
	for i := range r {
		for j := range c {
			out[j*r+i] = x[i*c+j]
		}
	}
	return out
}

// gemm computes alpha·A'·B' for static shapes gemmShape accepted.
func gemm[T number](at attrs, a []T, ad []int64, b []T, bd []int64) []T {
	if at.Int("transA") != 0 {
		a, ad = transpose2(a, int(ad[0]), int(ad[1])), []int64{ad[1], ad[0]}
	}
	if at.Int("transB") != 0 {
		b, bd = transpose2(b, int(bd[0]), int(bd[1])), []int64{bd[1], bd[0]}
	}
	return matmul(a, ad, b, bd)
}

func runGemm(c *KernelContext) error {
	a, b, ct := c.In(0), c.In(1), c.In(2)
	cs := ir.Shape{}
	if ct != nil {
		cs = ct.Shape()
	}
	shape, err := gemmShape(c.attrs, a.Shape(), b.Shape(), cs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	dims, _ := shape.Ints()
	var cidx []int
	if ct != nil {
		cidx = BroadcastIndex(ct.Dims, dims)
	}
	alpha, beta := float64(c.Float("alpha")), float64(c.Float("beta"))
	if a.DType.IsFloat() {
		y := gemm(c.attrs, Float64s(a), a.Dims, Float64s(b), b.Dims)
		var cv []float64
		if ct != nil {
			cv = Float64s(ct)
		}
		for i := range y {
			y[i] *= alpha
			if cidx != nil {
				y[i] += beta * cv[cidx[i]]
			}
		}
		c.Set(0, FromFloat64s(a.DType, dims, y))
		return nil
	}
	// Integer Gemm stays exact when alpha and beta are whole numbers (the
	// usual 1 and 1); otherwise it scales in float64 and truncates, as
	// numpy's astype does.
	y := gemm(c.attrs, Int64s(a), a.Dims, Int64s(b), b.Dims)
	var cv []int64
	if ct != nil {
		cv = Int64s(ct)
	}
	whole := alpha == math.Trunc(alpha) && beta == math.Trunc(beta)
	for i := range y {
		var bias int64
		if cidx != nil {
			bias = cv[cidx[i]]
		}
		if whole {
			y[i] = int64(alpha)*y[i] + int64(beta)*bias
		} else {
			y[i] = int64(alpha*float64(y[i]) + beta*float64(bias))
		}
	}
	c.Set(0, FromInt64s(a.DType, dims, y))
	return nil
}

// einsumSpec is a parsed Einsum equation: the label of each axis of each
// operand and of the output. Letters are labels 0-51; the axes an ellipsis
// stands for get labels from 52 on, right-aligned across operands so that
// they broadcast like numpy's.
type einsumSpec struct {
	inputs [][]int
	output []int
	labels int // labels in use: 52 + the ellipsis rank
}

const einsumLetters = 52

func einsumLabel(r rune) (int, bool) {
	switch {
	case r >= 'A' && r <= 'Z':
		return int(r - 'A'), true
	case r >= 'a' && r <= 'z':
		return 26 + int(r-'a'), true
	}
	return 0, false
}

// einsumTerm splits one term into its letter labels before and after an
// optional ellipsis.
func einsumTerm(term string) (before, after []int, ellipsis bool, err error) {
	head, tail, ellipsis := strings.Cut(term, "...")
	for i, part := range []string{head, tail} {
		for _, r := range part {
			l, ok := einsumLabel(r)
			if !ok {
				return nil, nil, false, fmt.Errorf("term %q: %q is not a letter", term, r)
			}
			if i == 0 {
				before = append(before, l)
			} else {
				after = append(after, l)
			}
		}
	}
	return before, after, ellipsis, nil
}

// parseEinsum parses an equation for operands of the given ranks.
func parseEinsum(eq string, ranks []int) (*einsumSpec, error) {
	eq = strings.ReplaceAll(eq, " ", "")
	lhs, rhs, explicit := strings.Cut(eq, "->")
	terms := strings.Split(lhs, ",")
	if len(terms) != len(ranks) {
		return nil, fmt.Errorf("equation %q has %d operands, the node %d inputs", eq, len(terms), len(ranks))
	}
	type parsed struct {
		before, after []int
		ellipsis      bool
	}
	ts := make([]parsed, len(terms))
	ellRank, anyEllipsis := 0, false
	for i, term := range terms {
		b, a, e, err := einsumTerm(term)
		if err != nil {
			return nil, err
		}
		ts[i] = parsed{b, a, e}
		extra := ranks[i] - len(b) - len(a)
		if extra < 0 || extra > 0 && !e {
			return nil, fmt.Errorf("term %q does not fit an operand of rank %d", term, ranks[i])
		}
		ellRank, anyEllipsis = max(ellRank, extra), anyEllipsis || e
	}
	s := &einsumSpec{labels: einsumLetters + ellRank}
	count := make([]int, s.labels)
	for i, t := range ts {
		extra := ranks[i] - len(t.before) - len(t.after)
		axes := append([]int{}, t.before...)
		for j := range extra {
			axes = append(axes, einsumLetters+ellRank-extra+j)
		}
		axes = append(axes, t.after...)
		for _, l := range axes {
			count[l]++
		}
		s.inputs = append(s.inputs, axes)
	}
	ellipsisLabels := make([]int, ellRank)
	for j := range ellipsisLabels {
		ellipsisLabels[j] = einsumLetters + j
	}
	if !explicit {
		// numpy's implicit output: the ellipsis axes, then the letters that
		// occur once, in ASCII order (upper case first).
		s.output = ellipsisLabels
		for l := range einsumLetters {
			if count[l] == 1 {
				s.output = append(s.output, l)
			}
		}
		return s, nil
	}
	b, a, e, err := einsumTerm(rhs)
	if err != nil {
		return nil, err
	}
	if e && !anyEllipsis {
		return nil, fmt.Errorf("equation %q: the output has an ellipsis the operands lack", eq)
	}
	s.output = b
	if e {
		s.output = append(s.output, ellipsisLabels...)
	}
	s.output = append(s.output, a...)
	seen := map[int]bool{}
	for _, l := range s.output {
		if seen[l] || count[l] == 0 {
			return nil, fmt.Errorf("equation %q: output label %s is repeated or not in any operand", eq, einsumName(l))
		}
		seen[l] = true
	}
	return s, nil
}

func einsumName(l int) string {
	switch {
	case l < 26:
		return string(rune('A' + l))
	case l < einsumLetters:
		return string(rune('a' + l - 26))
	}
	return "..."
}

// sizes resolves every label's size from the operands' dims (-1 unknown).
// Letters must agree exactly; ellipsis axes broadcast (1 against n).
func (s *einsumSpec) sizes(dims [][]int64) ([]int64, error) {
	size := make([]int64, s.labels)
	for i := range size {
		size[i] = -2 // unseen
	}
	for i, axes := range s.inputs {
		for j, l := range axes {
			d := dims[i][j]
			switch cur := size[l]; {
			case cur == -2 || cur == -1 && d >= 0 || cur == 1 && l >= einsumLetters:
				size[l] = d
			case d < 0 || d == cur || d == 1 && l >= einsumLetters:
			default:
				return nil, fmt.Errorf("label %s is %d in one operand and %d in another", einsumName(l), cur, d)
			}
		}
	}
	return size, nil
}

func inferEinsum(c *InferContext) error {
	ranks := make([]int, len(c.Inputs))
	dims := make([][]int64, len(c.Inputs))
	all := make([]int, len(c.Inputs))
	for i := range all {
		all[i] = i
	}
	elem, err := sameElem(c, all...)
	if err != nil {
		return err
	}
	for i := range c.Inputs {
		in := c.In(i).Shape
		if !in.Ranked {
			c.Set(0, ir.TensorType(elem, ir.Shape{}))
			return nil
		}
		ranks[i], dims[i] = in.Rank(), knownDims(in)
	}
	spec, err := parseEinsum(c.String("equation"), ranks)
	if err != nil {
		return c.Errorf("%v", err)
	}
	size, err := spec.sizes(dims)
	if err != nil {
		return c.Errorf("%v", err)
	}
	out := ir.ShapeOf()
	for _, l := range spec.output {
		out.Dims = append(out.Dims, einsumDim(c, spec, size, l))
	}
	c.Set(0, ir.TensorType(elem, out))
	return nil
}

// einsumDim is the output dim of label l: its static size, or else the
// symbolic dim of an operand axis it labels.
func einsumDim(c *InferContext, spec *einsumSpec, size []int64, l int) ir.Dim {
	if size[l] >= 0 {
		return ir.D(size[l])
	}
	for i, axes := range spec.inputs {
		for j, al := range axes {
			if al == l && c.In(i).Shape.Dims[j].IsSymbolic() {
				return c.In(i).Shape.Dims[j]
			}
		}
	}
	return ir.UnknownDim()
}

// einsum evaluates a parsed equation by walking every combination of the
// labels, output labels outermost, summing the operands' products into the
// output. Each operand advances by a per-label stride (the sum of its
// strides for a repeated label, which takes diagonals; 0 where it
// broadcasts or lacks the label).
func einsum[T number](s *einsumSpec, size []int64, dims [][]int64, data [][]T) []T {
	order := append([]int{}, s.output...)
	inOut := map[int]bool{}
	for _, l := range s.output {
		inOut[l] = true
	}
	var summed []int
	for _, axes := range s.inputs {
		for _, l := range axes {
			if !inOut[l] {
				inOut[l] = true
				summed = append(summed, l)
			}
		}
	}
	sort.Ints(summed)
	order = append(order, summed...)
	pos := make([]int, s.labels)
	for i, l := range order {
		pos[l] = i
	}
	strides := make([][]int, len(data))
	for i, axes := range s.inputs {
		strides[i] = make([]int, len(order))
		st := Strides(dims[i])
		for j, l := range axes {
			if dims[i][j] == size[l] {
				strides[i][pos[l]] += int(st[j])
			}
		}
	}
	n := make([]int, len(order))
	total, inner := 1, 1
	for i, l := range order {
		n[i] = int(size[l])
		total *= n[i]
		if i >= len(s.output) {
			inner *= n[i]
		}
	}
	out := make([]T, total/max(inner, 1))
	if total == 0 {
		return out
	}
	coord, offs := make([]int, len(order)), make([]int, len(data))
	for flat := range total {
		prod := T(1)
		for i, d := range data {
			prod *= d[offs[i]]
		}
		out[flat/inner] += prod
		for a := len(order) - 1; a >= 0; a-- {
			coord[a]++
			for i := range offs {
				offs[i] += strides[i][a]
			}
			if coord[a] < n[a] {
				break
			}
			for i := range offs {
				offs[i] -= strides[i][a] * n[a]
			}
			coord[a] = 0
		}
	}
	return out
}

// Einsum is an Einsum equation resolved against static operand dims:
// the label of each operand axis and of each output axis, and each
// label's size (Sizes, indexed by label; labels no operand uses are -2).
// Letters are labels 0-51; the axes an ellipsis stands for get labels from
// 52 on, right-aligned across operands, and an operand axis of size 1
// whose label is larger broadcasts. The output is, at each combination of
// its labels, the sum over the other labels of the operands' product.
type Einsum struct {
	Inputs [][]int
	Output []int
	Sizes  []int64
}

// Einsum resolves the node's equation for operands of the given dims.
func (c *KernelContext) Einsum(dims [][]int64) (*Einsum, error) {
	ranks := make([]int, len(dims))
	for i, d := range dims {
		ranks[i] = len(d)
	}
	spec, err := parseEinsum(c.String("equation"), ranks)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	size, err := spec.sizes(dims)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	return &Einsum{Inputs: spec.inputs, Output: spec.output, Sizes: size}, nil
}

func runEinsum(c *KernelContext) error {
	dims := make([][]int64, len(c.Inputs))
	for i, t := range c.Inputs {
		if t == nil {
			return c.Errorf("input %d is missing", i)
		}
		dims[i] = t.Dims
	}
	e, err := c.Einsum(dims)
	if err != nil {
		return err
	}
	spec := &einsumSpec{inputs: e.Inputs, output: e.Output, labels: len(e.Sizes)}
	size := e.Sizes
	outDims := make([]int64, len(spec.output))
	for i, l := range spec.output {
		outDims[i] = size[l]
	}
	dt := c.In(0).DType
	if dt.IsFloat() {
		data := make([][]float64, len(c.Inputs))
		for i, t := range c.Inputs {
			data[i] = Float64s(t)
		}
		c.Set(0, FromFloat64s(dt, outDims, einsum(spec, size, dims, data)))
		return nil
	}
	data := make([][]int64, len(c.Inputs))
	for i, t := range c.Inputs {
		data[i] = Int64s(t)
	}
	c.Set(0, FromInt64s(dt, outDims, einsum(spec, size, dims, data)))
	return nil
}
