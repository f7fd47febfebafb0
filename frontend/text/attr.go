package text

import (
	"math"
	"strconv"

	"github.com/kiln-ml/kiln/ir"
)

// attrKinds maps the `name: kind = ...` annotations to kinds.
var attrKinds = func() map[string]ir.AttrKind {
	m := map[string]ir.AttrKind{}
	for k := ir.AttrFloat; k <= ir.AttrTypeProtos; k++ {
		m[k.String()] = k
	}
	return m
}()

// listKind maps an element kind to the kind of a list of them.
var listKind = map[ir.AttrKind]ir.AttrKind{
	ir.AttrFloat: ir.AttrFloats, ir.AttrInt: ir.AttrInts, ir.AttrString: ir.AttrStrings,
	ir.AttrTensor: ir.AttrTensors, ir.AttrGraph: ir.AttrGraphs, ir.AttrTypeProto: ir.AttrTypeProtos,
}

func (r *resolver) attr(a *astAttr, sc *scope) (*ir.Attribute, error) {
	name := unquote(a.Name)
	at := &ir.Attribute{Name: name}
	want := ir.AttrUndefined
	if a.Kind != "" {
		k, ok := attrKinds[a.Kind]
		if !ok {
			return nil, errorf(a.Pos, "unknown attribute kind %q", a.Kind)
		}
		want = k
	}
	if !a.IsList && a.Single.Ref != "" {
		at.Kind, at.RefAttrName = want, a.Single.Ref
		return at, nil
	}
	if !a.IsList {
		v, err := r.attrElem(a.Single, sc)
		if err != nil {
			return nil, err
		}
		if v.Kind == ir.AttrInt && want == ir.AttrFloat {
			v.Kind, v.F, v.I = ir.AttrFloat, float32(v.I), 0
		}
		if want != ir.AttrUndefined && v.Kind != want {
			return nil, errorf(a.Pos, "attribute %q is annotated %s but holds a %s", name, want, v.Kind)
		}
		v.Name = name
		return v, nil
	}
	// A list's kind comes from its annotation, else from its elements; ints
	// mixed with floats make floats.
	elems := make([]*ir.Attribute, len(a.List))
	kind := ir.AttrUndefined
	for _, k := range listKind {
		if k == want {
			kind = want
		}
	}
	if want != ir.AttrUndefined && kind == ir.AttrUndefined {
		return nil, errorf(a.Pos, "attribute %q is annotated %s but holds a list", name, want)
	}
	for i, e := range a.List {
		if e.Ref != "" {
			return nil, errorf(e.Pos, "an attribute reference cannot be a list element")
		}
		v, err := r.attrElem(e, sc)
		if err != nil {
			return nil, err
		}
		elems[i] = v
		switch k := listKind[v.Kind]; {
		case kind == ir.AttrUndefined, kind == ir.AttrInts && k == ir.AttrFloats:
			kind = k
		case kind == ir.AttrFloats && k == ir.AttrInts:
		case kind != k:
			return nil, errorf(e.Pos, "attribute %q mixes %s with %s", name, kind, v.Kind)
		}
	}
	if kind == ir.AttrUndefined {
		return nil, errorf(a.Pos, "empty list attribute %q needs a kind annotation (%s: ints = [])", name, name)
	}
	at.Kind = kind
	for _, v := range elems {
		switch kind {
		case ir.AttrFloats:
			if v.Kind == ir.AttrInt {
				v.F = float32(v.I)
			}
			at.Floats = append(at.Floats, v.F)
		case ir.AttrInts:
			at.Ints = append(at.Ints, v.I)
		case ir.AttrStrings:
			at.Strings = append(at.Strings, v.S)
		case ir.AttrTensors:
			at.Tensors = append(at.Tensors, v.T)
		case ir.AttrGraphs:
			at.Graphs = append(at.Graphs, v.G)
		case ir.AttrTypeProtos:
			at.TypeProtos = append(at.TypeProtos, *v.TP)
		}
	}
	return at, nil
}

// attrElem reads one attribute value into an unnamed attribute.
func (r *resolver) attrElem(e *astAttrElem, sc *scope) (*ir.Attribute, error) {
	switch {
	case e.Typed != nil && e.Typed.Data == nil:
		if e.Typed.Name != nil {
			return nil, errorf(e.Typed.Name.Pos, "expected tensor data after %s", e.Typed.Name.Value)
		}
		t, err := r.typ(e.Typed.Type)
		return &ir.Attribute{Kind: ir.AttrTypeProto, TP: &t}, err
	case e.Typed != nil:
		t, err := r.tensor(e.Typed.Type, e.Typed.Data)
		if err != nil {
			return nil, err
		}
		if e.Typed.Name != nil {
			t.Name = unquote(*e.Typed.Name)
		}
		return &ir.Attribute{Kind: ir.AttrTensor, T: t}, nil
	case e.Named != nil && e.Named.Graph != nil:
		g, err := r.graph(e.Named.Tok, e.Named.Graph, sc)
		return &ir.Attribute{Kind: ir.AttrGraph, G: g}, err
	case e.Named != nil && e.Named.Tok.Type == tokString:
		return &ir.Attribute{Kind: ir.AttrString, S: unquote(e.Named.Tok)}, nil
	case e.Ref != "":
		return nil, errorf(e.Pos, "unexpected attribute reference")
	}
	var l literal
	if e.Lit != nil {
		l = literal{neg: e.Lit.Neg, tok: e.Lit.Tok}
	} else {
		l = literal{tok: e.Named.Tok} // inf or nan, checked below
	}
	switch l.tok.Type {
	case tokInt:
		s, err := l.number()
		if err != nil {
			return nil, err
		}
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, errorf(l.tok.Pos, "%s is out of range for int attributes", s)
		}
		return &ir.Attribute{Kind: ir.AttrInt, I: i}, nil
	}
	bits, err := l.floatBits(32)
	if err != nil {
		return nil, err
	}
	return &ir.Attribute{Kind: ir.AttrFloat, F: math.Float32frombits(uint32(bits))}, nil
}
