package cpu

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/kiln-ml/kiln/cpuabi"
	"github.com/kiln-ml/kiln/internal/atomicfile"
	"github.com/kiln-ml/kiln/internal/readfile"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Winograd F(4×4,3×3) does 4× fewer multiplies than a direct 3×3
// convolution (F(2×2,3×3) 2.25×), but its transforms cost memory traffic
// and its error is larger; which wins depends on the layer and the
// machine. In "auto" mode each eligible layer shape is compiled directly
// and as each Winograd variant that fits at build time, run on random
// inputs with the layer's weights, and the fastest variant is kept only
// where it beats the direct time by winogradMargin and its output stays
// within winogradMaxRelL2 of the direct one. Measurements go to a TimingCache, so
// a second build reuses them and is byte-identical (like TensorRT's timing
// cache).
//
// Codegen loads and runs no code itself: the caller's Runner does
// (runtime/cpu's TimeRuns, which internal/build gives). Without one,
// "auto" takes the size rule for a layer the cache does not hold, as for
// another machine's CPU, and the cache's Notice says so.

// Runner loads and times a measurement's code on this machine.
type Runner func(t *cpuabi.Trial) (time.Duration, error)

// Winograd modes (Options.Winograd).
const (
	WinogradAuto = "auto" // measure (default); the size rule when the target is not this machine or nothing can run it
	WinogradOn   = "on"   // every eligible layer
	WinogradOff  = "off"  // none
)

const (
	winogradMargin   = 0.95 // Winograd must take at most this fraction of the direct time
	winogradMaxRelL2 = 1e-5 // and differ from it by at most this relative L2 error
	measureRuns      = 15
)

// ConvTiming is one measured layer shape: the direct convolution's time,
// each Winograd variant's time and error against it, and the choice
// (an algorithm name).
type ConvTiming struct {
	DirectMicros float64                   `json:"direct_us"`
	Winograd     map[string]WinogradTiming `json:"winograd"`
	Choice       string                    `json:"choice"`
}

// WinogradTiming is one Winograd variant of a measured layer.
type WinogradTiming struct {
	Micros float64 `json:"us"`
	RelL2  float64 `json:"rel_l2"`
}

// TimingCache holds measurements by layer shape and target; safe for
// concurrent use.
type TimingCache struct {
	mu      sync.Mutex
	Kind    string                `json:"kind"`
	Version int                   `json:"version"`
	Entries map[string]ConvTiming `json:"entries"`
	path    string
	dirty   bool
	notice  string
	// unmeasured is set when a layer took the size rule for want of a
	// Runner.
	unmeasured bool
}

// timingCacheKind marks a file as kiln's timing cache, so that a file
// named by mistake (--timing-cache package.json) is never replaced.
const timingCacheKind = "kiln-timing-cache"

// timingCacheVersion changes with what an entry holds or with code that
// moves the measurements (4: the GEMM prefetches the weights it streams,
// which speeds up both sides of a Winograd measurement, by different
// amounts; 5: it prefetches an im2col matrix's rows, not the floats after
// them, and the direct side got 13–30% faster; 6: 14×14 GEMMs tile their
// columns 4 × 49, the direct side of 14×14 convs 7–10% faster; 7:
// Winograd's transform matrices lie an odd number of cache lines apart,
// its side 2–4% faster); a file of an older version is measured afresh and
// overwritten, one of a newer version measured afresh and left alone.
const timingCacheVersion = 7

// NewTimingCache returns an empty in-memory cache.
func NewTimingCache() *TimingCache {
	return &TimingCache{Kind: timingCacheKind, Version: timingCacheVersion, Entries: map[string]ConvTiming{}}
}

// LoadTimingCache reads a cache file; a missing or empty file gives an
// empty cache that Save creates. A file that is not a kiln timing cache is
// an error, never replaced (see timingCacheHeader).
func LoadTimingCache(path string) (*TimingCache, error) {
	c := NewTimingCache()
	c.path = path
	b, err := readfile.Within(path, ir.Limits{}, nil)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return c, nil // nothing to lose
	}
	version, err := timingCacheHeader(b)
	if err != nil {
		return nil, fmt.Errorf("timing cache %s is not a kiln timing cache: %v; refusing to replace it (give --timing-cache another file, or none; if it is a damaged cache, delete it)", path, err)
	}
	switch {
	case version < timingCacheVersion:
		c.dirty = true // an older kiln's measurements: start afresh
		c.notice = fmt.Sprintf("timing cache %s is an older kiln's (version %d, this kiln's is %d): measured afresh, and the file replaced", path, version, timingCacheVersion)
		return c, nil
	case version > timingCacheVersion:
		c.path = "" // a newer kiln's: measure afresh, keep the file for it
		c.notice = fmt.Sprintf("timing cache %s is a newer kiln's (version %d, this kiln's is %d): measured afresh, and the file left as it is", path, version, timingCacheVersion)
		return c, nil
	}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("timing cache %s: %w (delete it to start afresh)", path, err)
	}
	c.Kind = timingCacheKind // a version-7 file from before the marker gets it when saved
	if c.Entries == nil {
		c.Entries = map[string]ConvTiming{}
	}
	return c, nil
}

// timingCacheHeader returns the version of the kiln timing cache in b, or
// why b is not one: a JSON object whose "kind" is timingCacheKind, or,
// from kilns before the marker, one with "entries" and at most a
// "version" besides.
func timingCacheHeader(b []byte) (int, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		var notObject *json.UnmarshalTypeError
		if errors.As(err, &notObject) {
			return 0, fmt.Errorf("it holds a JSON %s, not an object", notObject.Value)
		}
		return 0, fmt.Errorf("it is not JSON (%v)", err)
	}
	raw, marked := fields["kind"]
	var kind string
	switch {
	case marked && (json.Unmarshal(raw, &kind) != nil || kind != timingCacheKind):
		return 0, fmt.Errorf("its \"kind\" is %s, not %q", raw, timingCacheKind)
	case !marked && !unmarkedCache(fields):
		return 0, fmt.Errorf("it has no \"kind\": %q", timingCacheKind)
	}
	var version int
	if raw, ok := fields["version"]; ok {
		if err := json.Unmarshal(raw, &version); err != nil {
			return 0, fmt.Errorf("its \"version\" %s is not a number", raw)
		}
	}
	return version, nil
}

// unmarkedCache reports whether fields are those of a cache from before
// the kind marker: "entries", and "version" at most besides.
func unmarkedCache(fields map[string]json.RawMessage) bool {
	for key := range fields {
		if key != "entries" && key != "version" {
			return false
		}
	}
	return fields["entries"] != nil
}

// Notice says, for the caller to pass on, what loading did with a cache
// file of another kiln version and whether layers went unmeasured for want
// of a Runner; "" when nothing.
func (c *TimingCache) Notice() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	notes := []string{}
	if c.notice != "" {
		notes = append(notes, c.notice)
	}
	if c.unmeasured {
		notes = append(notes, "--winograd auto measured no layer: nothing was given to run code on this machine (codegen/cpu Options.Runner), so each eligible layer runs as Winograd (the size rule)")
	}
	return strings.Join(notes, "; ")
}

// noteUnmeasured records that a layer took the size rule for want of a
// Runner.
func (c *TimingCache) noteUnmeasured() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unmeasured = true
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
	if err := atomicfile.WriteFile(c.path, append(b, '\n'), 0o644); err != nil {
		return err
	}
	c.dirty = false
	return nil
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
	algoWinograd2 = "winograd-f2x2"    // weights transformed: 16 [OC][C] matrices
	algoIm2col    = "im2col"           // weights in [OC/mr][K][mr] row panels
	algoBanded    = "im2col-banded"    // the same, unfolded a band of rows at a time
	algoPointwise = "pointwise"        // 1×1 on NCHW, weights in row panels
	algoGrouped   = "grouped"          // grouped/depthwise on NCHW, weights as given
	algoExpandDW  = "expand-depthwise" // a conv-dw group's fused kernel
	// algoDirect is a timing cache's choice of no Winograd variant.
	algoDirect = "direct"
)

// convAlgorithm names what lowerConv does with conv n (geometry c).
func (g *gen) convAlgorithm(c convGeom, wino *winoSpec) string {
	_, banded := g.bands(c)
	switch {
	case c.group != 1:
		return algoGrouped
	case wino != nil:
		return wino.name
	case c.pointwise():
		return algoPointwise
	case banded:
		return algoBanded
	}
	return algoIm2col
}

// chooseConvAlgorithms sets each convolution plan's winograd before
// memory planning (which
// sizes each convolution's scratch by its algorithm). A group's recorded
// algorithm (conv-layout) is obeyed, after checking it applies; without
// one, codegen decides the same way.
func (g *gen) chooseConvAlgorithms() error {
	for _, n := range g.nodes {
		p := g.plan(n)
		if n.Domain != "" || n.OpType != "Conv" || g.handInfo(n) == nil {
			continue
		}
		c, err := g.convGeom(n)
		if err != nil {
			return err
		}
		want := p.algorithm
		if want == "" || want == algoExpandDW {
			if p.winograd, err = g.useWinograd(n, c); err != nil {
				return err
			}
			continue
		}
		p.winograd = winogradNamed(c, want)
		if got := g.convAlgorithm(c, p.winograd); got != want {
			return fmt.Errorf("codegen/cpu: %s: the graph asks for algorithm %q, which does not apply (this convolution runs as %q)", n, want, got)
		}
	}
	return nil
}

// winogradNamed returns the Winograd variant called name that may run c.
func winogradNamed(c convGeom, name string) *winoSpec {
	for _, s := range winogradCandidates(c) {
		if s.name == name {
			return s
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
	feats, err := featuresFor(opts)
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
		if ops.GroupKind(kind.S) == ops.GroupConvDepthwise {
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

// useWinograd returns the Winograd variant conv node n (geometry c) runs
// as, or nil for a direct convolution.
func (g *gen) useWinograd(n *ir.Node, c convGeom) (*winoSpec, error) {
	cands := winogradCandidates(c)
	if len(cands) == 0 {
		return nil, nil
	}
	switch {
	case g.opts.winoForce != "":
		return winogradNamed(c, g.opts.winoForce), nil // a measurement's build
	case g.opts.Winograd == WinogradOn:
		return cands[0], nil
	case g.opts.Winograd == WinogradOff:
		return nil, nil
	case g.opts.CPU != "native":
		return cands[0], nil // not this machine's CPU: nothing to measure on
	}
	key := fmt.Sprintf("%s|%s|weights %s|conv3x3 N%d C%d H%d W%d OC%d pad%d,%d", strings.Join(g.feats, ","), g.opts.Triple,
		footprintClass(g.weightBytes()), c.N, c.C, c.H, c.W, c.OC, c.ph, c.pw)
	t, ok := g.opts.TimingCache.get(key)
	if !ok || t.Choice == "" {
		if g.opts.Runner == nil {
			g.opts.TimingCache.noteUnmeasured()
			return cands[0], nil // nothing to measure with
		}
		var err error
		if t, err = g.measureConv(n, cands); err != nil {
			return nil, fmt.Errorf("measuring %s for Winograd: %w", n, err)
		}
		g.opts.TimingCache.put(key, t)
	}
	return winogradNamed(c, t.Choice), nil
}

// measureConv compiles conv node n alone directly and as each Winograd
// variant, with its weights, times each on the same random input, and
// chooses the fastest variant that beats the direct time by
// winogradMargin within winogradMaxRelL2 of its output.
func (g *gen) measureConv(n *ir.Node, cands []*winoSpec) (ConvTiming, error) {
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
	in := ir.NewTensor(ir.Float32, dimsOf(n.Inputs[0])...)
	r := rand.New(rand.NewSource(1))
	for i, f := 0, in.Float32s(); i < len(f); i++ {
		f[i] = float32(r.NormFloat64())
	}
	run := func(force string) ([]float32, time.Duration, error) {
		opts := g.opts
		opts.winoForce, opts.Dump = force, nil
		res, err := Compile(m, opts)
		if err != nil {
			return nil, 0, err
		}
		return timeRuns(g.opts.Runner, res, in, g.weightBytes())
	}
	direct, dt, err := run(algoIm2col)
	if err != nil {
		return ConvTiming{}, err
	}
	t := ConvTiming{DirectMicros: micros(dt), Winograd: map[string]WinogradTiming{}, Choice: algoDirect}
	best := winogradMargin * t.DirectMicros
	for _, s := range cands {
		out, d, err := run(s.name)
		if err != nil {
			return ConvTiming{}, err
		}
		wt := WinogradTiming{Micros: micros(d), RelL2: relErr(out, direct)}
		t.Winograd[s.name] = wt
		if wt.Micros <= best && wt.RelL2 <= winogradMaxRelL2 {
			best, t.Choice = wt.Micros, s.name
		}
	}
	return t, nil
}

// A layer inside a model finds its weights in cache only if the model's
// weights fit there (SqueezeNet's 5 MB do, ResNet-18's 45 MB do not), and
// Winograd's transformed weights are larger than the direct ones: a
// measurement rotates through copies of the layer's weights adding up to
// the model's, so each run finds them as warm or cold as in the model.

// weightBytes is the model's total constant data.
func (g *gen) weightBytes() int64 {
	var n int64
	for _, v := range g.model.Graph.Initializers {
		n += int64(len(v.Const.Raw))
	}
	return n
}

// footprintClass buckets a model's weight bytes for the timing cache key
// (powers of two from 1 MiB): measurements of a shape are reused between
// models whose weights are about as large.
func footprintClass(n int64) string {
	c := int64(1 << 20)
	for c < n {
		c *= 2
	}
	return fmt.Sprintf("≤%dMiB", c>>20)
}

// timeRuns has run time a one-input, one-output engine: its output and
// its fastest of measureRuns single-thread runs after two warm-ups,
// rotating through weight copies that add up to footprint bytes.
func timeRuns(run Runner, res *Result, in *ir.Tensor, footprint int64) ([]float32, time.Duration, error) {
	out := make([]float32, numelIO(res.Outputs[0]))
	io := make([][]byte, 2)
	io[res.Inputs[0].Index] = in.Raw
	io[res.Outputs[0].Index] = unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), 4*len(out))
	best, err := run(&cpuabi.Trial{Code: res.SharedObject, Weights: res.Weights, Derived: res.Derived, ArenaBytes: res.ArenaBytes,
		IO: io, Footprint: footprint, Warmups: 2, Runs: measureRuns})
	if err != nil {
		return nil, 0, err
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
		line := fmt.Sprintf("%s: direct %.1f µs", k[strings.LastIndex(k, "|")+1:], t.DirectMicros)
		names := make([]string, 0, len(t.Winograd))
		for name := range t.Winograd {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			w := t.Winograd[name]
			line += fmt.Sprintf(", %s %.1f µs (rel L2 %.1e)", name, w.Micros, w.RelL2)
		}
		lines = append(lines, line+" → "+t.Choice)
	}
	sort.Strings(lines)
	return lines
}
