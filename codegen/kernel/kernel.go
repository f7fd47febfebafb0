package kernel

import (
	"fmt"

	"github.com/kiln-ml/kiln/ir"
)

// Kernel is one loop nest: for every point of Space (the coordinates
// Var(0) ... Var(len(Space)-1)) it computes Value and writes it to Out.
// What each element is (Value) is all a kernel says; how the loops run
// (vector lanes, threads, order) is a schedule's business, and no
// schedule changes the result beyond the reassociation of reductions.
//
// Variants, by the optional fields:
//   - a map: Value at each point, written at the point (Store nil, Space
//     equal to Out's dims) or at Store's index (a copy into a region, or a
//     scatter), only where When holds;
//   - a reduction (Reduce): Value is evaluated over the reduction axes
//     too (RVar) and combined, then Post gives the stored value;
//   - a scan (Scan): Value is combined along one axis, in order;
//   - a selection (TopK): the k best along one axis, with their indices.
type Kernel struct {
	Name  string
	Out   *Buffer
	Space []*Expr
	Value *Expr
	// Store is the index in Out written at each point (nil: the point).
	Store []*Expr
	// When, a Bool, limits the points that store (nil: all).
	When *Expr
	// Combine merges the stored value with what Out holds (a scatter's
	// reduction); None overwrites.
	Combine ReduceOp
	// Serial kernels run their points in order on one thread: scatters,
	// where a later point may write where an earlier one did.
	Serial bool

	Reduce *Reduce
	Scan   *Scan
	TopK   *TopK
}

// ReduceOp combines values.
type ReduceOp int

// The reductions.
const (
	None ReduceOp = iota
	SumOp
	ProdOp
	MaxOp
	MinOp
	ArgMaxOp // the index (along the single reduction axis) of the largest
	ArgMinOp
)

func (o ReduceOp) String() string {
	return [...]string{"none", "sum", "prod", "max", "min", "argmax", "argmin"}[o]
}

// Reduce makes a kernel a reduction over Extents (the axes RVar(0), ...).
type Reduce struct {
	Op      ReduceOp
	Extents []*Expr
	// Post computes the stored value from the reduced one (Acc) and the
	// point; nil stores Acc.
	Post *Expr
	// Last makes ArgMax/ArgMin pick the last of equal values (else the
	// first).
	Last bool
}

// Scan makes a kernel a running combination of Value along Space's Axis:
// each output is Op over the values up to it (before it when Exclusive;
// from the end when Reverse).
type Scan struct {
	Axis      int
	Op        ReduceOp // SumOp or ProdOp
	Exclusive bool
	Reverse   bool
}

// TopK makes a kernel a selection: Out (and Indices, int64) get, along
// Space's Axis, the K best of the N candidates Value gives when Var(Axis)
// is a candidate's position, best first (Largest: greatest first); equal
// values keep their order, and NaN counts as less than every number (Go's
// cmp.Compare order, as the reference sorts).
type TopK struct {
	Axis    int
	N       *Expr
	Largest bool
	Indices *Buffer
}

// Check validates a kernel's structure.
func (k *Kernel) Check() error {
	if k.Out == nil || k.Value == nil {
		return fmt.Errorf("kernel %s: no output or value", k.Name)
	}
	if k.Store == nil && len(k.Space) != k.Out.Rank() {
		return fmt.Errorf("kernel %s: a space of rank %d for an output of rank %d", k.Name, len(k.Space), k.Out.Rank())
	}
	if k.Store != nil && len(k.Store) != k.Out.Rank() {
		return fmt.Errorf("kernel %s: a store index of rank %d for an output of rank %d", k.Name, len(k.Store), k.Out.Rank())
	}
	if k.When != nil && k.When.Type != ir.Bool {
		return fmt.Errorf("kernel %s: When is %s, not bool", k.Name, k.When.Type)
	}
	n := 0
	for _, v := range []bool{k.Reduce != nil, k.Scan != nil, k.TopK != nil} {
		if v {
			n++
		}
	}
	if n > 1 {
		return fmt.Errorf("kernel %s: at most one of Reduce, Scan and TopK", k.Name)
	}
	if r := k.Reduce; r != nil {
		if (r.Op == ArgMaxOp || r.Op == ArgMinOp) && len(r.Extents) != 1 {
			return fmt.Errorf("kernel %s: %s over %d axes (want 1)", k.Name, r.Op, len(r.Extents))
		}
	}
	if s := k.Scan; s != nil && (s.Axis < 0 || s.Axis >= len(k.Space)) {
		return fmt.Errorf("kernel %s: scan axis %d of %d", k.Name, s.Axis, len(k.Space))
	}
	if t := k.TopK; t != nil && (t.Axis < 0 || t.Axis >= len(k.Space) || t.Indices == nil) {
		return fmt.Errorf("kernel %s: bad selection", k.Name)
	}
	return nil
}

// Points is the number of points of the iteration space.
func (k *Kernel) Points() *Expr { return Product(k.Space) }
