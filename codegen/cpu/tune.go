package cpu

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/kiln-ml/kiln/ir"
	rcpu "github.com/kiln-ml/kiln/runtime/cpu"
)

// Winograd F(4×4,3×3) does 4× fewer multiplies than a direct 3×3
// convolution, but its transforms cost memory traffic and its error is
// larger; which wins depends on the layer and the machine. In "auto" mode
// each eligible layer shape is compiled both ways at build time, run on
// random inputs with the layer's weights, and Winograd is kept only where
// it measures faster (by winogradMargin) and its output stays within
// winogradMaxRelL2 of the direct one. Measurements go to a TimingCache, so
// a second build reuses them and is byte-identical (like TensorRT's timing
// cache).

// Winograd modes (Options.Winograd).
const (
	WinogradAuto = "auto" // measure (default); the size rule when the target is not this machine
	WinogradOn   = "on"   // every eligible layer
	WinogradOff  = "off"  // none
)

const (
	winogradMargin   = 0.95 // Winograd must take at most this fraction of the direct time
	winogradMaxRelL2 = 1e-5 // and differ from it by at most this relative L2 error
	measureRuns      = 15
)

// ConvTiming is one measured layer shape.
type ConvTiming struct {
	DirectMicros   float64 `json:"direct_us"`
	WinogradMicros float64 `json:"winograd_us"`
	RelL2          float64 `json:"rel_l2"`
	Winograd       bool    `json:"winograd"`
}

// TimingCache holds measurements by layer shape and target; safe for
// concurrent use.
type TimingCache struct {
	mu      sync.Mutex
	Entries map[string]ConvTiming `json:"entries"`
	path    string
	dirty   bool
}

// NewTimingCache returns an empty in-memory cache.
func NewTimingCache() *TimingCache { return &TimingCache{Entries: map[string]ConvTiming{}} }

// LoadTimingCache reads a cache file; a missing file gives an empty cache
// that Save creates.
func LoadTimingCache(path string) (*TimingCache, error) {
	c := NewTimingCache()
	c.path = path
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("timing cache %s: %w (delete it to start afresh)", path, err)
	}
	if c.Entries == nil {
		c.Entries = map[string]ConvTiming{}
	}
	return c, nil
}

// Save writes the cache back to the file it was loaded from, if it
// changed.
func (c *TimingCache) Save() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.path == "" || !c.dirty {
		return nil
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o755); err != nil {
		return err
	}
	tmp := c.path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	c.dirty = false
	return os.Rename(tmp, c.path)
}

func (c *TimingCache) get(key string) (ConvTiming, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.Entries[key]
	return t, ok
}

func (c *TimingCache) put(key string, t ConvTiming) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Entries[key] = t
	c.dirty = true
}

// Convolution algorithms, as the conv-layout pass records them on a
// group's "algorithm" attribute; each implies its weights' packed layout.
const (
	algoWinograd  = "winograd-f4x4"    // weights transformed: 36 [OC][C] matrices
	algoIm2col    = "im2col"           // weights in [OC/mr][K][mr] row panels
	algoBanded    = "im2col-banded"    // the same, unfolded a band of rows at a time
	algoPointwise = "pointwise"        // 1×1 on NCHW, weights in row panels
	algoGrouped   = "grouped"          // grouped/depthwise on NCHW, weights as given
	algoExpandDW  = "expand-depthwise" // a conv-dw group's fused kernel
)

// convAlgorithm names what lowerConv does with conv n (geometry c).
func (g *gen) convAlgorithm(c convGeom, winograd bool) string {
	_, banded := g.bands(c)
	switch {
	case c.group != 1:
		return algoGrouped
	case winograd:
		return algoWinograd
	case c.pointwise():
		return algoPointwise
	case banded:
		return algoBanded
	}
	return algoIm2col
}

// chooseConvAlgorithms fills g.winograd before memory planning (which
// sizes each convolution's scratch by its algorithm). A group's recorded
// algorithm (conv-layout) is obeyed, after checking it applies; without
// one, codegen decides the same way.
func (g *gen) chooseConvAlgorithms() error {
	for _, n := range g.nodes {
		if g.skip[n] || n.Domain != "" || n.OpType != "Conv" {
			continue
		}
		c, err := g.convGeom(n)
		if err != nil {
			return err
		}
		want, recorded := g.convAlgo[n]
		if !recorded || want == algoExpandDW {
			if g.winograd[n], err = g.useWinograd(n, c); err != nil {
				return err
			}
			continue
		}
		g.winograd[n] = want == algoWinograd && winogradFits(c)
		if got := g.convAlgorithm(c, g.winograd[n]); got != want {
			return fmt.Errorf("codegen/cpu: %s: the graph asks for algorithm %q, which does not apply (this convolution runs as %q)", n, want, got)
		}
	}
	return nil
}

// ConvChooser returns the conv-layout pass's hook for this target: the
// algorithm of a conv or conv-dw fusion group, measured where it must be
// (opts.Winograd, opts.TimingCache); "" for a convolution this backend
// cannot compile (Compile then says why).
func ConvChooser(opts Options) (func(m *ir.Model, fg *ir.Node) (string, error), error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	feats, err := cpuFeatures(opts.CPU)
	if err != nil {
		return nil, err
	}
	var g *gen
	var model *ir.Model
	return func(m *ir.Model, fg *ir.Node) (string, error) {
		body := fg.Attr("body")
		kind := fg.Attr("kind")
		if body == nil || body.G == nil || len(body.G.Nodes) == 0 || kind == nil {
			return "", fmt.Errorf("not a fusion group")
		}
		if kind.S == "conv-dw" {
			return algoExpandDW, nil
		}
		if g == nil || model != m {
			if g, err = newGen(m, feats, opts); err != nil {
				return "", err
			}
			model = m
		}
		base := body.G.Nodes[0]
		c, err := g.convGeom(base)
		if err != nil || convCheck(g, base) != nil {
			return "", nil // not compilable here: codegen reports why
		}
		wino, err := g.useWinograd(base, c)
		if err != nil {
			return "", err
		}
		return g.convAlgorithm(c, wino), nil
	}, nil
}

// useWinograd decides whether conv node n (geometry c) runs as Winograd.
func (g *gen) useWinograd(n *ir.Node, c convGeom) (bool, error) {
	if !winogradFits(c) {
		return false, nil
	}
	switch g.opts.Winograd {
	case WinogradOn:
		return true, nil
	case WinogradOff:
		return false, nil
	}
	if g.opts.CPU != "native" {
		return true, nil // not this machine's CPU: nothing to measure on
	}
	key := fmt.Sprintf("%s|%s|conv3x3 N%d C%d H%d W%d OC%d pad%d,%d", strings.Join(g.feats, ","), g.opts.Triple,
		c.N, c.C, c.H, c.W, c.OC, c.ph, c.pw)
	if t, ok := g.opts.TimingCache.get(key); ok {
		return t.Winograd, nil
	}
	t, err := g.measureConv(n)
	if err != nil {
		return false, fmt.Errorf("measuring %s for Winograd: %w", n, err)
	}
	g.opts.TimingCache.put(key, t)
	return t.Winograd, nil
}

// measureConv compiles conv node n alone both ways, with its weights, and
// times each on the same random input.
func (g *gen) measureConv(n *ir.Node) (ConvTiming, error) {
	sub := ir.NewGraph("tune")
	x := sub.AddInput("x", n.Inputs[0].Type)
	ins := []*ir.Value{x}
	for i, v := range n.Inputs[1:] {
		if v == nil {
			break
		}
		ins = append(ins, sub.AddInitializer(fmt.Sprintf("p%d", i), g.constOf(v)))
	}
	y := sub.Apply("Conv", ins, n.Attrs...)
	y.Name = "y"
	sub.SetOutputs(y)
	m := ir.NewModel(sub, g.opsets[""])
	dims := dimsOf(n.Inputs[0])
	in := ir.NewTensor(ir.Float32, dims...)
	r := rand.New(rand.NewSource(1))
	for i, f := 0, in.Float32s(); i < len(f); i++ {
		f[i] = float32(r.NormFloat64())
	}
	var outs [2][]float32
	var best [2]time.Duration
	for i, mode := range []string{WinogradOff, WinogradOn} {
		opts := g.opts
		opts.Winograd = mode
		res, err := Compile(m, opts)
		if err != nil {
			return ConvTiming{}, err
		}
		if outs[i], best[i], err = timeRuns(res, in); err != nil {
			return ConvTiming{}, err
		}
	}
	t := ConvTiming{DirectMicros: micros(best[0]), WinogradMicros: micros(best[1]), RelL2: relErr(outs[1], outs[0])}
	t.Winograd = t.WinogradMicros <= winogradMargin*t.DirectMicros && t.RelL2 <= winogradMaxRelL2
	return t, nil
}

// timeRuns loads a one-input, one-output engine and returns its output and
// its fastest of measureRuns single-thread runs (the fastest: other work
// on the machine only ever slows a run down).
func timeRuns(res *Result, in *ir.Tensor) ([]float32, time.Duration, error) {
	lib, err := rcpu.Open(res.SharedObject)
	if err != nil {
		return nil, 0, err
	}
	defer lib.Close()
	weights := rcpu.AlignedBytes(int64(len(res.Weights)))
	copy(weights, res.Weights)
	arena := rcpu.NewBuffer(res.ArenaBytes + 64)
	defer arena.Free()
	out := make([]float32, numelIO(res.Outputs[0]))
	io := make([]unsafe.Pointer, 2)
	io[res.Inputs[0].Index] = unsafe.Pointer(&in.Raw[0])
	io[res.Outputs[0].Index] = unsafe.Pointer(&out[0])
	best := time.Duration(math.MaxInt64)
	for i := 0; i < measureRuns+2; i++ {
		start := time.Now()
		lib.Run(1, unsafe.Pointer(&weights[0]), unsafe.Pointer(&arena.Bytes[0]), io)
		if d := time.Since(start); i >= 2 { // two warm-up runs
			best = min(best, d)
		}
	}
	return out, best, nil
}

func numelIO(io IO) int64 { return ir.Product(io.Dims) }

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func relErr(got, want []float32) float64 {
	var num, den float64
	for i := range want {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}

// WinogradChoices lists the cache's decisions, for reports.
func (c *TimingCache) WinogradChoices() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var lines []string
	for k, t := range c.Entries {
		shape := k[strings.LastIndex(k, "|")+1:]
		lines = append(lines, fmt.Sprintf("%s: direct %.1f µs, Winograd %.1f µs (rel L2 %.1e) → %s", shape,
			t.DirectMicros, t.WinogradMicros, t.RelL2, map[bool]string{true: "Winograd", false: "direct"}[t.Winograd]))
	}
	sort.Strings(lines)
	return lines
}
