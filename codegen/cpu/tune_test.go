package cpu

import (
	"encoding/json"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/cpuabi"
	"github.com/kiln-ml/kiln/internal/readfile/fifotest"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/passes"
	rcpu "github.com/kiln-ml/kiln/runtime/cpu"
)

// TestWinogradTuning checks the build-time choice: a Winograd-eligible
// layer is measured both ways once (the cache records both times and the
// error between them), the engine follows the decision, a second build
// with the same cache is byte-identical, and a cached decision is obeyed.
func TestWinogradTuning(t *testing.T) {
	needLLC(t)
	m := tuneModel()

	path := filepath.Join(t.TempDir(), "timing.json")
	cache, err := LoadTimingCache(path)
	require.NoError(t, err)
	first, err := Compile(m, Options{TimingCache: cache, Runner: rcpu.TimeRuns})
	require.NoError(t, err)
	require.Len(t, cache.Entries, 1, "one layer shape measured")
	var key string
	var tm ConvTiming
	for key, tm = range cache.Entries {
	}
	assert.Positive(t, tm.DirectMicros)
	require.Len(t, tm.Winograd, 2, "F(4×4) and F(2×2) both fit a 28×28 plane")
	for name, w := range tm.Winograd {
		assert.Positive(t, w.Micros, name)
		assert.Less(t, w.RelL2, 1e-5, "%s's error against the direct convolution", name)
	}
	assert.Equal(t, tm.Choice != algoDirect, kernelsWith(first, "Winograd") > 0, "kernels %v against the decision %+v", first.Kernels, tm)
	t.Log(cache.WinogradChoices())

	require.NoError(t, cache.Save())
	reloaded, err := LoadTimingCache(path)
	require.NoError(t, err)
	again, err := Compile(m, Options{TimingCache: reloaded, Runner: rcpu.TimeRuns})
	require.NoError(t, err)
	assert.Equal(t, first.SharedObject, again.SharedObject, "a build reusing the cache must be identical")
	assert.Equal(t, first.Weights, again.Weights)

	measured := tm.Choice
	for _, choice := range []string{algoDirect, algoWinograd, algoWinograd2} {
		tm.Choice = choice
		reloaded.put(key, tm)
		res, err := Compile(m, Options{TimingCache: reloaded, Runner: rcpu.TimeRuns})
		require.NoError(t, err)
		assert.Equal(t, choice != algoDirect, kernelsWith(res, "Winograd") > 0, "the cached %s must be obeyed: %v", choice, res.Kernels)
		assert.Equal(t, choice == measured, string(first.SharedObject) == string(res.SharedObject), "%s against the measured %s", choice, measured)
	}
}

// tuneModel is one Winograd-eligible 3×3 convolution, 32 → 32 channels on
// a 28×28 plane, where both F(4×4) and F(2×2) fit.
func tuneModel() *ir.Model {
	r := rand.New(rand.NewSource(11))
	g := ir.NewGraph("tune")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 32, 28, 28)))
	y := g.Apply("Conv", []*ir.Value{x, g.AddInitializer("w", randTensor(r, 32, 32, 3, 3))}, ir.AttrIs("pads", 1, 1, 1, 1))
	y.Name = "y"
	g.SetOutputs(y)
	return ir.NewModel(g, 13)
}

// TestTunerRunsThroughItsRunner: the measurements are the Runner's: it
// gets the direct build and then each Winograd variant, as code with its
// weights and the layer's input bound, and the times it returns make the
// choice (Winograd only past the margin).
func TestTunerRunsThroughItsRunner(t *testing.T) {
	needLLC(t)
	m := tuneModel()
	for _, c := range []struct {
		micros []float64 // direct, F(4×4), F(2×2)
		want   string
	}{
		{[]float64{100, 50, 80}, algoWinograd},
		{[]float64{100, 96, 90}, algoWinograd2},
		{[]float64{100, 96, 97}, algoDirect}, // neither within the margin
	} {
		var trials []*cpuabi.Trial
		runner := func(tr *cpuabi.Trial) (time.Duration, error) {
			trials = append(trials, tr)
			return time.Duration(c.micros[len(trials)-1] * 1e3), nil
		}
		cache := NewTimingCache()
		res, err := Compile(m, Options{TimingCache: cache, Runner: runner})
		require.NoError(t, err)
		require.Len(t, trials, 3, "the direct build and two Winograd variants")
		for i, tr := range trials {
			assert.NotEmpty(t, tr.Code, "trial %d", i)
			assert.Equal(t, 2, tr.Warmups)
			assert.Equal(t, measureRuns, tr.Runs)
			require.Len(t, tr.IO, 2)
			assert.Len(t, tr.IO[0], 4*32*28*28, "the layer's input")
			assert.Len(t, tr.IO[1], 4*32*28*28, "its output")
			assert.Positive(t, tr.Footprint)
		}
		assert.Empty(t, trials[0].Derived, "the direct build derives no weights")
		assert.NotEmpty(t, trials[1].Derived, "Winograd's transformed weights are derived")
		for _, tm := range cache.Entries {
			assert.Equal(t, c.want, tm.Choice, "times %v", c.micros)
		}
		assert.Equal(t, c.want != algoDirect, kernelsWith(res, "Winograd") > 0, "kernels %v", res.Kernels)
		assert.Empty(t, cache.Notice())
	}
	failing := func(*cpuabi.Trial) (time.Duration, error) { return 0, errors.New("no such machine") }
	_, err := Compile(m, Options{Runner: failing})
	assert.ErrorContains(t, err, "no such machine")
}

// TestWinogradAutoWithoutRunner: with nothing to run code on, "auto"
// measures nothing, caches nothing, compiles what the size rule (and
// "on") gives, and the cache's notice says so; a cached choice is still
// obeyed.
func TestWinogradAutoWithoutRunner(t *testing.T) {
	needLLC(t)
	m := tuneModel()
	cache := NewTimingCache()
	res, err := Compile(m, Options{TimingCache: cache})
	require.NoError(t, err)
	assert.Empty(t, cache.Entries, "nothing measured, nothing cached")
	assert.Contains(t, cache.Notice(), "measured no layer")
	on, err := Compile(m, Options{Winograd: WinogradOn})
	require.NoError(t, err)
	assert.Equal(t, on.SharedObject, res.SharedObject, "the size rule is what --winograd on compiles")

	measured := NewTimingCache()
	direct := func(tr *cpuabi.Trial) (time.Duration, error) {
		return time.Duration(1+len(tr.Derived)) * time.Millisecond, nil
	}
	_, err = Compile(m, Options{TimingCache: measured, Runner: direct})
	require.NoError(t, err)
	res, err = Compile(m, Options{TimingCache: measured})
	require.NoError(t, err)
	assert.Zero(t, kernelsWith(res, "Winograd"), "the cached direct choice: %v", res.Kernels)
	assert.Empty(t, measured.Notice())
}

// TestConvAlgorithmRecorded checks that codegen compiles what the
// conv-layout pass recorded: im2col on a layer Winograd fits (and the
// result still matches the reference), and an error naming the algorithm
// when the record does not apply.
func TestConvAlgorithmRecorded(t *testing.T) {
	needLLC(t)
	r := rand.New(rand.NewSource(12))
	build := func(algo string) (*ir.Model, map[string]*ir.Tensor) {
		g := ir.NewGraph("recorded")
		x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 16, 14, 14)))
		y := g.Apply("Relu", []*ir.Value{g.Apply("Conv", []*ir.Value{x, g.AddInitializer("w", randTensor(r, 16, 16, 3, 3))}, ir.AttrIs("pads", 1, 1, 1, 1))})
		y.Name = "y"
		g.SetOutputs(y)
		m := ir.NewModel(g, 13)
		c := &passes.Context{OptLevel: 2, Verify: true, Target: chooseWith{choose: func(*ir.Model, *ir.Node) (string, error) { return algo, nil }}}
		require.NoError(t, passes.Run(c, passes.O2, m))
		return m, map[string]*ir.Tensor{"x": randTensor(r, 1, 16, 14, 14)}
	}
	m, feeds := build(algoIm2col)
	res := compileAndCompare(t, m, feeds, runRef(t, m, feeds), 1e-5)
	assert.Zero(t, kernelsWith(res, "Winograd"), "kernels %v", res.Kernels)

	m, _ = build(algoPointwise)
	_, err := Compile(m, Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `algorithm "pointwise"`)
}

// TestConvChooserRuntimeWeightsAndLayerConvs checks the conv-layout hook:
// a convolution whose weights are fed at run time gets an algorithm that
// reads them as laid out (im2col, not Winograd), and one the hand kernels
// do not take (3-D) none, so that it lowers through the kernel layer;
// both compile and agree with the reference.
func TestConvChooserRuntimeWeightsAndLayerConvs(t *testing.T) {
	needLLC(t)
	r := rand.New(rand.NewSource(5))
	g := ir.NewGraph("runtime-weights")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 16, 12, 12)))
	w := g.AddInput("w", ir.TensorType(ir.Float32, ir.S(16, 16, 3, 3)))
	v := g.AddInput("v", ir.TensorType(ir.Float32, ir.S(1, 2, 4, 4, 4)))
	y := g.Apply("Conv", []*ir.Value{x, w}, ir.AttrIs("pads", 1, 1, 1, 1)) // a group of its own
	y.Name = "y"
	z := g.Apply("Relu", []*ir.Value{g.Apply("Conv", []*ir.Value{v, g.AddInitializer("w3", randTensor(r, 3, 2, 3, 3, 3))})})
	z.Name = "z"
	g.SetOutputs(y, z)
	m := ir.NewModel(g, 13)
	choose, err := ConvChooser(Options{Winograd: WinogradOn})
	require.NoError(t, err)
	c := &passes.Context{OptLevel: 2, Verify: true, Target: chooseWith{choose: choose}}
	require.NoError(t, passes.Run(c, passes.O2, m))
	var algos []string
	for _, n := range m.Graph.Nodes {
		if a := n.Attr("algorithm"); a != nil {
			algos = append(algos, a.S)
		} else {
			algos = append(algos, "")
		}
	}
	assert.Equal(t, []string{algoIm2col, ""}, algos)
	feeds := map[string]*ir.Tensor{"x": randTensor(r, 1, 16, 12, 12), "w": randTensor(r, 16, 16, 3, 3), "v": randTensor(r, 1, 2, 4, 4, 4)}
	res := compileAndCompare(t, m, feeds, runRef(t, m, feeds), 1e-5)
	assert.Zero(t, kernelsWith(res, "Winograd"), "kernels %v", res.Kernels)
}

// TestTimingCacheVersions: a cache file from an older format is measured
// afresh and rewritten, saying so; one from a newer kiln is measured
// afresh and left alone; a corrupt one is an error naming the file.
func TestTimingCacheVersions(t *testing.T) {
	dir := t.TempDir()
	for _, old := range []string{
		`{"entries": {"k": {"direct_us": 1, "winograd": true}}}`, // before versions
		`{"version": 6, "entries": {"k": {"direct_us": 2.5, "winograd": {}, "choice": "direct"}}}`,
		`{"kind": "kiln-timing-cache", "version": 3, "entries": {}}`,
	} {
		path := filepath.Join(dir, "old.json")
		require.NoError(t, os.WriteFile(path, []byte(old), 0o644))
		c, err := LoadTimingCache(path)
		require.NoError(t, err, old)
		assert.Empty(t, c.Entries)
		assert.Contains(t, c.Notice(), path+" is an older kiln's", old)
		assert.Contains(t, c.Notice(), "the file replaced")
		require.NoError(t, c.Save())
		again, err := LoadTimingCache(path)
		require.NoError(t, err)
		assert.Equal(t, timingCacheVersion, again.Version)
		assert.Equal(t, timingCacheKind, again.Kind)
		assert.Empty(t, again.Notice())
	}

	// The current version written before the kind marker reads as it is.
	current := filepath.Join(dir, "current.json")
	entry := ConvTiming{DirectMicros: 12.5, Winograd: map[string]WinogradTiming{algoWinograd: {Micros: 9.25, RelL2: 3e-7}}, Choice: algoWinograd}
	b, err := json.Marshal(map[string]any{"version": timingCacheVersion, "entries": map[string]ConvTiming{"k": entry}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(current, b, 0o644))
	c, err := LoadTimingCache(current)
	require.NoError(t, err)
	assert.Equal(t, map[string]ConvTiming{"k": entry}, c.Entries)
	assert.Empty(t, c.Notice())

	newer := filepath.Join(dir, "newer.json")
	body := []byte(`{"kind": "kiln-timing-cache", "version": 99, "entries": {"k": {"future": 1}}}`)
	require.NoError(t, os.WriteFile(newer, body, 0o644))
	c, err = LoadTimingCache(newer)
	require.NoError(t, err)
	assert.Contains(t, c.Notice(), newer+" is a newer kiln's")
	c.put("k2", entry)
	require.NoError(t, c.Save())
	got, err := os.ReadFile(newer)
	require.NoError(t, err)
	assert.Equal(t, body, got, "a newer kiln's cache is left as it is")

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte("{"), 0o644))
	_, err = LoadTimingCache(bad)
	assert.ErrorContains(t, err, bad)
}

// Issue 32: `--timing-cache package.json` replaced any JSON object that
// is not a kiln cache. Such a file is refused, naming it and why, and
// left byte for byte as it was; an empty file is an empty cache.
func TestTimingCacheRefusesOtherFiles(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"package.json":    `{"name": "left-pad", "version": "1.3.0", "main": "index.js"}`,
		"tsconfig.json":   `{"compilerOptions": {"strict": true}}`,
		"versioned.json":  `{"version": 2, "items": [1, 2, 3]}`,
		"entries.json":    `{"entries": {"a": 1}, "owner": "someone"}`,
		"other-kind.json": `{"kind": "something-else", "version": 7, "entries": {}}`,
		"list.json":       `[1, 2, 3]`,
		"notes.txt":       "shopping: eggs, flour\n",
	} {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
		_, err := LoadTimingCache(path)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "timing cache "+path+" is not a kiln timing cache", name)
		assert.Contains(t, err.Error(), "refusing to replace it", name)
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, body, string(got), name)
	}

	empty := filepath.Join(dir, "empty.json")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	c, err := LoadTimingCache(empty)
	require.NoError(t, err)
	c.put("k", ConvTiming{DirectMicros: 4.75, Choice: algoDirect})
	require.NoError(t, c.Save())
	again, err := LoadTimingCache(empty)
	require.NoError(t, err)
	assert.Equal(t, c.Entries, again.Entries)

	fifo := filepath.Join(dir, "pipe.json")
	fifotest.Make(t, fifo)
	fifotest.Returns(t, fifo, func() error { _, err := LoadTimingCache(fifo); return err })
}
