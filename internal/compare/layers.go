package compare

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// keepWorst is how many of the worst tensors' nodes the --keep-fp32
// suggestion names.
const keepWorst = 3

// A layerSet pairs B's debug tensors with A's by the source model's value
// names (engine.Debug.Value): a quantized tensor in B holds the value its
// QuantizeLinear quantized, so it pairs with A's float tensor of that
// name (or A's input of that name, for a quantized model input), and is
// dequantized for the comparison.
type layerSet struct {
	pairs     []*layerPair
	quantized bool
	unmatched []string
}

type layerPair struct {
	name, node string
	layout     bool           // B's tensor has its input's quantization (engine.Debug.Layout)
	a          engine.Binding // A's debug or model output; Name "" with input set
	input      string         // A's input of this name, when the value is one
	b          engine.Binding
	signal     float64 // Σa²
	noise      float64 // Σ(a−b)²
	mismatch   string  // why the pair could not be compared (shapes)
}

// matchLayers pairs the engines' tensors, refusing an engine without debug
// outputs. When B has quantized tensors, only those are compared.
func matchLayers(a, b Engine) (*layerSet, error) {
	for _, e := range []Engine{a, b} {
		if len(debugOutputs(e.Engine)) == 0 {
			return nil, fmt.Errorf("%s has no debug outputs to compare per layer: build it with cc build --mark-outputs all", e.Path)
		}
	}
	inA := map[string]engine.Binding{}
	for _, o := range a.Engine.Outputs() {
		value := o.Name
		if o.IsDebug() {
			value = o.Debug.Value
		}
		if _, seen := inA[value]; !seen {
			inA[value] = o
		}
	}
	inputs := map[string]bool{}
	for _, in := range a.Engine.Inputs() {
		inputs[in.Name] = true
	}
	s := &layerSet{}
	debugB := debugOutputs(b.Engine)
	s.quantized = slices.ContainsFunc(debugB, func(o engine.Binding) bool { return len(o.Debug.Scale) > 0 })
	for _, o := range debugB {
		if s.quantized && len(o.Debug.Scale) == 0 {
			continue
		}
		p := &layerPair{name: o.Debug.Value, node: o.Debug.Node, layout: o.Debug.Layout, b: o}
		// cc quantize renames the float value a graph output was (NAME
		// becomes NAME_float; the output keeps its name): a value not in A
		// under its own name may be there under that one.
		names := []string{o.Debug.Value}
		if f, ok := strings.CutSuffix(o.Debug.Value, "_float"); ok && f != "" {
			names = append(names, f)
		}
		for _, v := range names {
			if x, ok := inA[v]; ok {
				p.a, p.name = x, v
				break
			}
			if inputs[v] {
				p.input, p.name = v, v
				break
			}
		}
		if p.a.Name == "" && p.input == "" {
			s.unmatched = append(s.unmatched, o.Debug.Value)
			continue
		}
		s.pairs = append(s.pairs, p)
	}
	if len(s.pairs) == 0 {
		return nil, fmt.Errorf("no debug output of %s matches one of %s by the source model's value names (were they built from the same model?)", b.Path, a.Path)
	}
	return s, nil
}

// add accumulates one run's outputs of both engines (and its inputs).
func (s *layerSet) add(outA, outB, feeds map[string]*ir.Tensor) {
	for _, p := range s.pairs {
		if p.mismatch != "" {
			continue
		}
		var x *ir.Tensor
		var xd *engine.Debug
		if p.input != "" {
			x = feeds[p.input]
		} else {
			x, xd = outA[p.a.Name], p.a.Debug
		}
		y := outB[p.b.Name]
		if x.Len() != y.Len() {
			p.mismatch = fmt.Sprintf("%v in A, %v in B", x.Dims, y.Dims)
			continue
		}
		fa, fb := floats(x, xd), floats(y, p.b.Debug)
		for i, v := range fa {
			d := v - fb[i]
			p.signal += v * v
			p.noise += d * d
		}
	}
}

// result lists the compared tensors worst first (NaN, then lowest SQNR)
// and the nodes of the worst few, for cc quantize --keep-fp32 (only when
// B is quantized: keeping a node in float is then the remedy; and not a
// layout op's, whose tensor only carries its input's error).
func (s *layerSet) result() ([]Layer, []string) {
	var layers []Layer
	for _, p := range s.pairs {
		if p.mismatch != "" {
			s.unmatched = append(s.unmatched, fmt.Sprintf("%s (%s)", p.name, p.mismatch))
			continue
		}
		layers = append(layers, Layer{Name: p.name, Node: p.node, SQNR: sqnr(p.signal, p.noise), layout: p.layout})
	}
	slices.SortStableFunc(layers, func(x, y Layer) int {
		if nx, ny := math.IsNaN(x.SQNR), math.IsNaN(y.SQNR); nx || ny {
			return -cmp.Compare(b2i(nx), b2i(ny))
		}
		return cmp.Compare(x.SQNR, y.SQNR)
	})
	var keep []string
	if s.quantized {
		for _, l := range layers {
			if len(keep) == keepWorst {
				break
			}
			if l.Node != "" && !l.layout && !slices.Contains(keep, l.Node) && !math.IsInf(l.SQNR, 1) {
				keep = append(keep, l.Node)
			}
		}
	}
	return layers, keep
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
