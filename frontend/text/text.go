// Package text reads and writes ONNX's textual syntax (onnx/docs/Syntax.md)
// as kiln's ir:
//
//	<ir_version: 8, opset_import: ["" : 17]>
//	agraph (float[N,128] X) => (float[N,10] Y)
//	<float[128,10] W = {...}, float[N,10] T>
//	{
//	  [mm] T = MatMul(X, W)
//	  Y = Relu <alpha = 0.5> (T)
//	}
//
// The printer writes one canonical form that Parse reads back to the same ir
// (ir.Diff reports nothing) and prints again byte for byte:
//
//   - Names that are not identifiers, or that are type words (float, seq,
//     ...) or inf/nan, are quoted. Strings escape only `"` and `\`, with a
//     backslash, as ONNX's parser expects; other bytes appear as they are.
//   - Initializers all go in the `<...>` list after the outputs, in their
//     order; an initializer named like a graph input is that input's default
//     (Parse also accepts ONNX's `(float[2] X = {...})` input form). Then
//     come Graph.ValueInfo entries, as `type name`. Only those values carry
//     a printed type besides inputs and outputs.
//   - Node names print as the node label `[name]`; overloads as `Op:name`;
//     an omitted input or output as `""`.
//   - Attributes carry a `: kind` annotation only where the value cannot
//     tell (empty lists, attribute references `@ref`). Float attributes and
//     float literals always look like floats (`1.0`, `inf`, `-nan`).
//   - Tensor data: float and double print the shortest decimal that reads
//     back to the same bits (inf, -inf, nan, -nan); float16 and bfloat16
//     print as decimals (`0.5`), and an integer literal for them is the raw
//     bit pattern, as in ONNX's parser, which the printer uses only for a
//     NaN payload a decimal cannot carry. Float8 types print bit patterns;
//     int4/uint4 one value per element; complex numbers as (re, im) pairs;
//     bool as 0/1.
//   - WriteFile moves initializers of more than ExternalThreshold elements
//     to one binary file beside the text, named after it with ".bin" added
//     (model.onnxtxt → model.onnxtxt.bin), each 64-byte aligned, referenced
//     as `= ["location": "model.onnxtxt.bin", "offset": "0", "length":
//     "37632"]` (ONNX's external-data keys; values are strings).
//
// The syntax cannot express, so Print drops: doc strings of graphs, nodes,
// values, tensors and attributes; graph and node metadata_props; type and
// dim denotations; NaN payloads of float and double data (the sign stays);
// negative dims other than "unknown". Print fails on what would change the
// meaning of the model: sparse initializers and sparse-tensor attributes,
// element types it cannot name, and op domains that are not dotted
// identifiers. Model functions are not supported.
package text

import (
	"errors"
	"os"

	"github.com/alecthomas/participle/v2"

	"github.com/kiln-ml/kiln/ir"
)

// Parse reads a model in text syntax. filename appears in error messages
// ("file:line:col: ...") and locates external data, which is resolved
// relative to its directory.
func Parse(filename string, src []byte) (*ir.Model, error) {
	ast, err := parser.ParseBytes(filename, src)
	if err != nil {
		var perr participle.Error
		if errors.As(err, &perr) {
			return nil, errors.New(participle.FormatError(perr))
		}
		return nil, err
	}
	r := newResolver(filename)
	return r.model(ast)
}

// ParseFile reads a model from a text file and its external data.
func ParseFile(path string) (*ir.Model, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, src)
}
