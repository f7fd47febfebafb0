// Package text reads and writes ONNX's textual syntax (onnx/docs/Syntax.md)
// as kiln's ir:
//
//	<ir_version: 8, opset_import: ["" : 17]>
//	agraph (float[N,128] X) => (float[N,10] Y)
//	<float[128,10] W = {...}, float[N,10] T>
//	{
//	  [mm] T = MatMul (X, W)
//	  Y = Relu <alpha = 0.5> (T)
//	}
//
// Parse accepts the syntax as ONNX's parser does (attributes before or
// after the inputs, `Op(,x)` or `Op("", x)` for an omitted input, input
// defaults `(float[2] X = {1, 2})`, # comments). Names must be defined
// before they are read; a subgraph reads its enclosing graphs' values.
//
// The printer writes one canonical form that Parse reads back to the same
// ir (ir.Diff reports nothing) and prints again byte for byte:
//
//   - Names that are not identifiers, or that are type words (float, seq,
//     ...) or inf/nan, are quoted. Strings escape only `"` and `\`, with a
//     backslash, as ONNX's parser expects; other bytes appear as they are.
//     Quoted attribute names and quoted names of graph-valued attributes
//     are kiln extensions, used only for names that need them.
//   - `float` is a scalar, `float[]` a tensor of unknown rank, `?` an
//     unknown dim; a value with no type prints as its bare name.
//   - Initializers all go in the `<...>` list after the outputs, in their
//     order; one named like a graph input is that input's default. Then
//     come Graph.ValueInfo entries as `type name`. As in frontend/onnx, a
//     declaration (output or value_info) types a node output of its graph;
//     a value_info naming anything else stays a detached value. So a node
//     output's type survives printing only when it is a graph output or in
//     Graph.ValueInfo.
//   - Node names print as the label `[name]`; overloads as `Op:name`; an
//     omitted input or output as `""`; a node with no outputs as `= Op(...)`.
//     Attributes with subgraphs go after the inputs, one a line.
//   - Attributes carry a `: kind` annotation only where the value cannot
//     tell (empty lists, references `@ref`). Float attributes and float
//     data always look like floats (`1.0`, `inf`, `-nan`).
//   - Tensor data: float and double print the shortest decimal that reads
//     back to the same bits; float16 and bfloat16 the shortest decimal that
//     reads back to the same 16 bits. An integer literal for float16 or
//     bfloat16 is the raw bit pattern, as in ONNX's parser; the printer uses
//     that form only for NaN payloads. Float8 types print bit patterns,
//     int4/uint4 one value per element, complex numbers (re, im) pairs,
//     bool 0/1.
//   - WriteFile moves initializers of more than ExternalThreshold elements
//     to one binary file beside the text, named after it with ".bin" added
//     (model.onnxtxt → model.onnxtxt.bin), each 64-byte aligned, referenced
//     with ONNX's external-data keys, whose values are strings:
//     `= ["location": "model.onnxtxt.bin", "offset": "0", "length": "37632"]`.
//
// The syntax cannot express, so Print drops: doc strings of graphs, nodes,
// values, tensors and attributes; graph and node metadata_props; type and
// dim denotations; NaN payloads of float and double data (the sign stays);
// negative dim values (they print as `?`). Print fails on what would change
// the model's meaning: sparse initializers and sparse-tensor attributes,
// element types it cannot name, and op domains, op types or overloads that
// are not (dotted) identifiers. Model functions and opaque types are not
// supported.
package text

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"

	"github.com/kiln-ml/kiln/internal/readfile"
	"github.com/kiln-ml/kiln/ir"
)

// Parse reads a model in text syntax. filename appears in error messages
// ("file:line:col: ...") and locates external data, which is resolved
// relative to its directory.
func Parse(filename string, src []byte) (*ir.Model, error) {
	return ParseWithin(filename, src, ir.Limits{})
}

// ParseWithin is Parse under the given limits (zero fields take their
// defaults): graphs and types nested deeper than MaxNesting fail in the
// lexer, before the parser recurses, naming the line; tensors over
// MaxTensorBytes fail before they are allocated.
func ParseWithin(filename string, src []byte, lim ir.Limits) (*ir.Model, error) {
	m, _, err := parse(filename, src, lim)
	return m, err
}

// parse is Parse that also returns the resolver, which knows the external
// data files read.
func parse(filename string, src []byte, lim ir.Limits) (*ir.Model, *resolver, error) {
	tokens, err := lexer.Upgrade(newScanner(filename, string(src), lim))
	var ast *astModel
	if err == nil {
		ast, err = parser.ParseFromLexer(tokens)
	}
	if err != nil {
		var perr participle.Error
		if errors.As(err, &perr) {
			return nil, nil, errors.New(participle.FormatError(perr))
		}
		return nil, nil, err
	}
	r := newResolver(filename, lim)
	defer r.close()
	m, err := r.model(ast)
	return m, r, err
}

// ParseFile reads a model from a text file and its external data.
func ParseFile(path string) (*ir.Model, error) {
	m, _, err := ParseFileSources(path)
	return m, err
}

// ParseFileSources is ParseFile that also returns the external-data files
// the model's tensors were read from (joined to the model's folder,
// sorted), so that a caller can refuse to write over any of its inputs.
func ParseFileSources(path string) (*ir.Model, []string, error) {
	return ParseFileWithin(path, ir.Limits{})
}

// ParseFileWithin is ParseFileSources under the given limits: the file's
// size is checked against MaxFileBytes before it is read, and its first
// bytes must lex as text syntax before the rest is read, so a large binary
// file fails at once. Nesting and tensor sizes are checked as in
// ParseWithin.
func ParseFileWithin(path string, lim ir.Limits) (*ir.Model, []string, error) {
	src, err := readfile.Within(path, lim, func(prefix []byte, _ int64) error { return lexPrefix(path, prefix, lim) })
	if err != nil {
		return nil, nil, err
	}
	m, r, err := parse(path, src, lim)
	if err != nil {
		return nil, nil, err
	}
	var files []string
	for loc := range r.external {
		files = append(files, filepath.Join(filepath.Dir(path), loc))
	}
	slices.Sort(files)
	return m, files, nil
}

// lexPrefix lexes the first bytes of a file, failing on what no text model
// can hold (a NUL byte, a character outside the syntax) but not on what
// only cutting the file there made (an unterminated string or tensor).
func lexPrefix(path string, prefix []byte, lim ir.Limits) error {
	s := newScanner(path, string(prefix), lim)
	for {
		tok, err := s.Next()
		var lerr *lexer.Error
		switch {
		case errors.As(err, &lerr) && strings.HasPrefix(lerr.Msg, "unterminated"):
			return nil
		case err != nil:
			var perr participle.Error
			if errors.As(err, &perr) {
				return fmt.Errorf("not ONNX text syntax: %s", participle.FormatError(perr))
			}
			return err
		case tok.EOF():
			return nil
		}
	}
}
