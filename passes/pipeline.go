// Package passes holds kiln's graph-to-graph transforms and the one table
// that orders them (like Go's SSA backend): each pass is a named function
// over the model, run in order, with ir.Verify after each when verification
// is on (always in tests).
package passes

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Pass is one transform.
type Pass struct {
	Name string
	Run  func(c *Context, m *ir.Model) error
	// Required passes run even at -O0: later stages depend on them.
	Required bool
	// Doc is the one-line description `cc passes` prints.
	Doc string
}

// Context holds every option of a pipeline run; passes read nothing else.
type Context struct {
	// OptLevel 0 runs only the required passes.
	OptLevel int
	// Disabled names passes to skip (never a required one).
	Disabled map[string]bool
	// Verify runs ir.Verify after every pass.
	Verify bool
	// DumpAfter names passes (or "all") after which the graph is written
	// to DumpDir as NN-name.onnxtxt with Dump.
	DumpAfter map[string]bool
	DumpDir   string
	Dump      func(path string, m *ir.Model) error
	// Timings receives one entry per pass run.
	Timings []Timing
	// Memory is the memplan pass's plan of the final graph (nil when the
	// pass did not run or shapes are dynamic).
	Memory *MemoryPlan
	// Target is the backend the graph is optimized for (nil: the
	// reference executor, Reference).
	Target Target
	// Limits bound every value's size (inference) and the arena (memplan);
	// zero fields take ir.DefaultLimits.
	Limits ir.Limits
}

// Target is what the passes ask of the backend they optimize for. Each
// backend implements it once (codegen/cpu.Target, codegen/cuda.Target),
// as Go's SSA backend has one Config per architecture.
type Target interface {
	// Fusible reports whether node n, of a model at opsets o, computes in
	// a fused elementwise loop (fuse-elementwise, fuse-epilogue).
	Fusible(n *ir.Node, o ops.Opsets) bool
	// QuantizedKernel reports whether the target computes the quantized
	// group of kind with body and roles in integer kernels (fuse-qdq); a
	// group it declines stays unfused, its QDQ nodes computed in float.
	QuantizedKernel(kind ops.GroupKind, body []*ir.Node, roles []ops.Role) bool
}

// ConvChooser is a Target that chooses each convolution's algorithm and
// so its weights' layout (conv-layout), measuring where it must; "" is
// none (the target cannot compile that convolution, and will say so). For
// a Target that is not one, conv-layout does nothing.
type ConvChooser interface {
	Target
	ConvAlgorithm(m *ir.Model, fg *ir.Node) (string, error)
}

// Reference is the reference executor's Target, a nil Context.Target's:
// every op its schema calls elementwise fuses and every quantized group
// forms. A target that differs in one judgement embeds it.
type Reference struct{}

// Fusible reports whether n's schema is elementwise.
func (Reference) Fusible(n *ir.Node, o ops.Opsets) bool { return o.Elementwise(n) }

// QuantizedKernel takes every group.
func (Reference) QuantizedKernel(ops.GroupKind, []*ir.Node, []ops.Role) bool { return true }

// target is c's Target, Reference when none is set.
func (c *Context) target() Target {
	if c.Target == nil {
		return Reference{}
	}
	return c.Target
}

// Timing is how long one pass took.
type Timing struct {
	Pass     string
	Duration time.Duration
	Nodes    int // node count after the pass
}

// O2 is the default float pipeline, in order.
var O2 = []Pass{
	{Name: "lower-training", Run: lowerTrainingPass, Required: true, Doc: "expands Gradient nodes (passes/autodiff) and rewrites the losses and optimizers into primitive ops"},
	{Name: "infer", Run: inferPass, Required: true, Doc: "type and shape inference; propagates small compile-time values"},
	{Name: "fold-if", Run: foldIfPass, Required: true, Doc: "replaces each If whose condition inference knows (shape checks) by its taken branch's nodes; compiled backends have no If kernel"},
	{Name: "loop-sequences", Run: loopSequencesPass, Required: true, Doc: "turns a sequence a Loop appends one tensor to per iteration, read after it only by ConcatFromSequence (a scripted list's append then torch.stack or torch.cat), into a scan output; compiled backends have no sequence values"},
	{Name: "unroll-scans", Run: unrollScansPass, Doc: "for a target without control flow (CUDA), replaces each Scan of known length by its body once per iteration"},
	{Name: "simplify", Run: simplifyPass, Doc: "removes Identity, inference-mode Dropout, no-op Reshape/Transpose/Cast"},
	{Name: "fold", Run: foldPass, Doc: "evaluates nodes whose inputs are all constant (shape subgraphs, weight transforms)"},
	{Name: "conv-bn", Run: convBNPass, Doc: "folds inference-mode BatchNormalization into the preceding Conv's weights and bias"},
	{Name: "conv-matmul", Run: convMatMulPass, Doc: "rewrites a Conv with a tiny output plane and large windows (a weight gradient, a fully connected Conv) into one MatMul of its windows"},
	{Name: "conv-scale", Run: convScalePass, Doc: "moves a per-channel scale of a 1x1 Conv's input (a squeeze-excitation gate) into its weights, where they are the smaller tensor"},
	{Name: "cse", Run: csePass, Doc: "merges nodes with the same op, attributes and inputs"},
	{Name: "qdq-propagate", Run: qdqPropagatePass, Doc: "moves DequantizeLinear forward and QuantizeLinear backward through data-movement ops (Reshape, Transpose, MaxPool, Pad, Concat, ...), so those move int8"},
	{Name: "qdq-cleanup", Run: qdqCleanupPass, Doc: "removes DequantizeLinear → QuantizeLinear round trips with equal parameters"},
	{Name: "fuse-qdq", Run: fuseQDQPass, Doc: "groups each quantized Conv/Gemm/MatMul/Add/Mul/average pool/elementwise chain with its QDQ nodes for the integer kernels (kiln.FusionGroup)"},
	{Name: "fold-dequantize", Run: foldDequantizePass, Doc: "folds the DequantizeLinear of constants no integer kernel took (fold leaves them for fuse-qdq)"},
	{Name: "fuse-epilogue", Run: fuseEpiloguePass, Doc: "groups Conv/Gemm/MatMul with a following bias, residual Add and activation, and a 1x1 Conv with the depthwise Conv it feeds (kiln.FusionGroup)"},
	{Name: "fuse-elementwise", Run: fuseElementwisePass, Doc: "groups elementwise DAGs and decomposed LayerNorms into one kernel each (kiln.FusionGroup)"},
	{Name: "conv-layout", Run: convLayoutPass, Doc: "chooses each convolution's algorithm and weight layout (the target measures where it must) and records it on its group"},
	{Name: "dce", Run: dcePass, Required: true, Doc: "removes nodes and initializers no output depends on"},
	{Name: "infer-final", Run: inferPass, Required: true, Doc: "re-types every value after the rewrites"},
	{Name: "memplan", Run: memplanPass, Doc: "liveness-based buffer reuse in one arena; reports its size against the sum of all tensors"},
}

// passOrder lists "a before b" constraints checked by a test, so a table
// edit cannot silently break what later passes assume.
var passOrder = [][2]string{
	// Backends compile primitive ops; inference types what lowering wrote.
	{"lower-training", "infer"},
	{"infer", "simplify"},
	// An inlined branch's nodes are simplified, folded and fused like any.
	{"infer", "fold-if"},
	{"fold-if", "simplify"},
	{"fold-if", "loop-sequences"},
	{"loop-sequences", "simplify"},
	{"loop-sequences", "fold"},
	{"fold-if", "fold"},
	{"infer", "fold"},
	{"simplify", "fold"},
	{"fold", "dce"},
	{"cse", "dce"},
	{"fold", "conv-bn"},
	// A Conv keeps its BatchNormalization before it becomes a MatMul, and
	// CSE merges the rewrite's constants.
	{"conv-bn", "conv-matmul"},
	{"conv-matmul", "cse"},
	{"conv-matmul", "fuse-epilogue"},
	// The scale moves into weights BN folding already wrote, before fusion
	// hides the Conv in a group.
	{"conv-bn", "conv-scale"},
	{"conv-scale", "fuse-epilogue"},
	{"conv-bn", "dce"},
	{"dce", "infer-final"},
	// Fusion sees the graph in its final form: folding, BN folding and CSE
	// would otherwise find their patterns hidden inside FusionGroup bodies.
	{"fold", "fuse-epilogue"},
	{"conv-bn", "fuse-epilogue"},
	{"cse", "fuse-epilogue"},
	// Quantized groups see the QDQ form after propagation and cleanup;
	// their weights stay int8 constants until they are taken, and a
	// quantized Conv is not a float epilogue's base.
	{"fold", "qdq-propagate"},
	{"conv-bn", "qdq-propagate"},
	{"qdq-propagate", "qdq-cleanup"},
	{"qdq-cleanup", "fuse-qdq"},
	{"fuse-qdq", "fold-dequantize"},
	{"fold-dequantize", "fuse-epilogue"},
	{"fuse-qdq", "fuse-elementwise"},
	{"fold-dequantize", "dce"},
	// Epilogues first: a residual Add goes to its Conv's store rather than
	// to an elementwise group.
	{"fuse-epilogue", "fuse-elementwise"},
	{"fuse-epilogue", "conv-layout"},
	{"conv-layout", "memplan"},
	// The final inference types the groups; memory is planned for the
	// fused graph, whose intermediates are fewer.
	{"fuse-elementwise", "infer-final"},
	{"fuse-elementwise", "memplan"},
	{"infer-final", "memplan"},
}

// Run applies the pipeline to m in place.
func Run(c *Context, pipeline []Pass, m *ir.Model) error {
	for i, p := range pipeline {
		if !p.Required && (c.OptLevel == 0 || c.Disabled[p.Name]) {
			continue
		}
		start := time.Now()
		if err := p.Run(c, m); err != nil {
			return fmt.Errorf("pass %s: %w", p.Name, err)
		}
		c.Timings = append(c.Timings, Timing{p.Name, time.Since(start), len(m.Graph.Nodes)})
		if c.Verify {
			if err := verify(m); err != nil {
				return fmt.Errorf("after pass %s: %w", p.Name, err)
			}
		}
		if c.DumpAfter["all"] || c.DumpAfter[p.Name] {
			if c.Dump == nil {
				return fmt.Errorf("pass %s: dumping requested but no dump function set", p.Name)
			}
			path := filepath.Join(c.DumpDir, fmt.Sprintf("%02d-%s.onnxtxt", i, p.Name))
			if err := os.MkdirAll(c.DumpDir, 0o755); err != nil {
				return err
			}
			if err := c.Dump(path, m); err != nil {
				return fmt.Errorf("dumping after %s: %w", p.Name, err)
			}
		}
	}
	return nil
}

// verify is ir.Verify and the fusion groups' kinds and roles, which ir
// cannot know (ops.CheckGroups).
func verify(m *ir.Model) error {
	if err := m.Verify(); err != nil {
		return err
	}
	return ops.CheckGroups(m.Graph)
}

// Lookup finds a pass by name in a pipeline.
func Lookup(pipeline []Pass, name string) (Pass, bool) {
	for _, p := range pipeline {
		if p.Name == name {
			return p, true
		}
	}
	return Pass{}, false
}

// PrintTimings writes the per-pass table of --time-passes.
func PrintTimings(w io.Writer, ts []Timing) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "pass\tms\tnodes after\t")
	var total time.Duration
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%.3f\t%d\t\n", t.Pass, float64(t.Duration.Microseconds())/1000, t.Nodes)
		total += t.Duration
	}
	fmt.Fprintf(tw, "total\t%.3f\t\t\n", float64(total.Microseconds())/1000)
	tw.Flush()
}
