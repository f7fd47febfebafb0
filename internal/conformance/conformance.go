// Package conformance runs ONNX backend-test folders (model.onnx plus
// test_data_set_*/input_*.pb and output_*.pb) against a backend and judges
// the outputs, as ONNX's own backend test runner does.
package conformance

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Backend turns a model into something that runs it.
type Backend interface {
	// Prepare compiles or loads the model. An error wrapping an
	// *ops.UnsupportedError marks the test UNSUPPORTED rather than FAIL.
	Prepare(m *ir.Model) (Runner, error)
}

// Runner runs a prepared model.
type Runner interface {
	Run(inputs map[string]*ir.Tensor) (map[string]*ir.Tensor, error)
}

// Status of one test.
type Status string

// Test outcomes.
const (
	Pass        Status = "PASS"
	Fail        Status = "FAIL"
	Unsupported Status = "UNSUPPORTED"
)

// Result is one test's outcome.
type Result struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
}

// Tolerance judges float outputs. With RelL2 > 0 an output passes when its
// relative L2 error is at most RelL2 (the zoo's criterion); otherwise every
// element must satisfy |got-want| <= Atol + Rtol*|want| (numpy.allclose).
type Tolerance struct {
	Rtol, Atol float64
	RelL2      float64
}

// DefaultTolerance is ONNX's backend-test default for float32.
var DefaultTolerance = Tolerance{Rtol: 1e-3, Atol: 1e-7}

// Discover expands paths into test folders: a folder holding model.onnx is
// a test; otherwise its immediate subfolders that hold one are. The result
// is sorted by path.
func Discover(paths []string) ([]string, error) {
	var tests []string
	for _, p := range paths {
		if isTest(p) {
			tests = append(tests, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		found := false
		for _, e := range entries {
			sub := filepath.Join(p, e.Name())
			if e.IsDir() && isTest(sub) {
				tests = append(tests, sub)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("%s: no model.onnx in it or in its subfolders", p)
		}
	}
	sort.Strings(tests)
	return tests, nil
}

func isTest(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, "model.onnx"))
	return err == nil && !st.IsDir()
}

// readLimited is a backend with limits, which RunTest reads the test's
// model and data under too.
type readLimited interface{ ReadLimits() ir.Limits }

// RunTest runs every test_data_set_* of one test folder.
func RunTest(dir string, b Backend, tol Tolerance) (res Result) {
	res.Name = filepath.Base(dir)
	defer func() {
		if r := recover(); r != nil {
			res.Status, res.Detail = Fail, fmt.Sprintf("internal error: %v", r)
		}
	}()
	var lim ir.Limits
	if l, ok := b.(readLimited); ok {
		lim = l.ReadLimits()
	}
	m, _, err := onnx.ReadFileWithin(filepath.Join(dir, "model.onnx"), lim)
	if err != nil {
		return Result{res.Name, Fail, err.Error()}
	}
	sets, _ := filepath.Glob(filepath.Join(dir, "test_data_set_*"))
	if len(sets) == 0 {
		return Result{res.Name, Fail, "no test_data_set_* folders"}
	}
	sort.Strings(sets)
	notes := conformInputs(m, sets[0], lim)
	if fix := knownDefects[res.Name]; fix != nil {
		notes = append(notes, fix(m))
	}
	runner, err := b.Prepare(m)
	if err != nil {
		return classify(res.Name, err)
	}
	if c, ok := runner.(io.Closer); ok {
		defer c.Close() // a compiled engine's code and threads
	}
	var details []string
	for _, set := range sets {
		inputs, want, err := loadSet(m, set, lim)
		if err != nil {
			return classify(res.Name, err)
		}
		got, err := runner.Run(inputs)
		if err != nil {
			return classify(res.Name, err)
		}
		detail, ok := compareOutputs(m, inputs, want, got, tol)
		if !ok {
			return Result{res.Name, Fail, filepath.Base(set) + ": " + detail}
		}
		details = append(details, detail)
	}
	return Result{res.Name, Pass, strings.Join(append(notes, details...), "; ")}
}

// conformInputs makes the model's declared input shapes agree with the test
// data where they differ (a few ONNX tests feed an unused input whose data
// does not match its declaration; ONNX's runner never checks). Each change
// is reported in the result.
func conformInputs(m *ir.Model, set string, lim ir.Limits) []string {
	inputs, _, err := loadSet(m, set, lim)
	if err != nil {
		return nil // RunTest reports it
	}
	var notes []string
	for _, v := range m.Graph.Inputs {
		t := inputs[v.Name]
		if t == nil || !v.Type.Shape.Ranked || v.Type.Elem != t.DType {
			continue
		}
		if !shapeAdmits(v.Type.Shape, t.Dims) {
			notes = append(notes, fmt.Sprintf("test data gives input %q shape %v where the model declares %s", v.Name, t.Dims, v.Type))
			v.Type.Shape = ir.S(t.Dims...)
		}
	}
	return notes
}

// knownDefects repairs ONNX node tests whose model disagrees with the
// code that generated their data, each with the note the result reports.
var knownDefects = map[string]func(m *ir.Model) string{
	// ONNX's generator computed the outputs with epsilon 1e-2 but wrote the
	// Adam node without it (onnx/onnx#7749), so the default 0 is taken.
	"test_adam_multiple": func(m *ir.Model) string {
		for _, n := range m.Graph.Nodes {
			if n.OpType == "Adam" && n.Attr("epsilon") == nil {
				n.SetAttr(ir.AttrF("epsilon", 1e-2))
			}
		}
		return "the Adam node takes epsilon 1e-2, which its data was computed with and the model omits (onnx/onnx#7749)"
	},
}

func shapeAdmits(s ir.Shape, dims []int64) bool {
	if len(s.Dims) != len(dims) {
		return false
	}
	for i, d := range s.Dims {
		if d.IsStatic() && d.Value != dims[i] {
			return false
		}
	}
	return true
}

// unreadData is test data kiln does not read: the test is UNSUPPORTED.
type unreadData string

func (e unreadData) Error() string { return string(e) }

func classify(name string, err error) Result {
	var ue *ops.UnsupportedError
	var ud unreadData
	if errors.As(err, &ue) || errors.As(err, &ud) {
		return Result{name, Unsupported, err.Error()}
	}
	return Result{name, Fail, err.Error()}
}

// loadSet reads input_N.pb for the graph inputs that are not initializers,
// in order, and output_N.pb for the graph outputs.
func loadSet(m *ir.Model, set string, lim ir.Limits) (map[string]*ir.Tensor, []*ir.Tensor, error) {
	init := map[*ir.Value]bool{}
	for _, v := range m.Graph.Initializers {
		init[v] = true
	}
	var feeds []*ir.Value
	for _, v := range m.Graph.Inputs {
		if !init[v] {
			feeds = append(feeds, v)
		}
	}
	for _, v := range append(append([]*ir.Value{}, feeds...), m.Graph.Outputs...) {
		if !readableType(v.Type) {
			return nil, nil, unreadData(fmt.Sprintf(
				"%q is %s: its data files hold MapProto or SparseTensorProto messages, which kiln does not read (it computes with tensors, and sequences and optionals of them)", v.Name, v.Type))
		}
	}
	inputs := map[string]*ir.Tensor{}
	for i, v := range feeds {
		path := filepath.Join(set, fmt.Sprintf("input_%d.pb", i))
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			continue // an optional input the test leaves out
		}
		t, err := onnx.ReadValueFileWithin(path, v.Type, lim)
		if err != nil {
			return nil, nil, err
		}
		inputs[v.Name] = asDeclared(t, v.Type.Elem)
	}
	var want []*ir.Tensor
	for i, v := range m.Graph.Outputs {
		t, err := onnx.ReadValueFileWithin(filepath.Join(set, fmt.Sprintf("output_%d.pb", i)), v.Type, lim)
		if err != nil {
			return nil, nil, err
		}
		want = append(want, asDeclared(t, m.Graph.Outputs[i].Type.Elem))
	}
	return inputs, want, nil
}

// readableType reports whether kiln reads test data of type t: tensors, and
// sequences and optionals of readable types.
func readableType(t ir.Type) bool {
	switch t.Kind {
	case ir.TensorKind, ir.UnknownKind:
		return true
	case ir.SequenceKind, ir.OptionalKind:
		return t.Inner == nil || readableType(*t.Inner)
	}
	return false
}

// asDeclared reinterprets test data that older ONNX releases stored as
// uint16 where the model declares bfloat16 (the same bits).
func asDeclared(t *ir.Tensor, declared ir.DType) *ir.Tensor {
	if t.DType == ir.Uint16 && declared == ir.BFloat16 {
		c := *t
		c.DType = ir.BFloat16
		return &c
	}
	return t
}

func compareOutputs(m *ir.Model, inputs map[string]*ir.Tensor, want []*ir.Tensor, got map[string]*ir.Tensor, tol Tolerance) (string, bool) {
	var details []string
	drawn := drawnOutputs(m)
	for i, v := range m.Graph.Outputs {
		g := got[v.Name]
		if g == nil {
			return fmt.Sprintf("output %q missing", v.Name), false
		}
		var d string
		var ok bool
		if spec, isDrawn := drawn[v]; isDrawn {
			d, ok = compareDrawn(want[i], g, spec)
		} else if levels := decodedLevels(v, inputs); levels > 0 {
			d, ok = compareLevels(want[i], g, levels)
		} else {
			d, ok = Compare(want[i], g, tol)
		}
		if !ok {
			return fmt.Sprintf("output %q: %s", v.Name, d), false
		}
		details = append(details, fmt.Sprintf("%s: %s", v.Name, d))
	}
	return strings.Join(details, ", "), true
}

// decodedLevels is how many levels apart v's values may be when an
// ImageDecoder computes v from a graph input (ops.DecodedLevels: two
// conforming JPEG decoders differ so); 0 for any other output.
func decodedLevels(v *ir.Value, inputs map[string]*ir.Tensor) int {
	n := v.Producer
	if n == nil || n.OpType != "ImageDecoder" || n.Input(0) == nil {
		return 0
	}
	return ops.DecodedLevels(inputs[n.Input(0).Name])
}

// compareLevels judges 8-bit image values that may be up to levels apart.
func compareLevels(want, got *ir.Tensor, levels int) (string, bool) {
	if want.DType != got.DType || !slices.Equal(want.Dims, got.Dims) {
		return Compare(want, got, Tolerance{})
	}
	w, g := ops.Int64s(want), ops.Int64s(got)
	worst, at := int64(0), 0
	for i := range w {
		if d := max(w[i]-g[i], g[i]-w[i]); d > worst {
			worst, at = d, i
		}
	}
	if worst > int64(levels) {
		return fmt.Sprintf("element %d is %d, want %d (%d levels apart; decoders may differ by %d)", at, g[at], w[at], worst, levels), false
	}
	return fmt.Sprintf("within %d levels (worst %d)", levels, worst), true
}

// Compare judges one output against the expected tensor and describes the
// error (worst element, relative L2).
func Compare(want, got *ir.Tensor, tol Tolerance) (string, bool) {
	if !want.IsTensor() || !got.IsTensor() {
		return compareCompound(want, got, tol)
	}
	if want.DType != got.DType {
		return fmt.Sprintf("dtype %s, want %s", got.DType, want.DType), false
	}
	if !slices.Equal(want.Dims, got.Dims) {
		return fmt.Sprintf("shape %v, want %v", got.Dims, want.Dims), false
	}
	switch {
	case want.DType == ir.String:
		for i := range want.Strings {
			if want.Strings[i] != got.Strings[i] {
				return fmt.Sprintf("element %d is %q, want %q", i, got.Strings[i], want.Strings[i]), false
			}
		}
		return "exact", true
	case want.DType == ir.BFloat16:
		// ONNX's runner compares bfloat16 as its uint16 bit patterns with
		// the float tolerances, accepting a one-step rounding difference
		// (its expected data truncates where kiln rounds to nearest even).
		w, g := *want, *got
		w.DType, g.DType = ir.Uint16, ir.Uint16
		return compareFloats(ops.Float64s(&w), ops.Float64s(&g), tol)
	case !want.DType.IsFloat() && !want.DType.IsSmallFloat(): // the 8- and 4-bit floats compare as floats
		w, g := ops.Int64s(want), ops.Int64s(got)
		for i := range w {
			if w[i] != g[i] {
				return fmt.Sprintf("element %d is %d, want %d", i, g[i], w[i]), false
			}
		}
		return "exact", true
	}
	return compareFloats(ops.Float64s(want), ops.Float64s(got), tol)
}

// compareCompound judges a sequence or optional value element by element.
func compareCompound(want, got *ir.Tensor, tol Tolerance) (string, bool) {
	if want.IsTensor() != got.IsTensor() || !want.IsTensor() && want.Kind != got.Kind {
		return fmt.Sprintf("%s, want %s", got.Type(), want.Type()), false
	}
	if len(want.Elems) != len(got.Elems) {
		return fmt.Sprintf("%d elements, want %d", len(got.Elems), len(want.Elems)), false
	}
	if len(want.Elems) == 0 {
		if want.DType != got.DType {
			return fmt.Sprintf("empty, of %s, want %s", got.DType, want.DType), false
		}
		return "empty", true
	}
	details := make([]string, len(want.Elems))
	for i := range want.Elems {
		d, ok := Compare(want.Elems[i], got.Elems[i], tol)
		if !ok {
			return fmt.Sprintf("element %d: %s", i, d), false
		}
		details[i] = d
	}
	return "[" + strings.Join(details, "; ") + "]", true
}

func compareFloats(w, g []float64, tol Tolerance) (string, bool) {
	worst, worstExcess := -1, 0.0
	var maxAbs, num, den float64
	for i := range w {
		if math.IsNaN(w[i]) || math.IsNaN(g[i]) {
			if math.IsNaN(w[i]) != math.IsNaN(g[i]) {
				return fmt.Sprintf("element %d is %v, want %v", i, g[i], w[i]), false
			}
			continue
		}
		if math.IsInf(w[i], 0) || math.IsInf(g[i], 0) {
			if w[i] != g[i] {
				return fmt.Sprintf("element %d is %v, want %v", i, g[i], w[i]), false
			}
			continue
		}
		diff := math.Abs(g[i] - w[i])
		maxAbs = math.Max(maxAbs, diff)
		num += diff * diff
		den += w[i] * w[i]
		if excess := diff - (tol.Atol + tol.Rtol*math.Abs(w[i])); excess > worstExcess || worst < 0 && diff > 0 {
			if excess > worstExcess {
				worstExcess = excess
			}
			worst = i
		}
	}
	rel := math.Sqrt(num / math.Max(den, 1e-300))
	if den == 0 {
		rel = math.Sqrt(num)
	}
	desc := fmt.Sprintf("max abs err %.3g, rel L2 %.3g", maxAbs, rel)
	if tol.RelL2 > 0 {
		return desc, rel <= tol.RelL2
	}
	if worstExcess > 0 {
		return fmt.Sprintf("%s; worst element %d is %v, want %v (atol %g, rtol %g)", desc, worst, g[worst], w[worst], tol.Atol, tol.Rtol), false
	}
	return desc, true
}
