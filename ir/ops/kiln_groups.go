package ops

import (
	"fmt"
	"slices"

	"github.com/kiln-ml/kiln/ir"
)

// GroupKind is a kiln.FusionGroup's "kind": the pattern the fusion pass
// matched, which the backend lowers without searching for it again.
type GroupKind string

// The fusion-group kinds, by the pass that forms them.
const (
	// fuse-epilogue: a Conv, Gemm or MatMul and what its store applies;
	// conv-dw a 1×1 Conv and its activation feeding a depthwise Conv's
	// group.
	GroupConv          GroupKind = "conv"
	GroupGemm          GroupKind = "gemm"
	GroupMatMul        GroupKind = "matmul"
	GroupConvDepthwise GroupKind = "conv-dw"
	// fuse-elementwise: a DAG of elementwise nodes over one output shape
	// (no roles), and the decomposed LayerNormalization.
	GroupElementwise GroupKind = "elementwise"
	GroupLayerNorm   GroupKind = "layernorm"
	// fuse-qdq: a quantized op with the DequantizeLinear nodes feeding it
	// and the QuantizeLinear taking its result, for an integer kernel
	// (Int8Of says which ops form which).
	GroupQConv   GroupKind = "qconv"
	GroupQGemm   GroupKind = "qgemm"
	GroupQMatMul GroupKind = "qmatmul"
	GroupQAdd    GroupKind = "qadd"
	GroupQMul    GroupKind = "qmul"
	GroupQPool   GroupKind = "qpool"
	GroupQLut    GroupKind = "qlut"
)

// Role is a body node's part in its group's pattern (the "roles"
// attribute holds one per body node, in order).
type Role string

const (
	// Epilogues (conv, gemm, matmul; the depthwise part of conv-dw; the
	// quantized linear and binary groups).
	RoleBase       Role = "base"       // the op the group is built on (every base of a qlut chain)
	RoleBias       Role = "bias"       // an Add of a constant bias along the last dim (MatMul has no bias operand)
	RoleResidual   Role = "residual"   // an Add of a tensor of the product's shape
	RoleActivation Role = "activation" // a function of the value alone (Relu, Clip, SiLU's nodes, ...)
	// conv-dw.
	RoleExpand           Role = "expand"            // the 1×1 Conv
	RoleExpandActivation Role = "expand-activation" // the nodes of its activation
	RoleDepthwise        Role = "depthwise"         // the depthwise Conv
	// layernorm: the elementwise group computing its input, the seven
	// nodes of the pattern (LayerNormCore), the group applied to its
	// output.
	RolePrologue   Role = "prologue"
	RoleMean       Role = "mean"
	RoleCenter     Role = "center"
	RoleSquare     Role = "square"
	RoleVariance   Role = "variance"
	RoleAddEpsilon Role = "add-epsilon"
	RoleSqrt       Role = "sqrt"
	RoleNormalize  Role = "normalize"
	RoleEpilogue   Role = "epilogue"
	// The quantized groups' QDQ nodes.
	RoleDQInput    Role = "dq-input"    // an activation's DequantizeLinear
	RoleDQWeight   Role = "dq-weight"   // the constant int8 weights' DequantizeLinear
	RoleDQBias     Role = "dq-bias"     // the constant int32 bias's DequantizeLinear
	RoleDQResidual Role = "dq-residual" // the residual's DequantizeLinear
	RoleQOutput    Role = "q-output"    // the QuantizeLinear every quantized group ends in
)

// Dequantizes reports whether r is a quantized group's DequantizeLinear
// of one of its operands.
func (r Role) Dequantizes() bool {
	switch r {
	case RoleDQInput, RoleDQWeight, RoleDQBias, RoleDQResidual:
		return true
	}
	return false
}

// LayerNormCore are the roles of a layernorm group's pattern, in order:
// ReduceMean, Sub, Mul or Pow, ReduceMean, Add, Sqrt, Div.
var LayerNormCore = []Role{RoleMean, RoleCenter, RoleSquare, RoleVariance, RoleAddEpsilon, RoleSqrt, RoleNormalize}

// groupRoles are the roles each kind's body nodes may have; an
// elementwise group has none.
var groupRoles = map[GroupKind][]Role{
	GroupConv:          {RoleBase, RoleResidual, RoleActivation},
	GroupGemm:          {RoleBase, RoleResidual, RoleActivation},
	GroupMatMul:        {RoleBase, RoleBias, RoleResidual, RoleActivation},
	GroupConvDepthwise: {RoleExpand, RoleExpandActivation, RoleDepthwise, RoleResidual, RoleActivation},
	GroupElementwise:   nil,
	GroupLayerNorm:     append(append([]Role{RolePrologue}, LayerNormCore...), RoleEpilogue),
	GroupQConv:         {RoleDQInput, RoleDQWeight, RoleDQBias, RoleBase, RoleDQResidual, RoleResidual, RoleActivation, RoleQOutput},
	GroupQGemm:         {RoleDQInput, RoleDQWeight, RoleDQBias, RoleBase, RoleDQResidual, RoleResidual, RoleActivation, RoleQOutput},
	GroupQMatMul:       {RoleDQInput, RoleDQWeight, RoleDQBias, RoleBase, RoleBias, RoleDQResidual, RoleResidual, RoleActivation, RoleQOutput},
	GroupQAdd:          {RoleDQInput, RoleBase, RoleActivation, RoleQOutput},
	GroupQMul:          {RoleDQInput, RoleBase, RoleActivation, RoleQOutput},
	GroupQPool:         {RoleDQInput, RoleBase, RoleQOutput},
	GroupQLut:          {RoleDQInput, RoleBase, RoleQOutput},
}

// GroupKinds lists every kind, sorted.
func GroupKinds() []GroupKind {
	kinds := make([]GroupKind, 0, len(groupRoles))
	for k := range groupRoles {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	return kinds
}

// Known reports whether k is a kind kiln's passes form.
func (k GroupKind) Known() bool {
	_, ok := groupRoles[k]
	return ok
}

// Roles are the roles k's body nodes may have (nil for an elementwise
// group, which has none).
func (k GroupKind) Roles() []Role { return groupRoles[k] }

// Quantized reports whether k is a fuse-qdq kind: its body a QDQ float
// simulation of an integer kernel.
func (k GroupKind) Quantized() bool {
	switch k {
	case GroupQConv, GroupQGemm, GroupQMatMul, GroupQAdd, GroupQMul, GroupQPool, GroupQLut:
		return true
	}
	return false
}

// RolesAttr is the "roles" attribute holding roles.
func RolesAttr(roles []Role) *ir.Attribute {
	ss := make([]string, len(roles))
	for i, r := range roles {
		ss[i] = string(r)
	}
	return ir.AttrSs("roles", ss...)
}

// GroupOf returns fusion group n's kind and roles (nil for an elementwise
// group) after checking them: a kind kiln forms, and for the kinds with
// roles one allowed role per body node.
func GroupOf(n *ir.Node) (GroupKind, []Role, error) {
	ka, ba := n.Attr("kind"), n.Attr("body")
	if ka == nil || ba == nil || ba.G == nil {
		return "", nil, fmt.Errorf("%s: a fusion group needs the attributes kind and body", n)
	}
	kind := GroupKind(ka.S)
	allowed, ok := groupRoles[kind]
	if !ok {
		return "", nil, fmt.Errorf("%s: unknown fusion-group kind %q (kiln forms %q)", n, ka.S, GroupKinds())
	}
	ra := n.Attr("roles")
	if allowed == nil {
		if ra != nil && len(ra.Strings) > 0 {
			return "", nil, fmt.Errorf("%s: a %s group has no roles, but its roles attribute holds %d", n, kind, len(ra.Strings))
		}
		return kind, nil, nil
	}
	body := ba.G.Nodes
	if ra == nil || len(ra.Strings) != len(body) {
		got := 0
		if ra != nil {
			got = len(ra.Strings)
		}
		return "", nil, fmt.Errorf("%s: a %s group has %d roles for its %d body nodes (one per node)", n, kind, got, len(body))
	}
	roles := make([]Role, len(body))
	for i, s := range ra.Strings {
		roles[i] = Role(s)
		if !slices.Contains(allowed, roles[i]) {
			return "", nil, fmt.Errorf("%s: body node %d, %s, has the role %q, not one of a %s group's %q", n, i, body[i], s, kind, allowed)
		}
	}
	return kind, roles, nil
}

// CheckGroups checks every fusion group of g and of its subgraphs
// (GroupOf), as the pipeline's verification does after each pass.
func CheckGroups(g *ir.Graph) error {
	for _, n := range g.Nodes {
		if n.Domain == ir.KilnDomain && n.OpType == FusionGroup {
			if _, _, err := GroupOf(n); err != nil {
				return err
			}
		}
		for _, sg := range n.Subgraphs() {
			if err := CheckGroups(sg); err != nil {
				return err
			}
		}
	}
	return nil
}
