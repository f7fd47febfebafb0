package engine

import (
	"fmt"
	"math"
	"slices"
)

// Debug describes a debug output (TensorRT's markOutput): which value of
// the source model it holds, so that two engines' tensors can be matched
// (infer compare --per-layer), and how to dequantize a quantized one.
// infer run, check and bench leave debug outputs out unless asked.
type Debug struct {
	// Value is the source model's value the tensor holds: its own name,
	// or for the output of a QuantizeLinear the name of its float input.
	Value string `json:"value"`
	// Node is the model node that computed it (a fused group's base op:
	// the node cc quantize --keep-fp32 would name).
	Node string `json:"node,omitempty"`
	// Scale and ZeroPoint, for a quantized tensor, give its float values:
	// (q - ZeroPoint) * Scale, per index along Axis when they hold more
	// than one value (ZeroPoint empty: 0).
	Scale     []float32 `json:"scale,omitempty"`
	ZeroPoint []int32   `json:"zero_point,omitempty"`
	Axis      int       `json:"axis,omitempty"`
	// Layout says a layout op (MaxPool, Reshape, ...) made the quantized
	// tensor from another with the same scale: its error is its input's,
	// none of its own.
	Layout bool `json:"layout,omitempty"`
}

// IsDebug reports whether the binding is a debug output.
func (b Binding) IsDebug() bool { return b.Debug != nil }

// checkDebug checks a binding's debug description: only outputs have one,
// it names a value, and its dequantization parameters are usable.
func (b Binding) checkDebug(input bool) error {
	d := b.Debug
	if d == nil {
		return nil
	}
	if input {
		return fmt.Errorf("an input cannot be a debug output")
	}
	if !validName(d.Value) || d.Node != "" && !validName(d.Node) {
		return fmt.Errorf("debug value or node name %s is malformed", quote(d.Value))
	}
	if len(d.Scale) == 0 {
		if len(d.ZeroPoint) > 0 {
			return fmt.Errorf("debug zero point without a scale")
		}
		return nil
	}
	if !slices.Contains([]string{"int8", "uint8", "int16", "uint16", "int32"}, b.DType) {
		return fmt.Errorf("a %s tensor has a dequantization scale (quantized tensors are integers)", b.DType)
	}
	for _, s := range d.Scale {
		if !(s > 0) || math.IsInf(float64(s), 0) {
			return fmt.Errorf("dequantization scale %g is not a positive finite number", s)
		}
	}
	if len(d.ZeroPoint) > 0 && len(d.ZeroPoint) != len(d.Scale) {
		return fmt.Errorf("%d zero points for %d scales", len(d.ZeroPoint), len(d.Scale))
	}
	if len(d.Scale) > 1 {
		if d.Axis < 0 || d.Axis >= len(b.Shape) || b.Shape[d.Axis] != int64(len(d.Scale)) {
			return fmt.Errorf("%d dequantization scales along axis %d of shape %v", len(d.Scale), d.Axis, b.Shape)
		}
	}
	return nil
}
