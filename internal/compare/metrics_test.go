package compare

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// The metrics against values worked out by hand, with the samples split
// over several Add calls as runs split them.
func TestAgreementByHand(t *testing.T) {
	var g Agreement
	g.Add([]float64{1, 2}, []float64{1, 2})
	g.Add([]float64{3, 4}, []float64{3, 5})
	// Σa² = 30, Σb² = 39, Σab = 34, Σ(a−b)² = 1.
	assert.InDelta(t, 10*math.Log10(30), g.SQNR(), 1e-12) // 14.771 dB
	assert.InDelta(t, 14.771212547, g.SQNR(), 1e-9)
	assert.InDelta(t, 34/math.Sqrt(30*39), g.Cosine(), 1e-12)
	assert.InDelta(t, 0.993999, g.Cosine(), 1e-6)
	assert.Equal(t, 1.0, g.MaxAbsErr())
	assert.EqualValues(t, 4, g.Elements())
	_, ok := g.Top1()
	assert.False(t, ok, "no class scores given")

	// Rows of 3 classes: agree, disagree, agree (a tie goes to the first).
	g.AddTop1([]float64{0.1, 0.9, 0, 5, 1, 2, 7, 7, 1}, []float64{0.2, 0.7, 0.1, 1, 5, 2, 3, 1, 2}, 3)
	top1, ok := g.Top1()
	assert.True(t, ok)
	assert.InDelta(t, 2.0/3, top1, 1e-12)
}

func TestAgreementEdges(t *testing.T) {
	var same Agreement
	same.Add([]float64{1, -2, 3}, []float64{1, -2, 3})
	assert.Equal(t, math.Inf(1), same.SQNR())
	assert.Equal(t, 1.0, same.Cosine())
	assert.Equal(t, 0.0, same.MaxAbsErr())

	var zeros Agreement
	zeros.Add([]float64{0, 0}, []float64{0, 0})
	assert.Equal(t, math.Inf(1), zeros.SQNR(), "equal")
	assert.Equal(t, 1.0, zeros.Cosine(), "both zero")

	var fromZero Agreement
	fromZero.Add([]float64{0, 0}, []float64{0, 1})
	assert.Equal(t, math.Inf(-1), fromZero.SQNR())
	assert.Equal(t, 0.0, fromZero.Cosine())

	var nan Agreement
	nan.Add([]float64{1, 2}, []float64{math.NaN(), 2})
	nan.Add([]float64{1, 2}, []float64{5, 2})
	assert.True(t, math.IsNaN(nan.MaxAbsErr()), "a NaN stays in the maximum")
	assert.True(t, math.IsNaN(nan.SQNR()))
	assert.True(t, math.IsNaN(nan.Cosine()))

	var negated Agreement
	negated.Add([]float64{1, 2}, []float64{-1, -2})
	assert.InDelta(t, -1, negated.Cosine(), 1e-12)
	assert.InDelta(t, 10*math.Log10(5.0/20), negated.SQNR(), 1e-12)
}

func TestArgmax(t *testing.T) {
	assert.Equal(t, 1, Argmax([]float64{1, 3, 3, 2}), "first of a tie")
	assert.Equal(t, 2, Argmax([]float64{math.NaN(), 1, 4}), "NaN is below every number")
	assert.Equal(t, 0, Argmax([]float64{math.NaN(), math.NaN()}))
	assert.Equal(t, 1, Argmax([]float64{math.Inf(-1), -5}))
}

func TestSummarize(t *testing.T) {
	assert.Equal(t, Latency{Median: 3, P90: 5, P99: 5}, Summarize([]float64{5, 1, 4, 2, 3}))
	assert.Equal(t, 2.5, Summarize([]float64{4, 1, 3, 2}).Median)
	var ms []float64
	for i := 100; i >= 1; i-- {
		ms = append(ms, float64(i))
	}
	assert.Equal(t, Latency{Median: 50.5, P90: 90, P99: 99}, Summarize(ms))
}

// Quantized tensors are dequantized as DequantizeLinear does: per tensor,
// and per index along an axis.
func TestFloatsDequantize(t *testing.T) {
	q := ir.FromSlice(ir.Uint8, []int64{3}, []uint8{0, 128, 255})
	assert.Equal(t, []float64{-64, 0, 63.5}, floats(q, &engine.Debug{Scale: []float32{0.5}, ZeroPoint: []int32{128}}))
	assert.Equal(t, []float64{0, 128, 255}, floats(q, nil))

	s := ir.FromSlice(ir.Int8, []int64{2, 2}, []int8{-3, 4, 10, -128})
	got := floats(s, &engine.Debug{Scale: []float32{2, 0.25}, ZeroPoint: []int32{0, 1}, Axis: 1})
	assert.Equal(t, []float64{-6, 0.75, 20, -32.25}, got)
	got = floats(s, &engine.Debug{Scale: []float32{2, 0.25}, Axis: 0})
	assert.Equal(t, []float64{-6, 8, 2.5, -32}, got)
}

// The layer list: NaN first, then ascending SQNR, +Inf last; the
// --keep-fp32 suggestion names the worst three quantized tensors' nodes,
// once each, never an exact one nor a layout op's (pooled).
func TestLayerResult(t *testing.T) {
	s := &layerSet{quantized: true}
	for _, p := range []struct {
		name, node    string
		signal, noise float64
	}{
		{"good", "conv1", 1e4, 1}, {"exact", "conv0", 1, 0}, {"bad", "conv5", 10, 1}, {"nan", "conv9", math.NaN(), 1},
		{"fair", "conv5", 100, 1}, {"worse", "conv7", 5, 1}, {"pooled", "pool", 5, 1},
	} {
		s.pairs = append(s.pairs, &layerPair{name: p.name, node: p.node, signal: p.signal, noise: p.noise, layout: p.node == "pool"})
	}
	layers, keep := s.result()
	var order []string
	for _, l := range layers {
		order = append(order, l.Name)
	}
	assert.Equal(t, []string{"nan", "worse", "pooled", "bad", "fair", "good", "exact"}, order)
	assert.InDelta(t, 10*math.Log10(5), layers[1].SQNR, 1e-12)
	assert.Equal(t, []string{"conv9", "conv7", "conv5"}, keep)

	s.quantized = false
	_, keep = s.result()
	assert.Empty(t, keep, "B has no quantized tensors: keeping a node in float is no remedy")
}

// --json has exactly the documented keys, with non-finite numbers as
// strings and top1 null when there were no class scores.
func TestJSONKeys(t *testing.T) {
	r := &Report{A: Side{Latency: Latency{1, 2, 3}, Accuracy: 0.5}, B: Side{Latency: Latency{0.5, 1, 1.5}, Accuracy: 0.25}, Speedup: 2,
		Layers: []Layer{{Name: "x", SQNR: 12.5}, {Name: "y", SQNR: math.Inf(1)}}, PerLayer: true}
	r.Agreement.Add([]float64{1, 2}, []float64{1, 2})
	var buf bytes.Buffer
	require.NoError(t, r.WriteJSON(&buf, true))
	var got map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got))
	want := map[string]any{
		"a":         map[string]any{"latency_ms": map[string]any{"median": 1.0, "p90": 2.0, "p99": 3.0}, "accuracy": 0.5},
		"b":         map[string]any{"latency_ms": map[string]any{"median": 0.5, "p90": 1.0, "p99": 1.5}, "accuracy": 0.25},
		"speedup":   2.0,
		"agreement": map[string]any{"top1": nil, "cosine": 1.0, "sqnr_db": "+Inf", "max_abs_err": 0.0},
		"layers":    []any{map[string]any{"name": "x", "sqnr_db": 12.5}, map[string]any{"name": "y", "sqnr_db": "+Inf"}},
	}
	assert.Equal(t, want, got)

	// Without labels there is no accuracy; without --per-layer no layers.
	r.A.Accuracy, r.B.Accuracy = math.NaN(), math.NaN()
	buf.Reset()
	require.NoError(t, r.WriteJSON(&buf, false))
	got = nil
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got))
	assert.NotContains(t, got, "layers")
	assert.NotContains(t, got["a"], "accuracy")
	assert.False(t, strings.Contains(buf.String(), "NaN"))

	for f, s := range map[float64]string{math.NaN(): `"NaN"`, math.Inf(-1): `"-Inf"`, 1.5: `1.5`, 1e-7: `1e-07`} {
		b, err := number(f).MarshalJSON()
		require.NoError(t, err)
		assert.Equal(t, s, string(b))
	}
}
