package ops

import "github.com/kiln-ml/kiln/ir"

// Int8 says what an op does with 8-bit tensors quantized per tensor
// (x = (q − z)·s, s > 0). It is the one statement read by qdq-propagate
// (which moves the pairs through the ops that pass 8-bit data through),
// fuse-qdq (which groups the ops with an integer kernel), cc quantize's
// plan (which ops get pairs, and which tensors share their input's
// parameters) and --mark-outputs (which 8-bit tensors keep their input's
// parameters).
type Int8 int

const (
	// Int8Float: no integer form; the op reads dequantized floats.
	Int8Float Int8 = iota
	// Int8PassThrough: the op only moves elements (MovementOf), so on the
	// 8-bit values it computes its float result quantized with its data
	// input's scale and zero point, exactly: no requantization. MaxPool
	// too (an increasing map commutes with max); only its output 0 is
	// data (MovedOutputs). Conditions the node alone does not show, which
	// the callers check where the values are known: the op's row must take
	// the 8-bit type (Schema.Types: MaxPool from opset 12); a Concat's
	// inputs must share one scale and zero point; a constant-mode Pad's
	// fill value (PadFill) must be on the grid. Nearest Resize only, and
	// Pad in every mode, as MovementOf says.
	Int8PassThrough
	// Int8Kernel: the op has an integer kernel with its own output
	// parameters (requantized), formed by fuse-qdq into a quantized group
	// of Int8Behaviour.Kind. AveragePool is one, not a pass-through: an
	// average of grid values falls between them.
	Int8Kernel
)

// Int8Behaviour is an op's Int8 and, for an Int8Kernel, the quantized
// group kind its kernel forms.
type Int8Behaviour struct {
	Int8 Int8
	Kind GroupKind
}

// int8Kernels are the ops with an integer kernel, each with why and the
// conditions fuse-qdq checks on the values.
var int8Kernels = map[string]GroupKind{
	// u8·s8 → s32 products: constant int8 weights with zero point 0, per
	// tensor or per output channel; an int32 bias of scale s_x·s_w.
	"Conv":   GroupQConv,
	"Gemm":   GroupQGemm,
	"MatMul": GroupQMatMul,
	// Two per-tensor operands, rescaled to the output's parameters.
	"Add": GroupQAdd,
	"Mul": GroupQMul,
	// Sums of 8-bit values in int32, scaled once.
	"AveragePool":       GroupQPool,
	"GlobalAveragePool": GroupQPool,
	// A function of one 8-bit input is a 256-entry table. These are the
	// activations cc quantize makes tables of (MobileNetV3's HardSwish,
	// Sigmoid and EfficientNet's SiLU, x·Sigmoid(x)); a QDQ model's
	// qlut body may hold any elementwise node of that one input
	// (passes/fuse_qdq.go), whose table the reference computes.
	"Sigmoid":   GroupQLut,
	"HardSwish": GroupQLut,
}

// Int8Of is node n's Int8Behaviour; nodes outside the ONNX domain are
// Int8Float.
func Int8Of(n *ir.Node) Int8Behaviour {
	if n.Domain != "" && n.Domain != "ai.onnx" {
		return Int8Behaviour{}
	}
	if k, ok := int8Kernels[n.OpType]; ok {
		return Int8Behaviour{Int8: Int8Kernel, Kind: k}
	}
	if MovementOf(n) != Computes {
		return Int8Behaviour{Int8: Int8PassThrough}
	}
	return Int8Behaviour{}
}

// PassesInt8 reports whether n passes 8-bit data through (Int8Of).
func PassesInt8(n *ir.Node) bool { return Int8Of(n).Int8 == Int8PassThrough }

// PadFill returns the value a Pad node fills with (0 when nothing is
// filled: the reflect, edge and wrap modes, or no value given) and
// whether it is known; constOf gives a value known at compile time, or
// nil.
func PadFill(n *ir.Node, constOf func(*ir.Value) *ir.Tensor) (float64, bool) {
	if a := n.Attr("mode"); a != nil && a.S != "constant" {
		return 0, true
	}
	if a := n.Attr("value"); a != nil { // before opset 11
		return float64(a.F), true
	}
	v := n.Input(2)
	if v == nil {
		return 0, true
	}
	t := constOf(v)
	if t == nil || t.Len() != 1 {
		return 0, false
	}
	return t.Float64At(0), true
}
