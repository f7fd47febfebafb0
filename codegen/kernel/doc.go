// Package kernel is kiln's target-independent kernel layer: every op that
// is not a hand-tuned micro-kernel is stated once as what each element of
// its output is, and a schedule per target decides how the loops run.
//
// # Definitions
//
// An expression (Expr) computes one element from the coordinates of a
// point (Var(i)), loads from buffers (Load, LoadOr), constants and a small
// set of primitive operations (expr.go); composite functions are built
// from them (Sigmoid, Expm1, Asin in ops_elementwise.go). A Kernel is a
// loop nest: its iteration space, its Value at each point and where it is
// stored, optionally reduced over more axes (Reduce, with RVar(i)),
// scanned along one axis (Scan) or selected from (TopK). An op's
// definition (OpDef, one row in its family's ops_*.go) turns a node into
// kernels, with temporaries between them (Ctx.Temp) and constant tables
// (Ctx.Table):
//
//	"Relu": unaryDef(signedFloat, func(_ *Ctx, x *Expr) *Expr { return Relu(x) }),
//
// Parameters that ONNX resolves (Slice's clamped starts, Pad's pads,
// Resize's taps) are read from ir/ops (ops.KernelContext.SliceWindow,
// PadSpec, ResizeSpec), the code the reference executor runs, never
// re-derived here. Inputs known at compile time are folded (Ctx.Scalar,
// Ctx.Const); others are read at run time.
//
// # Schedules
//
// A schedule cannot change a result beyond the reassociation of a
// reduction. CPUSchedule (schedule.go) picks the axis in vector lanes (the
// innermost, or the innermost reduction axis when that is contiguous and
// the output's is not) and whether the engine's threads split the rows;
// GPUSchedule gives every point a thread. This package imports no code
// generator: codegen/llvm writes a kernel under its schedule as LLVM IR.
//
// # Evaluator
//
// Run (eval.go) executes a built Ctx's kernels in order over Go memory
// (ir.Tensors), with the numerics below computed in Go (float functions
// from package math, not the emitted polynomials), so that every
// definition is tested against the reference executor without llc
// (Glow's interpreter): the op cases of internal/opcase, which
// codegen/cpu's engines run too, and codegen/cpu checks the evaluator
// against the engines on each. RunScheduled takes a schedule per kernel;
// only a reduction axis in lanes changes the result (element i into lane
// i mod VL, then the lanes as a tree, as the emitted code sums). It is an
// oracle, not a backend: every index is checked (a load outside a
// buffer is an error, LoadOr reads nothing where it is false), outputs and
// temporaries start as all-ones bytes so that an element no kernel writes
// shows, and a malformed kernel is an error, never a panic.
//
// # Numerics
//
// Float16 and BFloat16 data compute in float32 (loads widen, stores round
// to nearest even). Bitcast reinterprets the bits of integers, Float32 and
// Float64 as another of these types of the same width; Float16, BFloat16
// and Bool bits are read and written through a view of the unsigned type
// of their width (Reinterpret), so a signaling NaN never widens (the
// evaluator's float32 values keep NaN payloads and signaling bits as a
// register does). Float functions are polynomials (codegen/llvm's
// math.go) that call no library; float64 Exp and Log are double
// precision, the other float64 functions single precision (about 1e-7
// relative). Max and Min propagate
// NaN from either operand. Integer division and remainder by zero give 0
// (the reference refuses them), MinInt / -1 wraps; shifts of a type's
// width or more give 0; float to integer conversions truncate toward zero
// and saturate into int64 before wrapping to narrower types (as the
// reference). Indices out of range are clamped (Index), so that no input
// can read outside a tensor. Sums reduce in vector lanes and then across
// them: the order differs from a sequential sum by rounding only.
//
// The 8-, 4- and 2-bit types (IsSmallType: the float8s, float4e2m1, int4,
// uint4, int2, uint2) are codes in memory (smalltypes.go): kernels read
// them through Uint8 views (ByteView; a packed code is its byte shifted
// and masked), decode a float code through a constant table of its values
// (float32, exact) and sign-extend an integer one; rounding into a small
// float counts thresholds derived from ir's own encoder (ties to even,
// saturate, float8e8m0's round modes, NaN and -0 bit for bit), and a
// packed output is written by a kernel over its bytes. Nodes reading or
// writing these types are not fused (Fusible).
package kernel
