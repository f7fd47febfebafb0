package ops

import "github.com/kiln-ml/kiln/ir"

// OnHost reports whether a compiled engine computes node n on the host: in
// Go, between runs of its native code, with the node's kernel here. That
// is where a node reads or writes strings (native code has no string
// type, and RegexFullMatch specifies RE2, which is Go's regexp) or
// decodes an image (the decoders are Go's: image/jpeg, image/png, ...).
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
			if v != nil && v.Type.Elem == ir.String {
				return true
			}
		}
	}
	return false
}
