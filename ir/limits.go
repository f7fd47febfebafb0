package ir

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// Limits bound what kiln accepts from a model, a file or an engine, so that
// a hostile or mistyped input fails with an error naming what is too large
// instead of overflowing an int64, exhausting memory or the stack. Every
// reader of sizes takes them from here: the frontends (file size, nesting,
// initializer sizes), shape inference (every value's static size), the
// memory planner (buffers and the arena) and the runtime (the arena at
// NewContext). A zero field means its default; see DefaultLimits for each
// default and why.
type Limits struct {
	// MaxTensorBytes bounds one tensor: an input, output, initializer or
	// intermediate value.
	MaxTensorBytes int64
	// MaxArenaBytes bounds an engine's activation arena, the memory one
	// inference context allocates whole.
	MaxArenaBytes int64
	// MaxFileBytes bounds a model or tensor file, checked (by stat) before
	// any of it is read. External-data files are not bounded by it: each
	// tensor read from one is bounded by MaxTensorBytes and by the file's
	// size.
	MaxFileBytes int64
	// MaxNesting bounds how deeply graphs (If/Loop/Scan bodies, fusion
	// groups) and types (seq(seq(...)), map, optional) nest, in ONNX
	// protobuf and in text.
	MaxNesting int
	// MaxLoopIterations bounds the iterations one Loop node runs in the
	// reference executor, so a loop whose condition never turns false (or
	// whose trip count is absurd) stops with an error instead of running
	// forever.
	MaxLoopIterations int64
}

// Default limits. Each is far above what a real model needs and well below
// what would crash: raise one with the flag its Flag names.
const (
	// DefaultMaxTensorBytes is 16 GiB: the largest tensors of published
	// models (an LLM's 128k×8k float32 embedding) are about 4 GiB, and a
	// protobuf model holds at most 2 GiB; a shape typed wrong by a factor of
	// 2^20 fails here rather than in the allocator, which kills the process.
	DefaultMaxTensorBytes = 16 << 30
	// DefaultMaxArenaBytes is 64 GiB: an arena holds the activations live
	// at once, a few of the largest tensors; more than this does not fit
	// the machines kiln targets.
	DefaultMaxArenaBytes = 64 << 30
	// DefaultMaxFileBytes is 4 GiB: protobuf caps a serialized .onnx at
	// 2 GiB, and text with inline weights is under twice its binary size.
	// Larger weights belong in external-data files, which this does not
	// bound.
	DefaultMaxFileBytes = 4 << 30
	// DefaultMaxNesting is 64: exporters nest If/Loop bodies a few levels
	// deep; 64 keeps the recursive readers' stacks small (a million levels
	// of text would overflow the parser's stack).
	DefaultMaxNesting = 64
	// DefaultMaxLoopIterations is 2^24 (16.7 million): exported loops run
	// once per token, box or time step, at most a few hundred thousand
	// times; a runaway while-loop reaches this in seconds to minutes.
	DefaultMaxLoopIterations = 1 << 24
)

// DefaultLimits returns the default limits.
func DefaultLimits() Limits {
	return Limits{MaxTensorBytes: DefaultMaxTensorBytes, MaxArenaBytes: DefaultMaxArenaBytes,
		MaxFileBytes: DefaultMaxFileBytes, MaxNesting: DefaultMaxNesting, MaxLoopIterations: DefaultMaxLoopIterations}
}

// maxLimit caps every byte limit, so that sums and alignments of sizes
// within the limits never overflow int64.
const maxLimit = 1 << 62

// OrDefaults returns l with each zero (or negative) field replaced by its
// default, and each byte limit capped at 2^62 (4 EiB).
func (l Limits) OrDefaults() Limits {
	l.MaxTensorBytes = min(l.MaxTensorBytes, maxLimit)
	l.MaxArenaBytes = min(l.MaxArenaBytes, maxLimit)
	l.MaxFileBytes = min(l.MaxFileBytes, maxLimit)
	d := DefaultLimits()
	if l.MaxTensorBytes <= 0 {
		l.MaxTensorBytes = d.MaxTensorBytes
	}
	if l.MaxArenaBytes <= 0 {
		l.MaxArenaBytes = d.MaxArenaBytes
	}
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = d.MaxFileBytes
	}
	if l.MaxNesting <= 0 {
		l.MaxNesting = d.MaxNesting
	}
	if l.MaxLoopIterations <= 0 {
		l.MaxLoopIterations = d.MaxLoopIterations
	}
	return l
}

// Flags naming each limit, as cc and infer spell them; error messages say
// which one raises the limit hit.
const (
	FlagMaxTensorBytes = "--max-tensor-bytes"
	FlagMaxArenaBytes  = "--max-arena-bytes"
	FlagMaxFileBytes   = "--max-file-bytes"
	FlagMaxNesting     = "--max-nesting"
	// FlagMaxLoopIterations raises MaxLoopIterations.
	FlagMaxLoopIterations = "--max-loop-iterations"
)

// ErrLimit is what every *LimitError matches with errors.Is.
var ErrLimit = errors.New("over a limit")

// LimitError says that something is larger than a limit, or that its size
// overflows int64.
type LimitError struct {
	// What names the thing measured, e.g. `value "y" (float[2147483648,2])`
	// or `file model.onnx`.
	What string
	// Size is its size in the limit's unit (bytes or levels); -1 when the
	// size overflows int64.
	Size  int64
	Limit int64
	// Kind is the limit's name ("tensor", "arena", "file", "nesting",
	// "loop");
	// Flag the flag that raises it.
	Kind, Flag string
}

func (e *LimitError) Error() string {
	if e.Kind == "nesting" {
		return fmt.Sprintf("%s: nested deeper than %d levels (the nesting limit; %s raises it)", e.What, e.Limit, e.Flag)
	}
	if e.Kind == "loop" {
		return fmt.Sprintf("%s: still running after %d iterations (the loop limit; %s raises it)", e.What, e.Limit, e.Flag)
	}
	if e.Size < 0 {
		return fmt.Sprintf("%s: its size in bytes overflows int64 (the %s limit is %s; %s raises it)", e.What, e.Kind, FormatBytes(e.Limit), e.Flag)
	}
	return fmt.Sprintf("%s is %s, over the %s limit of %s (%s raises it)", e.What, FormatBytes(e.Size), e.Kind, FormatBytes(e.Limit), e.Flag)
}

// Is makes errors.Is(err, ErrLimit) true for every LimitError.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// ErrNegativeDim is returned by ByteSize for a negative dimension.
var ErrNegativeDim = errors.New("negative dimension")

// ErrSizeOverflow is returned by ByteSize when the element count or the
// byte count does not fit in an int64.
var ErrSizeOverflow = errors.New("size overflows int64")

// ElementCount multiplies dims, refusing a negative dim and a product that
// overflows int64. The count of no dims (a scalar) is 1.
func ElementCount(dims []int64) (int64, error) {
	n := uint64(1)
	overflow := false
	for _, d := range dims {
		if d < 0 {
			return 0, fmt.Errorf("%w %d in %v", ErrNegativeDim, d, dims)
		}
		hi, lo := bits.Mul64(n, uint64(d))
		// Keep going after an overflow: a later 0 dim makes the tensor
		// empty, and a later negative one is still an error.
		overflow = overflow || hi != 0 || lo > math.MaxInt64
		n = lo
	}
	if overflow {
		for _, d := range dims {
			if d == 0 {
				return 0, nil
			}
		}
		return 0, ErrSizeOverflow
	}
	return int64(n), nil
}

// ByteSize is the number of bytes a dense tensor of dtype and dims takes in
// raw form (RawLen), computed with overflow checks: a negative dim is
// ErrNegativeDim and a count past int64 is ErrSizeOverflow. Strings take 0
// bytes here (their storage is not raw), but their count is checked too.
func ByteSize(dtype DType, dims []int64) (int64, error) {
	n, err := ElementCount(dims)
	if err != nil {
		return 0, err
	}
	switch s := int64(dtype.Size()); {
	case s > 0:
		if n > math.MaxInt64/s {
			return 0, ErrSizeOverflow
		}
		return n * s, nil
	case s < 0: // PerByte elements per byte, the last byte padded
		k := dtype.PerByte()
		return n/k + min(n%k, 1), nil
	}
	return 0, nil
}

// CheckTensor returns the byte size of a tensor of dtype and dims, or a
// *LimitError naming what (e.g. `value "y"`) and its type when the size
// overflows or exceeds MaxTensorBytes. A negative dim is an error too.
func (l Limits) CheckTensor(what string, dtype DType, dims []int64) (int64, error) {
	l = l.OrDefaults()
	size, err := ByteSize(dtype, dims)
	desc := func() string { return fmt.Sprintf("%s (%s)", what, TensorType(dtype, S(dims...))) }
	switch {
	case errors.Is(err, ErrSizeOverflow):
		return 0, &LimitError{What: desc(), Size: -1, Limit: l.MaxTensorBytes, Kind: "tensor", Flag: FlagMaxTensorBytes}
	case err != nil: // a negative dim, which a Shape would print as "?"
		return 0, fmt.Errorf("%s (%s%v): %w", what, dtype, dims, err)
	case size > l.MaxTensorBytes:
		return 0, &LimitError{What: desc(), Size: size, Limit: l.MaxTensorBytes, Kind: "tensor", Flag: FlagMaxTensorBytes}
	}
	// Strings count no raw bytes, but a count past the limit in elements
	// is as absurd (each is at least a string header).
	if dtype == String {
		if n, _ := ElementCount(dims); n > l.MaxTensorBytes/16 {
			size := int64(-1)
			if n <= math.MaxInt64/16 {
				size = n * 16
			}
			return 0, &LimitError{What: desc(), Size: size, Limit: l.MaxTensorBytes, Kind: "tensor", Flag: FlagMaxTensorBytes}
		}
	}
	return size, nil
}

// CheckType is CheckTensor for a value's type: tensors with a static shape
// are checked; other types and dynamic shapes pass (their sizes are known
// only at run time, where they are checked again).
func (l Limits) CheckType(what string, t Type) error {
	if t.Kind != TensorKind {
		return nil
	}
	dims, ok := t.Shape.Ints()
	if !ok {
		return nil
	}
	_, err := l.CheckTensor(what, t.Elem, dims)
	return err
}

// CheckArena returns a *LimitError when an arena of size bytes is over
// MaxArenaBytes (or negative, which only overflow produces).
func (l Limits) CheckArena(what string, size int64) error {
	l = l.OrDefaults()
	if size < 0 {
		return &LimitError{What: what, Size: -1, Limit: l.MaxArenaBytes, Kind: "arena", Flag: FlagMaxArenaBytes}
	}
	if size > l.MaxArenaBytes {
		return &LimitError{What: what, Size: size, Limit: l.MaxArenaBytes, Kind: "arena", Flag: FlagMaxArenaBytes}
	}
	return nil
}

// CheckFile returns a *LimitError when a file of size bytes is over
// MaxFileBytes.
func (l Limits) CheckFile(path string, size int64) error {
	l = l.OrDefaults()
	if size > l.MaxFileBytes {
		return &LimitError{What: "file " + path, Size: size, Limit: l.MaxFileBytes, Kind: "file", Flag: FlagMaxFileBytes}
	}
	return nil
}

// NestingError returns the *LimitError for input (what, e.g. "line 12")
// nested deeper than MaxNesting.
func (l Limits) NestingError(what string) error {
	l = l.OrDefaults()
	return &LimitError{What: what, Size: int64(l.MaxNesting) + 1, Limit: int64(l.MaxNesting), Kind: "nesting", Flag: FlagMaxNesting}
}

// LoopError returns the *LimitError for a loop (what, e.g. `node "l"
// (Loop)`) that would run past MaxLoopIterations.
func (l Limits) LoopError(what string) error {
	l = l.OrDefaults()
	return &LimitError{What: what, Size: l.MaxLoopIterations + 1, Limit: l.MaxLoopIterations, Kind: "loop", Flag: FlagMaxLoopIterations}
}

// AddSizes adds byte counts, returning -1 once the sum overflows int64 (as
// LimitError reads it).
func AddSizes(a, b int64) int64 {
	if a < 0 || b < 0 || a > math.MaxInt64-b {
		return -1
	}
	return a + b
}

// FormatBytes prints a byte count exactly, with a binary-unit
// approximation for large ones: "17179869184 bytes (16 GiB)".
func FormatBytes(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	s := fmt.Sprintf("%d bytes", n)
	if n < 1024 {
		return s
	}
	v, u := float64(n), ""
	for _, unit := range units {
		if v < 1024 {
			break
		}
		v, u = v/1024, unit
	}
	if v == math.Trunc(v) {
		return fmt.Sprintf("%s (%.0f %s)", s, v, u)
	}
	return fmt.Sprintf("%s (%.1f %s)", s, v, u)
}
