package dimexpr

import (
	"errors"
	"fmt"
)

// Eval computes e's value with each symbol bound by env. It fails on a
// symbol env lacks, on int64 overflow, and on nil.
func (e *Expr) Eval(env map[string]int64) (int64, error) {
	if e == nil {
		return 0, errors.New("the dimension is unknown")
	}
	total := int64(0)
	for _, t := range e.terms {
		v := t.coef
		for _, f := range t.mono {
			x, err := f.a.eval(env)
			if err != nil {
				return 0, err
			}
			for range f.pow {
				var ok bool
				if v, ok = mulOK(v, x); !ok {
					return 0, fmt.Errorf("%s overflows int64", e)
				}
			}
		}
		var ok bool
		if total, ok = addOK(total, v); !ok {
			return 0, fmt.Errorf("%s overflows int64", e)
		}
	}
	return total, nil
}

func (a *atom) eval(env map[string]int64) (int64, error) {
	switch a.kind {
	case symAtom:
		v, ok := env[a.name]
		if !ok {
			return 0, fmt.Errorf("symbol %s has no value", a.key)
		}
		return v, nil
	case floorAtom:
		n, err := a.num.Eval(env)
		return FloorDiv(n, a.den), err
	}
	var out int64
	for i, x := range a.args {
		v, err := x.Eval(env)
		if err != nil {
			return 0, err
		}
		if i == 0 || a.kind == minAtom && v < out || a.kind == maxAtom && v > out {
			out = v
		}
	}
	return out, nil
}

// Op is the operation of a Node.
type Op int

// The node operations. Add and Mul take two or more arguments; FloorDiv
// takes a numerator and a positive constant divisor; Min and Max take two
// or more.
const (
	OpConst Op = iota
	OpSym
	OpAdd
	OpMul
	OpFloorDiv
	OpMin
	OpMax
)

var opNames = [...]string{"Const", "Sym", "Add", "Mul", "FloorDiv", "Min", "Max"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Node is an expression as a tree, for code generators: Value is set for
// OpConst, Name for OpSym, Args for the rest. FloorDiv rounds toward
// negative infinity (its divisor is a positive constant, so a backend
// dividing a possibly negative numerator must adjust C's truncation).
type Node struct {
	Op    Op
	Value int64
	Name  string
	Args  []Node
}

// Tree returns e's structure: a sum of products of coefficients and
// atoms, with powers spelled out as repeated factors. Nil gives an OpSym
// node named "?".
func (e *Expr) Tree() Node {
	if e == nil {
		return Node{Op: OpSym, Name: "?"}
	}
	var terms []Node
	for _, t := range e.terms {
		var fs []Node
		if t.coef != 1 || len(t.mono) == 0 {
			fs = append(fs, Node{Op: OpConst, Value: t.coef})
		}
		for _, f := range t.mono {
			n := f.a.tree()
			for range f.pow {
				fs = append(fs, n)
			}
		}
		terms = append(terms, wrap(OpMul, fs))
	}
	if len(terms) == 0 {
		return Node{Op: OpConst}
	}
	return wrap(OpAdd, terms)
}

func wrap(op Op, args []Node) Node {
	if len(args) == 1 {
		return args[0]
	}
	return Node{Op: op, Args: args}
}

func (a *atom) tree() Node {
	switch a.kind {
	case symAtom:
		return Node{Op: OpSym, Name: a.name}
	case floorAtom:
		return Node{Op: OpFloorDiv, Args: []Node{a.num.Tree(), {Op: OpConst, Value: a.den}}}
	}
	op := OpMin
	if a.kind == maxAtom {
		op = OpMax
	}
	args := make([]Node, len(a.args))
	for i, x := range a.args {
		args[i] = x.Tree()
	}
	return Node{Op: op, Args: args}
}

// Eval computes a tree's value, as Expr.Eval does; code generators can
// test their lowering against it.
func (n Node) Eval(env map[string]int64) (int64, error) {
	switch n.Op {
	case OpConst:
		return n.Value, nil
	case OpSym:
		v, ok := env[n.Name]
		if !ok {
			return 0, fmt.Errorf("symbol %s has no value", n.Name)
		}
		return v, nil
	}
	vals := make([]int64, len(n.Args))
	for i, a := range n.Args {
		v, err := a.Eval(env)
		if err != nil {
			return 0, err
		}
		vals[i] = v
	}
	if len(vals) == 0 {
		return 0, fmt.Errorf("%s node without arguments", n.Op)
	}
	out := vals[0]
	for _, v := range vals[1:] {
		var ok bool
		switch n.Op {
		case OpAdd:
			out, ok = addOK(out, v)
		case OpMul:
			out, ok = mulOK(out, v)
		case OpFloorDiv:
			if v <= 0 {
				return 0, fmt.Errorf("floor division by %d", v)
			}
			out, ok = FloorDiv(out, v), true
		case OpMin:
			out, ok = min(out, v), true
		case OpMax:
			out, ok = max(out, v), true
		default:
			return 0, fmt.Errorf("unknown op %s", n.Op)
		}
		if !ok {
			return 0, errors.New("overflow")
		}
	}
	return out, nil
}
