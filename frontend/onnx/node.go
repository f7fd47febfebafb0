package onnx

import (
	"fmt"

	"github.com/kiln-ml/kiln/ir"
)

// NodeProto field numbers.
const (
	nodeInput         = 1
	nodeOutput        = 2
	nodeName          = 3
	nodeOpType        = 4
	nodeAttribute     = 5
	nodeDocString     = 6
	nodeDomain        = 7
	nodeOverload      = 8
	nodeMetadataProps = 9
)

// rawNode is a node whose outputs are defined but whose input names and
// attributes wait for the graph's names to be known.
type rawNode struct {
	*ir.Node
	inputs []string
	attrs  [][]byte
}

func readNode(b []byte) (*rawNode, error) {
	n := &rawNode{Node: &ir.Node{}}
	var outputs []string
	err := eachField(b, func(f field) (err error) {
		var s string
		switch f.num {
		case nodeInput:
			s, err = f.str()
			n.inputs = append(n.inputs, s)
		case nodeOutput:
			s, err = f.str()
			outputs = append(outputs, s)
		case nodeName:
			n.Name, err = f.str()
		case nodeOpType:
			n.OpType, err = f.str()
		case nodeAttribute:
			err = collect(&n.attrs, f)
		case nodeDocString:
			n.DocString, err = f.str()
		case nodeDomain:
			n.Domain, err = f.str()
		case nodeOverload:
			n.Overload, err = f.str()
		case nodeMetadataProps:
			err = collectPair(&n.Metadata, f)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	n.Outputs = make([]*ir.Value, len(outputs))
	for i, name := range outputs {
		if name != "" { // "" is an omitted optional output
			n.Outputs[i] = &ir.Value{Name: name, Producer: n.Node}
		}
	}
	return n, nil
}

// resolveNode binds the node's input names to values and decodes its
// attributes, whose subgraphs see the node's graph as their outer scope.
func (d *decoder) resolveNode(n *rawNode, sc *scope) error {
	n.Inputs = make([]*ir.Value, len(n.inputs))
	for i, name := range n.inputs {
		if name == "" {
			continue // an omitted optional input
		}
		v := sc.lookup(name)
		switch {
		case v == nil && sc.isSparse(name):
			return fmt.Errorf("%s: input %q is a sparse initializer, which kiln cannot compute with", n, name)
		case v == nil:
			return fmt.Errorf("%s: input %q is not defined (no node, graph input or initializer produces it)", n, name)
		}
		n.Inputs[i] = v
	}
	for _, b := range n.attrs {
		a, err := d.attribute(b, sc)
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		n.Attrs = append(n.Attrs, a)
	}
	return nil
}

func appendNode(b []byte, n *ir.Node) ([]byte, error) {
	for _, v := range n.Inputs {
		b = appendStringAlways(b, nodeInput, valueName(v))
	}
	for _, v := range n.Outputs {
		b = appendStringAlways(b, nodeOutput, valueName(v))
	}
	b = appendString(b, nodeName, n.Name)
	b = appendString(b, nodeOpType, n.OpType)
	var err error
	for _, a := range n.Attrs {
		b = appendMessage(b, nodeAttribute, func(b []byte) []byte {
			if err == nil {
				b, err = appendAttribute(b, a)
			}
			return b
		})
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n, err)
	}
	b = appendString(b, nodeDocString, n.DocString)
	b = appendString(b, nodeDomain, n.Domain)
	b = appendString(b, nodeOverload, n.Overload)
	return appendPairs(b, nodeMetadataProps, n.Metadata), nil
}

func valueName(v *ir.Value) string {
	if v == nil {
		return ""
	}
	return v.Name
}
