package autodiff

import "github.com/kiln-ml/kiln/ir"

func init() {
	gradCases = append(gradCases, []gradCase{
		{op: "Swish", opset: 24, args: []arg{within(-4, 4, 3, 4)}},
		{op: "Swish", opset: 24, args: []arg{in(5)}, attrs: []*ir.Attribute{ir.AttrF("alpha", 1.7)}},
	}...)
}
