package ops

import "github.com/kiln-ml/kiln/ir"

// OnHost reports whether a compiled engine computes node n on the host: in
// Go, between runs of its native code, with the node's kernel here. That
// is where a node reads or writes strings (native code has no string
// type, and RegexFullMatch specifies RE2, which is Go's regexp), a
// sequence or an optional at the graph's top level (SequenceInsert,
// SplitToSequence, OptionalGetElement, ...: they move whole tensors, and
// native code has tensors only), or decodes an image (the decoders are
// Go's: image/jpeg, image/png, ...).
// Every other node is native code; so are If, Loop and Scan, whose
// bodies' nodes are judged on their own.
func OnHost(n *ir.Node) bool {
	if n.Domain == "" {
		switch n.OpType {
		case "ImageDecoder":
			return true
		case "If", "Loop", "Scan":
			return false
		}
	}
	for _, vs := range [][]*ir.Value{n.Inputs, n.Outputs} {
		for _, v := range vs {
			if v != nil && HostValue(v.Type) {
				return true
			}
		}
	}
	return false
}

// HostValue reports whether values of type t live on the host in a
// compiled engine: strings, sequences and optionals.
func HostValue(t ir.Type) bool {
	return t.Elem == ir.String || t.Kind == ir.SequenceKind || t.Kind == ir.OptionalKind
}
