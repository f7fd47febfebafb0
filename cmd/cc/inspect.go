package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/internal/cli"
	"github.com/kiln-ml/kiln/internal/limitflags"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/runtime/reference"
)

var inspectCmd = &cli.Command{
	Name:    "inspect",
	Args:    "MODEL|ENGINE",
	Summary: "describe a model (header, inputs and outputs, ops, parameters, what kiln does not support) or an engine",
	Help: `For an engine (.kiln) inspect verifies the file and prints its metadata: the source
model and its hash, precision, target and required CPU features, inputs and outputs,
arena size, thread cap, kernel count, build flags and section sizes (--json: keys
file, metadata, section_bytes).

MODEL is a .onnx or .onnxtxt file. inspect prints the IR version, producer,
opset imports, the graph's inputs and outputs with dtype and shape, a histogram
of op types (nodes in subgraphs included), the parameter count and size (the
initializers), every op/opset/dtype combination the reference executor does
not support, found after shape inference, and what the CPU backend (cc build)
cannot compile: ops, dtypes and attributes it has no kernel for, and values
whose shapes are not static.

--json prints the same as one JSON object with these keys: file, ir_version,
producer_name, producer_version, domain, model_version, graph_name, opsets
[{domain, version}], inputs and outputs [{name, type, dtype, shape}] (shape is a
list of dims: a number, a symbol's name, or null when unknown; null for unknown
rank), initializer_inputs, nodes, ops [{op, domain, count}], initializers,
parameters, parameter_bytes, shape_inference ("ok" or the error),
unsupported [{domain, op, opset, dtype, reason, message}], all_supported,
cpu_unsupported (the same form; "op" is empty when the check itself failed, and
"reason" says why), cpu_all_supported.`,
	MinArgs: 1,
	MaxArgs: 1,
	Setup: func(fs *flag.FlagSet) cli.RunFunc {
		asJSON := fs.Bool("json", false, "print one JSON object")
		limits := limitflags.Add(fs, limitflags.Tensor, limitflags.File, limitflags.Nesting)
		return func(env *cli.Env, args []string) error {
			if filepath.Ext(args[0]) == engineExt {
				return inspectEngine(args[0], *asJSON, env.Stdout)
			}
			m, err := readModel(args[0], limits.Limits())
			if err != nil {
				return err
			}
			info := inspect(args[0], m, limits.Limits())
			if *asJSON {
				enc := json.NewEncoder(env.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			}
			info.print(env.Stdout)
			return nil
		}
	},
}

// inspection is what `cc inspect` reports. Its JSON keys are stable.
type inspection struct {
	File              string        `json:"file"`
	IRVersion         int64         `json:"ir_version"`
	ProducerName      string        `json:"producer_name"`
	ProducerVersion   string        `json:"producer_version"`
	Domain            string        `json:"domain"`
	ModelVersion      int64         `json:"model_version"`
	GraphName         string        `json:"graph_name"`
	Opsets            []opsetInfo   `json:"opsets"`
	Inputs            []valueInfo   `json:"inputs"`
	Outputs           []valueInfo   `json:"outputs"`
	InitializerInputs int           `json:"initializer_inputs"`
	Nodes             int           `json:"nodes"`
	Ops               []opCount     `json:"ops"`
	Initializers      int           `json:"initializers"`
	Parameters        int64         `json:"parameters"`
	ParameterBytes    int64         `json:"parameter_bytes"`
	ShapeInference    string        `json:"shape_inference"`
	Unsupported       []unsupported `json:"unsupported"`
	AllSupported      bool          `json:"all_supported"`
	CPUUnsupported    []unsupported `json:"cpu_unsupported"`
	CPUAllSupported   bool          `json:"cpu_all_supported"`
}

type opsetInfo struct {
	Domain  string `json:"domain"`
	Version int64  `json:"version"`
}

type valueInfo struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	DType string `json:"dtype"`
	Shape []any  `json:"shape"`
}

type opCount struct {
	Op     string `json:"op"`
	Domain string `json:"domain"`
	Count  int    `json:"count"`
}

type unsupported struct {
	Domain  string `json:"domain"`
	Op      string `json:"op"`
	Opset   int64  `json:"opset"`
	DType   string `json:"dtype"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func inspect(file string, m *ir.Model, lim ir.Limits) *inspection {
	g := m.Graph
	info := &inspection{
		File:            file,
		IRVersion:       m.IRVersion,
		ProducerName:    m.ProducerName,
		ProducerVersion: m.ProducerVersion,
		Domain:          m.Domain,
		ModelVersion:    m.ModelVersion,
		GraphName:       g.Name,
		Opsets:          []opsetInfo{},
		Inputs:          []valueInfo{},
		Outputs:         []valueInfo{},
		Ops:             []opCount{},
		Unsupported:     []unsupported{},
		Initializers:    len(g.Initializers),
	}
	for _, o := range m.OpsetImports {
		info.Opsets = append(info.Opsets, opsetInfo{domainName(o.Domain), o.Version})
	}
	for _, v := range g.Inputs {
		if v.IsConst() {
			info.InitializerInputs++ // a weight with a default, as old exporters wrote them
			continue
		}
		info.Inputs = append(info.Inputs, describeValue(v))
	}
	for _, v := range g.Outputs {
		info.Outputs = append(info.Outputs, describeValue(v))
	}
	for _, v := range g.Initializers {
		n := v.Const.Len()
		info.Parameters += n
		if v.Const.DType == ir.String {
			for _, s := range v.Const.Strings {
				info.ParameterBytes += int64(len(s))
			}
		} else {
			info.ParameterBytes += int64(ir.RawLen(v.Const.DType, n))
		}
	}
	info.Nodes, info.Ops = histogram(g)

	// Declared inputs and outputs are printed above as the model states
	// them; inference now types the intermediates so the support check sees
	// every node's dtype.
	info.ShapeInference = "ok"
	if err := inferShapes(m, lim); err != nil {
		var ue *ops.UnsupportedError
		if errors.As(err, &ue) {
			info.ShapeInference = inferenceStopped
		} else {
			info.ShapeInference = strings.TrimSpace(strings.SplitN(err.Error(), "\n", 2)[0])
		}
	}
	var list reference.UnsupportedErrors
	if err := reference.Unsupported(m); err != nil && !errors.As(err, &list) {
		list = reference.UnsupportedErrors{{Reason: err.Error()}}
	}
	for _, e := range list {
		info.Unsupported = append(info.Unsupported, describeUnsupported(e))
	}
	info.AllSupported = len(info.Unsupported) == 0
	info.CPUUnsupported = cpuUnsupported(m)
	info.CPUAllSupported = len(info.CPUUnsupported) == 0
	return info
}

func describeUnsupported(e *ops.UnsupportedError) unsupported {
	u := unsupported{Domain: domainName(e.Domain), Op: e.Op, Opset: e.Opset, Reason: e.Reason, Message: e.Error()}
	if e.DType != ir.Undefined {
		u.DType = e.DType.String()
	}
	return u
}

// cpuUnsupported lists what the CPU backend cannot compile; a check that
// fails (a model that does not verify, a panic) is one entry saying why.
func cpuUnsupported(m *ir.Model) (list []unsupported) {
	list = []unsupported{}
	defer func() {
		if r := recover(); r != nil {
			msg := fmt.Sprintf("internal error in the CPU backend's check: %v", r)
			list = []unsupported{{Reason: msg, Message: msg}}
		}
	}()
	err := cpu.Unsupported(m)
	var all cpu.UnsupportedErrors
	var one *ops.UnsupportedError
	switch {
	case err == nil:
	case errors.As(err, &all):
		for _, e := range all {
			list = append(list, describeUnsupported(e))
		}
	case errors.As(err, &one):
		list = append(list, describeUnsupported(one))
	default:
		msg := strings.TrimSpace(strings.SplitN(err.Error(), "\n", 2)[0])
		list = append(list, unsupported{Reason: msg, Message: msg})
	}
	return list
}

// inferenceStopped is the shape_inference of a model with an op that kiln
// does not support: the unsupported list says which.
const inferenceStopped = "stopped at an unsupported op"

// inferShapes runs shape inference, turning a panic in it into an error:
// inspect should describe even a model that trips inference.
func inferShapes(m *ir.Model, lim ir.Limits) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("internal error in shape inference: %v", r)
		}
	}()
	_, err = ops.InferShapesWithin(m, lim)
	return err
}

// histogram counts nodes by op type, subgraphs included, most frequent
// first.
func histogram(g *ir.Graph) (int, []opCount) {
	type key struct{ domain, op string }
	counts := map[key]int{}
	total := 0
	var walk func(*ir.Graph)
	walk = func(g *ir.Graph) {
		for _, n := range g.Nodes {
			counts[key{domainName(n.Domain), n.OpType}]++
			total++
			for _, sg := range n.Subgraphs() {
				walk(sg)
			}
		}
	}
	walk(g)
	list := []opCount{}
	for k, c := range counts {
		list = append(list, opCount{Op: k.op, Domain: k.domain, Count: c})
	}
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		if a.Domain != b.Domain {
			return a.Domain < b.Domain
		}
		return a.Op < b.Op
	})
	return total, list
}

// domainName spells the default ONNX domain "ai.onnx".
func domainName(d string) string {
	if d == "" {
		return "ai.onnx"
	}
	return d
}

func describeValue(v *ir.Value) valueInfo {
	vi := valueInfo{Name: v.Name, Type: v.Type.String()}
	if v.Type.Kind == ir.TensorKind || v.Type.Kind == ir.SparseTensorKind {
		vi.DType = v.Type.Elem.String()
	}
	if v.Type.Shape.Ranked {
		vi.Shape = []any{}
		for _, d := range v.Type.Shape.Dims {
			switch {
			case d.IsStatic():
				vi.Shape = append(vi.Shape, d.Value)
			case d.IsSymbolic():
				vi.Shape = append(vi.Shape, d.Param)
			default:
				vi.Shape = append(vi.Shape, nil)
			}
		}
	}
	return vi
}

func (info *inspection) print(w io.Writer) {
	row := func(label, format string, args ...any) {
		fmt.Fprintf(w, "%-12s %s\n", label, terminalSafe(fmt.Sprintf(format, args...)))
	}
	row("model", "%s", info.File)
	row("ir version", "%d", info.IRVersion)
	producer := strings.TrimSpace(info.ProducerName + " " + info.ProducerVersion)
	if producer == "" {
		producer = "(none)"
	}
	row("producer", "%s", producer)
	var opsets []string
	for _, o := range info.Opsets {
		opsets = append(opsets, fmt.Sprintf("%s %d", o.Domain, o.Version))
	}
	row("opsets", "%s", strings.Join(opsets, ", "))
	graph := info.GraphName
	if graph == "" {
		graph = "(unnamed)"
	}
	row("graph", "%s, %s nodes", graph, commas(int64(info.Nodes)))
	width := 0
	for _, v := range append(append([]valueInfo{}, info.Inputs...), info.Outputs...) {
		width = max(width, len(v.Name))
	}
	printValues(row, "inputs", info.Inputs, width)
	if info.InitializerInputs > 0 {
		row("", "(and %d inputs with initializer defaults)", info.InitializerInputs)
	}
	printValues(row, "outputs", info.Outputs, width)
	row("parameters", "%s (%s) in %d initializers, %s bytes (%s)",
		commas(info.Parameters), short(info.Parameters), info.Initializers,
		commas(info.ParameterBytes), binaryBytes(info.ParameterBytes))
	width = 1
	if len(info.Ops) > 0 {
		width = len(strconv.Itoa(info.Ops[0].Count))
	}
	label := "ops"
	for _, o := range info.Ops {
		name := o.Op
		if o.Domain != "ai.onnx" {
			name = o.Domain + "." + o.Op
		}
		row(label, "%*d  %s", width, o.Count, name)
		label = ""
	}
	if label != "" {
		row(label, "(none)")
	}
	if info.ShapeInference != "ok" && info.ShapeInference != inferenceStopped {
		row("shapes", "inference failed: %s", info.ShapeInference)
	}
	printUnsupported(row, "support", info.Unsupported, "all ops supported")
	printUnsupported(row, "cpu backend", info.CPUUnsupported, "compiles every node")
}

func printUnsupported(row func(string, string, ...any), label string, list []unsupported, none string) {
	if len(list) == 0 {
		row(label, "%s", none)
		return
	}
	row(label, "%d unsupported:", len(list))
	for _, u := range list {
		row("", "  %s", strings.TrimPrefix(u.Message, "unsupported: "))
	}
}

func printValues(row func(string, string, ...any), label string, vs []valueInfo, width int) {
	for _, v := range vs {
		row(label, "%-*s  %s", width, v.Name, v.Type)
		label = ""
	}
	if label != "" {
		row(label, "(none)")
	}
}

// terminalSafe escapes, as %q would, what a terminal acts on or cannot
// show in a line of a listing: control characters (a newline, an ANSI
// escape sequence in a name), format characters (bidirectional overrides)
// and bytes that are not UTF-8. The rest is left as it is, so a plain name
// prints plainly.
func terminalSafe(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// commas prints n with thousands separators: 11,684,712.
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// short prints n with a decimal SI suffix: 11.68M.
func short(n int64) string {
	f := float64(n)
	for _, u := range []struct {
		div    float64
		suffix string
	}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "K"}} {
		if f >= u.div {
			return fmt.Sprintf("%.2f%s", f/u.div, u.suffix)
		}
	}
	return strconv.FormatInt(n, 10)
}

// binaryBytes prints a byte count in binary units: 44.57 MiB.
func binaryBytes(n int64) string {
	f := float64(n)
	for _, u := range []struct {
		div    float64
		suffix string
	}{{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if f >= u.div {
			return fmt.Sprintf("%.2f %s", f/u.div, u.suffix)
		}
	}
	return fmt.Sprintf("%d B", n)
}
