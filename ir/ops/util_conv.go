package ops

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/kiln-ml/kiln/ir"
)

// Helpers the conv family wrote and every family may use: attribute
// declarations for schema rows, shape and dtype checks for inference, and
// parallelFor for hot kernels.

// Attribute declarations; defInts declares an optional attribute without
// a default.

func defInt(name string, v int64) AttrDef {
	return AttrDef{Name: name, Kind: ir.AttrInt, Default: ir.AttrI(name, v)}
}

func defFloat(name string, v float32) AttrDef {
	return AttrDef{Name: name, Kind: ir.AttrFloat, Default: ir.AttrF(name, v)}
}

func defString(name, v string) AttrDef {
	return AttrDef{Name: name, Kind: ir.AttrString, Default: ir.AttrS(name, v)}
}

func defInts(name string) AttrDef { return AttrDef{Name: name, Kind: ir.AttrInts} }

// declares reports whether the row declares attribute name, for helpers
// shared by rows of different versions (MaxPool gained dilations in v10).
func (a attrs) declares(name string) bool {
	for _, d := range a.schema.Attrs {
		if d.Name == name {
			return true
		}
	}
	return false
}

// dimValue returns a static dim's size, or -1.
func dimValue(d ir.Dim) int64 {
	if d.IsStatic() {
		return d.Value
	}
	return -1
}

// knownDims returns a shape's dims with -1 for every dim that is not static.
func knownDims(s ir.Shape) []int64 {
	out := make([]int64, len(s.Dims))
	for i, d := range s.Dims {
		out[i] = dimValue(d)
	}
	return out
}

// dimOf makes a static dim from n, or an unknown one when n < 0.
func dimOf(n int64) ir.Dim {
	if n < 0 {
		return ir.UnknownDim()
	}
	return ir.D(n)
}

// parallelFor calls f(i) for every i in [0, n) on up to GOMAXPROCS
// goroutines. The hot reference kernels split independent output planes
// with it; each call writes its own memory, so results do not depend on the
// schedule. A panic in f is re-raised in the caller's goroutine, where the
// executor's recover turns it into an error.
func parallelFor(n int, f func(i int)) {
	workers := min(n, runtime.GOMAXPROCS(0))
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		once    sync.Once
		panicky any
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					once.Do(func() { panicky = r })
				}
			}()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				f(i)
			}
		}()
	}
	wg.Wait()
	if panicky != nil {
		panic(panicky)
	}
}

// dimsOf returns a shape's dims, or rank unknown dims when it is unranked.
func dimsOf(s ir.Shape, rank int) []ir.Dim {
	if s.Ranked {
		return s.Dims
	}
	out := make([]ir.Dim, rank)
	for i := range out {
		out[i] = ir.UnknownDim()
	}
	return out
}

// sameElem checks that the inputs at idx share an element type (where
// known) and returns it.
func sameElem(c *InferContext, idx ...int) (ir.DType, error) {
	elem, from := ir.Undefined, 0
	for _, i := range idx {
		e := c.In(i).Elem
		switch {
		case e == ir.Undefined || !c.HasInput(i):
		case elem == ir.Undefined:
			elem, from = e, i
		case e != elem:
			return elem, c.Errorf("input %d is %s, input %d %s", from, elem, i, e)
		}
	}
	return elem, nil
}

// optFloat64s converts an optional input.
func optFloat64s(t *ir.Tensor) []float64 {
	if t == nil {
		return nil
	}
	return Float64s(t)
}
