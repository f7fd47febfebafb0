package passes

import (
	"fmt"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// convLayoutPass decides, for every convolution, the algorithm and so the
// layout its weights are packed in, and records it on the convolution's
// fusion group as the attribute "algorithm" (a Conv without an epilogue
// gets a group of its own). The backend says what it can do and measures
// where it must (a ConvChooser Target; for the CPU: Winograd F(4×4,3×3) or
// F(2×2,3×3) with weights transformed into 36 or 16 [OC][C] matrices,
// im2col or banded im2col with weights in register-tile row panels, 1×1
// straight on NCHW, grouped/depthwise on NCHW, or a conv-dw group's fused
// kernel); it then compiles what the graph says. Without a backend (no
// hook) the pass does nothing.
func convLayoutPass(c *Context, m *ir.Model) error {
	chooser, ok := c.Target.(ConvChooser)
	if !ok {
		return nil
	}
	f, err := newFuser(c, m)
	if err != nil {
		return err
	}
	var bare []group
	for _, n := range m.Graph.Nodes {
		if n.Domain == "" && n.OpType == "Conv" && n.Outputs[0].Type.Elem == ir.Float32 {
			bare = append(bare, group{kind: ops.GroupConv, nodes: []*ir.Node{n}, roles: []ops.Role{ops.RoleBase}})
		}
	}
	f.apply(bare)
	for _, n := range m.Graph.Nodes {
		if n.Domain != ir.KilnDomain || n.OpType != ops.FusionGroup {
			continue
		}
		kind := ops.GroupKind(n.Attr("kind").S)
		if kind != ops.GroupConv && kind != ops.GroupConvDepthwise {
			continue
		}
		algo, err := chooser.ConvAlgorithm(m, n)
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		if algo != "" { // "": the target cannot compile it (and will say so)
			n.SetAttr(ir.AttrS("algorithm", algo))
		}
	}
	return nil
}
