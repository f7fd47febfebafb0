package cpu

import (
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// quantizedLowerings maps each quantized fusion-group kind this backend
// computes with integer kernels (passes/fuse_qdq.go) to its judgement of
// one group's body: whether that kernel covers it.
var quantizedLowerings = map[ops.GroupKind]func(body []*ir.Node, roles []ops.Role) bool{}

// QuantizedKernel reports whether this backend lowers a quantized group of
// kind with the given body and roles (Target.QuantizedKernel): a group it
// declines stays unfused, its dequantization, float op and quantization
// computed as they are written.
func QuantizedKernel(kind ops.GroupKind, body []*ir.Node, roles []ops.Role) bool {
	ok := quantizedLowerings[kind]
	return ok != nil && ok(body, roles)
}
