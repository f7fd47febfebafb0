package kernel

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// The 8-, 4- and 2-bit element types (ir/smallfloat.go): kernels read and
// write their codes as bytes and compute with their values in a wider
// type. A code is read through a Uint8 view of its buffer (packed types:
// the byte holding it, shifted and masked); a float code decodes through a
// constant table of its 256 (or 16) values; an integer code sign-extends.
// Rounding a float64 into a small float type counts, by binary search, the
// thresholds between consecutive codes, which are derived from
// ir.EncodeSmallFloat itself (bisection over float64s at compile time), so
// that ir/smallfloat.go stays the one statement of the encodings. A packed
// output is written by a kernel over its bytes, each assembled from its
// elements' codes, so that no two points write one byte.

// IsSmallType reports whether kernels handle d as codes: the small floats
// and the packed integers.
func IsSmallType(d ir.DType) bool { return d.IsSmallFloat() || d.IsPackedInt() }

// smallTypes are the element types IsSmallType takes, for op tables.
var smallTypes = []ir.DType{ir.Float8E4M3FN, ir.Float8E4M3FNUZ, ir.Float8E5M2, ir.Float8E5M2FNUZ, ir.Float8E8M0,
	ir.Float4E2M1, ir.Int4, ir.Uint4, ir.Int2, ir.Uint2}

// SmallTypes are the element types IsSmallType takes, for backends'
// tables (a fresh slice).
func SmallTypes() []ir.DType { return slices.Clone(smallTypes) }

// codeMask is the mask of one code of type d in a byte.
func codeMask(d ir.DType) int64 {
	if b := d.PackedBits(); b > 0 {
		return 1<<b - 1
	}
	return 0xff
}

// ByteView is b's bytes as a Uint8 buffer: b itself viewed as Uint8 for a
// one-byte type, for a packed type its ir.RawLen bytes in one dim.
func ByteView(b *Buffer) *Buffer {
	per := b.DType.PerByte()
	if per == 0 {
		return Reinterpret(b, ir.Uint8)
	}
	v := &Buffer{Name: b.Name + ".bytes", DType: ir.Uint8, Dims: []*Expr{Div(Add(b.Numel(), C(per-1)), C(per))}, ID: b.ID}
	if b.Data != nil {
		v.Data = &ir.Tensor{Name: b.Data.Name, DType: ir.Uint8, Dims: []int64{int64(len(b.Data.Raw))}, Raw: b.Data.Raw}
	}
	return v
}

// codeAt is the code of b's element at idx, as a Uint8.
func codeAt(b *Buffer, idx []*Expr) *Expr { return codeWhere(nil, b, idx) }

// codeWhere is codeAt where cond holds (nil: everywhere) and 0 where it
// does not, reading nothing there (as LoadOr), so that idx may be out of
// range there.
func codeWhere(cond *Expr, b *Buffer, idx []*Expr) *Expr {
	load := func(v *Buffer, at ...*Expr) *Expr {
		if cond == nil {
			return Load(v, at...)
		}
		return LoadOr(cond, v, IntConst(ir.Uint8, 0), at...)
	}
	per := b.DType.PerByte()
	if per == 0 {
		return load(ByteView(b), idx...)
	}
	flat := Offset(b, idx)
	byt := load(ByteView(b), Div(flat, C(per)))
	shift := CastTo(Mul(Rem(flat, C(per)), C(int64(b.DType.PackedBits()))), ir.Uint8)
	return And(Shr(byt, shift), IntConst(ir.Uint8, codeMask(b.DType)))
}

// element is b's element at idx as a computed value: a load, or for a
// small type its decoded value (SmallValue).
func (c *Ctx) element(b *Buffer, idx []*Expr) *Expr {
	if IsSmallType(b.DType) {
		return c.SmallValue(b, idx)
	}
	return Load(b, idx...)
}

// SmallValue is the value of small-type buffer b's element at idx: a
// Float32 for the small floats (exact: each of their values is a float32),
// an Int8 (int4, int2: sign-extended) or a Uint8 (uint4, uint2) for the
// packed integers.
func (c *Ctx) SmallValue(b *Buffer, idx []*Expr) *Expr {
	code := codeAt(b, idx)
	d := b.DType
	if d.IsPackedInt() {
		if lo, _ := ir.PackedIntRange(d); lo < 0 {
			up := IntConst(ir.Int8, int64(8-d.PackedBits()))
			return Shr(Shl(CastTo(code, ir.Int8), up), up)
		}
		return code
	}
	return Load(c.sharedTable(decodeTable(d)), CastTo(code, ir.Int64))
}

// sharedTable is c's table holding t, added once however many loads read it.
func (c *Ctx) sharedTable(t *ir.Tensor) *Buffer {
	for _, b := range c.Tables {
		if b.Data == t {
			return b
		}
	}
	return c.Table(t)
}

var (
	tablesMu  sync.Mutex
	decodes   = map[ir.DType]*ir.Tensor{}
	encodings = map[encodingKey]*encoding{}
)

// decodeTable is the Float32 value of every code of small float type d.
func decodeTable(d ir.DType) *ir.Tensor {
	tablesMu.Lock()
	defer tablesMu.Unlock()
	if t := decodes[d]; t != nil {
		return t
	}
	n := codeMask(d) + 1
	vals := make([]float32, n)
	for code := range vals {
		vals[code] = float32(ir.DecodeSmallFloat(d, uint8(code)))
	}
	t := ir.FromSlice(ir.Float32, []int64{n}, vals)
	decodes[d] = t
	return t
}

// encodingKey is what a rounding into a small float type depends on.
type encodingKey struct {
	d        ir.DType
	saturate bool
	mode     ir.RoundMode
}

// encoding is ir's rounding of a float64 x into one small float type,
// restated as thresholds on |x|, each found by bisection over float64s
// from ir.EncodeSmallFloat (ir.EncodeFloat8E8M0 for float8e8m0):
//
//	NaN                 → nan
//	|x| = 0             → zero
//	0 < |x| < low       → lowCode (float8e8m0 without saturate; low is 0 elsewhere)
//	|x| ≥ over          → big (infinity, NaN or the largest finite code)
//	else                → the number of bounds ≤ |x| (codes 0 ... top)
//
// and, for the types with a sign bit, a negative x gets its magnitude's
// code with sign set, or negZero where that code is 0.
type encoding struct {
	bounds     *ir.Tensor // Float64: bounds[k] is the least |x| of a code above k; +Inf past top
	top        uint8
	low, over  float64
	nan, zero  uint8
	lowCode    uint8
	big        uint8
	sign       uint8 // 0: the code is the magnitude's (float8e8m0)
	negZero    uint8
	searchStep int64 // half the table's length: the binary search's first step
}

// encodeRef is ir's rounding of x into key's type.
func (key encodingKey) encodeRef(x float64) uint8 {
	if key.d == ir.Float8E8M0 {
		return ir.EncodeFloat8E8M0(x, key.saturate, key.mode)
	}
	return ir.EncodeSmallFloat(key.d, x, key.saturate)
}

// least is the least float64 in [lo, hi] (non-negative, p(hi) true, p
// false below the answer) where p holds: a bisection over the values'
// bits, which order as the values do.
func least(lo, hi float64, p func(float64) bool) float64 {
	if p(lo) {
		return lo
	}
	a, b := math.Float64bits(lo), math.Float64bits(hi) // p(a) false, p(b) true
	for b-a > 1 {
		m := a + (b-a)/2
		if p(math.Float64frombits(m)) {
			b = m
		} else {
			a = m
		}
	}
	return math.Float64frombits(b)
}

// encodingOf derives (once) the rounding into d with the given options,
// and checks the derivation against ir at the values it treats apart.
func encodingOf(d ir.DType, saturate bool, mode ir.RoundMode) (*encoding, error) {
	if !d.IsSmallFloat() {
		return nil, fmt.Errorf("%s is not a small float type", d)
	}
	if d != ir.Float8E8M0 {
		mode = ir.RoundUp // the others round to nearest even whatever the mode
	}
	key := encodingKey{d, saturate, mode}
	tablesMu.Lock()
	defer tablesMu.Unlock()
	if e := encodings[key]; e != nil {
		return e, nil
	}
	enc := key.encodeRef
	e := &encoding{nan: enc(math.NaN()), zero: enc(0), big: enc(math.Inf(1))}
	// The largest finite code: the greatest whose value is positive,
	// finite and encodes back to it.
	for code := int(codeMask(d)); code > 0; code-- {
		if v := ir.DecodeSmallFloat(d, uint8(code)); v > 0 && !math.IsInf(v, 0) && enc(v) == uint8(code) {
			e.top = uint8(code)
			break
		}
	}
	topValue := ir.DecodeSmallFloat(d, e.top)
	e.over = least(topValue, math.Inf(1), func(a float64) bool { return enc(a) == e.big })
	tiny := math.SmallestNonzeroFloat64
	if e.lowCode = enc(tiny); e.lowCode != 0 {
		e.low = least(tiny, topValue, func(a float64) bool { return enc(a) != e.lowCode })
	}
	if enc(-1) != enc(1) {
		e.sign = enc(-topValue) ^ enc(topValue)
		e.negZero = enc(math.Copysign(0, -1))
	}
	n := int64(2)
	for n <= int64(e.top) {
		n *= 2
	}
	// The counted region starts at low (or at the least positive value:
	// zero may encode apart, as float8e8m0's NaN without saturate).
	from := max(e.low, tiny)
	bounds := make([]float64, n)
	for k := range bounds {
		bounds[k] = math.Inf(1)
		if k < int(e.top) {
			code := uint8(k + 1)
			bounds[k] = least(from, topValue, func(a float64) bool { return enc(a) >= code })
		}
	}
	e.bounds = ir.FromSlice(ir.Float64, []int64{n}, bounds)
	e.searchStep = n / 2
	if err := e.check(key); err != nil {
		return nil, err
	}
	encodings[key] = e
	return e, nil
}

// check compares the encoding with ir at the values it treats apart and
// around each threshold: a type whose rules the form above cannot state
// is refused rather than rounded wrong.
func (e *encoding) check(key encodingKey) error {
	probes := []float64{math.NaN(), math.Copysign(math.NaN(), -1), 0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1),
		math.SmallestNonzeroFloat64, e.low, e.over, math.Nextafter(e.over, 0)}
	for _, b := range ir.Data[float64](e.bounds) {
		if !math.IsInf(b, 0) {
			probes = append(probes, b, math.Nextafter(b, 0))
		}
	}
	for _, p := range probes {
		for _, x := range []float64{p, math.Copysign(p, -1)} {
			if got, want := e.apply(x), key.encodeRef(x); got != want {
				return fmt.Errorf("rounding %g into %s: the derived thresholds give %#x, ir %#x", x, key.d, got, want)
			}
		}
	}
	return nil
}

// apply is the encoding computed in Go, as Encode's expression computes it.
func (e *encoding) apply(x float64) uint8 {
	a := math.Abs(x)
	bounds := ir.Data[float64](e.bounds)
	var m uint8
	switch {
	case math.IsNaN(x):
		m = e.nan
	case a == 0:
		m = e.zero
	case a < e.low:
		m = e.lowCode
	case a >= e.over:
		m = e.big
	default:
		pos := int64(0)
		for s := e.searchStep; s >= 1; s /= 2 {
			if bounds[pos+s-1] <= a {
				pos += s
			}
		}
		m = uint8(pos)
	}
	if e.sign != 0 && math.Signbit(x) {
		if m == 0 {
			return e.negZero
		}
		return m | e.sign
	}
	return m
}

// EncodeSmallFloat is the code (Uint8) of x, a Float64, rounded into small
// float type d as ir.EncodeSmallFloat (ir.EncodeFloat8E8M0 by mode) does.
func (c *Ctx) EncodeSmallFloat(d ir.DType, x *Expr, saturate bool, mode ir.RoundMode) (*Expr, error) {
	if x.Type != ir.Float64 {
		return nil, fmt.Errorf("kernel: encoding a %s into %s (want float64)", x.Type, d)
	}
	e, err := encodingOf(d, saturate, mode)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", c.Node, err) // a rule the thresholds do not state: a bug to see, not a gap
	}
	u8 := func(v uint8) *Expr { return IntConst(ir.Uint8, int64(v)) }
	bounds := c.sharedTable(e.bounds)
	a := Abs(x)
	pos := C(0)
	for s := e.searchStep; s >= 1; s /= 2 {
		pos = Select(Le(Load(bounds, Add(pos, C(s-1))), a), Add(pos, C(s)), pos)
	}
	m := CastTo(pos, ir.Uint8)
	m = Select(Ge(a, Const(ir.Float64, e.over)), u8(e.big), m)
	if e.low > 0 {
		m = Select(Lt(a, Const(ir.Float64, e.low)), u8(e.lowCode), m)
	}
	if e.zero != 0 {
		m = Select(Eq(a, Const(ir.Float64, 0)), u8(e.zero), m)
	}
	m = Select(IsNaN(x), u8(e.nan), m)
	if e.sign == 0 {
		return m, nil
	}
	negative := Lt(Bitcast(x, ir.Int64), C(0)) // the sign bit, a NaN's too
	signed := Select(Eq(m, u8(0)), u8(e.negZero), Or(m, u8(e.sign)))
	return Select(negative, signed, m), nil
}

// encodeTo is the code (Uint8) of value v converted to small type d as
// ONNX's Cast converts (ir/ops' reference): into a small float through
// float64, rounded; into a packed integer truncated toward zero
// (saturating into int64, as floats convert to integers), then wrapped to
// the type's bits.
func (c *Ctx) encodeTo(d ir.DType, v *Expr, saturate bool, mode ir.RoundMode) (*Expr, error) {
	if d.IsSmallFloat() {
		return c.EncodeSmallFloat(d, CastTo(v, ir.Float64), saturate, mode)
	}
	if v.Type.IsFloat() {
		v = CastTo(v, ir.Int64)
	}
	return And(CastTo(v, ir.Uint8), IntConst(ir.Uint8, codeMask(d))), nil
}

// storeCodes is the kernel writing code (a Uint8 at the point Vars of
// out's space) as out's elements: a map over a one-byte type's view, or
// for a packed type a map over its bytes, each the OR of its elements'
// codes in place (the last byte's unused bits 0).
func storeCodes(out *Buffer, code *Expr) *Kernel {
	per := out.DType.PerByte()
	if per == 0 {
		v := ByteView(out)
		return &Kernel{Out: v, Space: v.Dims, Value: code}
	}
	bytes := ByteView(out)
	n := out.Numel()
	bits := int64(out.DType.PackedBits())
	var val *Expr
	for j := range per {
		e := Add(Mul(Var(0), C(per)), C(j))
		cj := Subst(code, unflatten(Min(e, Sub(n, C(1))), out.Dims))
		if j > 0 {
			cj = Select(Lt(e, n), Shl(cj, IntConst(ir.Uint8, j*bits)), IntConst(ir.Uint8, 0))
			val = Or(val, cj)
		} else {
			val = cj
		}
	}
	return &Kernel{Out: bytes, Space: bytes.Dims, Value: val}
}

// unflatten is the row-major coordinates in dims of element flat.
func unflatten(flat *Expr, dims []*Expr) []*Expr {
	idx := make([]*Expr, len(dims))
	stride := C(1)
	for i := len(dims) - 1; i >= 0; i-- {
		q := Div(flat, stride)
		if i > 0 {
			q = Rem(q, dims[i])
		}
		idx[i] = q
		stride = Mul(stride, dims[i])
	}
	return idx
}

// castSmall defines Cast and CastLike where either side is a small type:
// the input's values (decoded) convert as CastTo does, into a small type
// by encodeTo; a cast to the input's own type copies the bytes.
func castSmall(c *Ctx, to ir.DType) error {
	x, out := c.In[0], c.Out[0]
	if x.DType == to {
		src, dst := ByteView(x), ByteView(out)
		c.Emit(&Kernel{Out: dst, Space: dst.Dims, Value: Load(src, Vars(dst.Rank())...)})
		return nil
	}
	saturate, mode, err := c.CastOptions()
	if err != nil {
		return fmt.Errorf("%s: %v", c.Node, err)
	}
	v := c.element(x, Vars(x.Rank()))
	if !IsSmallType(to) {
		c.Emit(copyOf(out, StoreAs(CastTo(v, to), to)))
		return nil
	}
	code, err := c.encodeTo(to, v, saturate, mode)
	if err != nil {
		return err
	}
	c.Emit(storeCodes(out, code))
	return nil
}

// moving is the row of a moving op (ops.MovementOf) by its definition
// build, which takes types and, through movesCodes, the small types.
func moving(types []ir.DType, build func(*Ctx) error) *OpDef {
	return &OpDef{Types: concat(types, smallTypes), Build: movesCodes(build)}
}

// movesCodes runs a moving op's definition on a small type as on Uint8
// codes: a one-byte type's buffers are viewed as Uint8 (moving codes is
// moving bytes); a packed type's buffers are stood in for by Uint8 buffers
// of one code per element, a load of which becomes the code it reads
// (codeAt), and an output's bytes are assembled from the codes written
// (storeCodes) — through a Uint8 scratch of codes where the definition
// writes the output in parts (Concat's inputs), since a packed byte holds
// elements of two parts.
func movesCodes(build func(*Ctx) error) func(*Ctx) error {
	return func(c *Ctx) error {
		d := c.In[0].DType
		if !IsSmallType(d) {
			return build(c)
		}
		if ops.MovementOf(c.Node) == ops.Computes {
			return &ops.UnsupportedError{Domain: c.Node.Domain, Op: c.Node.OpType, Opset: c.Opset, DType: d}
		}
		sub, stands := onCodes(c, d)
		if err := build(sub); err != nil {
			return err
		}
		c.Kernels, c.Temps, c.Tables = sub.Kernels, sub.Temps, sub.Tables
		return c.packCodes(stands)
	}
}

// onCodes is c with its buffers and constants of type d as Uint8 codes,
// and the packed buffers' stand-ins (stand-in → the buffer it stands for).
func onCodes(c *Ctx, d ir.DType) (*Ctx, map[*Buffer]*Buffer) {
	stands := map[*Buffer]*Buffer{}
	codes := func(bs []*Buffer) []*Buffer {
		out := make([]*Buffer, len(bs))
		for i, b := range bs {
			switch {
			case b == nil || b.DType != d:
				out[i] = b
			case d.PerByte() == 0:
				out[i] = Reinterpret(b, ir.Uint8)
			default:
				out[i] = &Buffer{Name: b.Name + ".codes", DType: ir.Uint8, Dims: b.Dims, ID: b.ID}
				stands[out[i]] = b
			}
		}
		return out
	}
	sub := *c
	sub.In, sub.Out = codes(c.In), codes(c.Out)
	sub.Consts = make([]*ir.Tensor, len(c.Consts))
	for i, t := range c.Consts {
		sub.Consts[i] = t
		if t != nil && t.DType == d {
			sub.Consts[i] = codeTensor(t)
		}
	}
	kc := *c.KernelContext
	kc.Inputs = sub.Consts // the constants ir/ops resolves parameters from (Pad's constant_value)
	sub.KernelContext = &kc
	return &sub, stands
}

// codeTensor is t's element codes, one a byte, as a Uint8 tensor.
func codeTensor(t *ir.Tensor) *ir.Tensor {
	u := ir.NewTensor(ir.Uint8, t.Dims...)
	u.Name = t.Name
	for i := range u.Raw {
		u.Raw[i] = t.Code(i)
	}
	return u
}

// packCodes rewrites c's kernels, built on stand-ins of packed buffers
// (stands), to read and write the packed buffers: loads of an input's
// stand-in read codes (readCodes); an output written by one plain map is
// written by storeCodes with that map's value, else its writers fill a
// Uint8 scratch of codes that storeCodes then packs.
func (c *Ctx) packCodes(stands map[*Buffer]*Buffer) error {
	if len(stands) == 0 {
		return nil
	}
	for _, k := range c.Kernels {
		k.Value, k.When = readCodes(k.Value, stands), readCodes(k.When, stands)
		for i, e := range k.Store {
			k.Store[i] = readCodes(e, stands)
		}
	}
	for stand, b := range stands {
		var writers []int
		for i, k := range c.Kernels {
			if k.Out == stand {
				writers = append(writers, i)
			}
		}
		switch {
		case len(writers) == 0: // an input
		case len(writers) == 1 && Inlinable(c.Kernels[writers[0]]):
			k := c.Kernels[writers[0]]
			packed := storeCodes(b, k.Value)
			packed.Name = k.Name
			c.Kernels[writers[0]] = packed
		default:
			scratch := c.Temp(ir.Uint8, b.Dims...)
			for _, i := range writers {
				c.Kernels[i].Out = scratch
			}
			c.Emit(storeCodes(b, Load(scratch, Vars(b.Rank())...)))
		}
	}
	for _, k := range c.Kernels {
		for _, b := range kernelBuffers(k) {
			if stands[b] != nil {
				return fmt.Errorf("%s: kernel %s still reads or writes %s", c.Node, k.Name, b.Name) // a definition's form packCodes does not see
			}
		}
	}
	return nil
}

// readCodes is e with each load of a stand-in (stands) replaced by the
// code of its packed buffer's element there; a conditional load reads it
// only where its condition holds.
func readCodes(e *Expr, stands map[*Buffer]*Buffer) *Expr {
	memo := map[*Expr]*Expr{}
	var rec func(*Expr) *Expr
	rec = func(e *Expr) *Expr {
		if e == nil {
			return nil
		}
		if r, ok := memo[e]; ok {
			return r
		}
		args := make([]*Expr, len(e.Args))
		changed := false
		for i, a := range e.Args {
			args[i] = rec(a)
			changed = changed || args[i] != a
		}
		r := e
		switch b := stands[e.Buf]; {
		case b != nil && e.Op == OpLoad:
			r = codeAt(b, args)
		case b != nil && e.Op == OpLoadOr:
			r = Select(args[0], codeWhere(args[0], b, args[2:]), args[1])
		case changed:
			r = rebuild(e, args)
		}
		memo[e] = r
		return r
	}
	return rec(e)
}
