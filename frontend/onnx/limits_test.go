package onnx

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

// The reproductions of issue 8 for the protobuf reader: files are checked
// before they are read, nesting and tensor sizes before anything is
// allocated.

// sparseFile makes a file of size zero bytes that takes no disk space.
func sparseFile(t *testing.T, name string, size int64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		t.Skipf("cannot make a %d-byte sparse file here: %v", size, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// allocated returns how many bytes fn allocated on the Go heap.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A 1 GB file of zeros named .onnx was read whole (1-2 GB RSS) before the
// error; now its first bytes are enough.
func TestReadFileOfZerosFailsFromItsPrefix(t *testing.T) {
	path := sparseFile(t, "zeros.onnx", 1<<30)
	var err error
	bytes := allocated(func() { _, err = ReadFile(path) })
	if err == nil || !strings.Contains(err.Error(), "not an ONNX model: byte 0: field number 0") {
		t.Fatalf("got %v", err)
	}
	if bytes > 1<<20 {
		t.Errorf("reading a 1 GB file of zeros allocated %d bytes before failing", bytes)
	}
}

func TestReadFileOverFileLimit(t *testing.T) {
	path := sparseFile(t, "big.onnx", ir.DefaultMaxFileBytes+1)
	var err error
	bytes := allocated(func() { _, err = ReadFile(path) })
	var le *ir.LimitError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "over the file limit of 4294967296 bytes (4 GiB) (--max-file-bytes raises it)") {
		t.Fatalf("got %v", err)
	}
	if bytes > 1<<20 {
		t.Errorf("allocated %d bytes before refusing the file", bytes)
	}

	// A real model over a lowered limit, and under a raised one.
	b, err := Write(featureModel())
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "m.onnx")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadFileWithin(path, ir.Limits{MaxFileBytes: int64(len(b)) - 1}); !errors.As(err, &le) {
		t.Errorf("a %d-byte model under a limit one byte smaller: %v", len(b), err)
	}
	if _, _, err := ReadFileWithin(path, ir.Limits{MaxFileBytes: int64(len(b))}); err != nil {
		t.Errorf("at the limit: %v", err)
	}
	if _, err := ReadTensorFileWithin(path, ir.Limits{MaxFileBytes: 10}); !errors.As(err, &le) {
		t.Errorf("a tensor file over the limit: %v", err)
	}
}

// nestedIfs is a model whose main graph holds an If whose then_branch
// holds an If ... levels graphs deep in all (the main graph is level 1).
func nestedIfs(levels int) *ir.Model {
	leaf := func() *ir.Graph {
		g := ir.NewGraph("leaf")
		g.SetOutputs(g.Apply("Constant", nil, ir.AttrT("value", ir.Scalar(ir.Float32, float32(1)))))
		return g
	}
	inner := leaf()
	for i := 1; i < levels; i++ {
		g := ir.NewGraph("g")
		cond := g.Apply("Constant", nil, ir.AttrT("value", ir.Scalar(ir.Bool, true)))
		g.SetOutputs(g.Apply("If", []*ir.Value{cond}, ir.AttrG("then_branch", inner), ir.AttrG("else_branch", leaf())))
		inner = g
	}
	return ir.NewModel(inner, 17)
}

func TestReadNestingLimit(t *testing.T) {
	b, err := Write(nestedIfs(8))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadWithin(b, "", ir.Limits{MaxNesting: 8}); err != nil {
		t.Fatalf("8 levels under a limit of 8: %v", err)
	}
	_, err = ReadWithin(b, "", ir.Limits{MaxNesting: 7})
	var le *ir.LimitError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "nested deeper than 7 levels (the nesting limit; --max-nesting raises it)") {
		t.Fatalf("8 levels under a limit of 7: %v", err)
	}
	// The default admits 64 levels, not 65.
	b, _ = Write(nestedIfs(64))
	if _, err := Read(b, ""); err != nil {
		t.Fatalf("64 levels: %v", err)
	}
	b, _ = Write(nestedIfs(65))
	if _, err := Read(b, ""); !errors.As(err, &le) {
		t.Fatalf("65 levels: %v", err)
	}
}

// Hand-made protobuf nesting far past the limit, in the form an attacker
// would write (no valid model around it), fails at the limit; so do types.
func TestReadDeepNestingFailsAtTheLimit(t *testing.T) {
	graph := appendString(nil, graphName, "g")
	for i := 0; i < 2000; i++ {
		graph = appendMessage(nil, graphNode, func(b []byte) []byte {
			b = appendString(b, nodeOpType, "If")
			return appendMessage(b, nodeAttribute, func(b []byte) []byte {
				b = appendString(b, 1, "then_branch")
				b = appendIntAlways(b, 20, int64(ir.AttrGraph))
				return appendMessage(b, 6, func(b []byte) []byte { return append(b, graph...) })
			})
		})
	}
	model := appendMessage(appendIntAlways(nil, modelIRVersion, 8), modelGraph, func(b []byte) []byte { return append(b, graph...) })
	_, err := Read(model, "")
	if !errors.Is(err, ir.ErrLimit) || !strings.Contains(err.Error(), "nested deeper than 64 levels") {
		t.Fatalf("2000 levels of subgraphs: %v", err)
	}

	typ := ir.TensorType(ir.Float32, ir.S(2))
	for i := 0; i < 1000; i++ {
		inner := typ
		typ = ir.Type{Kind: ir.SequenceKind, Inner: &inner}
	}
	g := ir.NewGraph("g")
	x := g.AddInput("x", typ)
	g.SetOutputs(x)
	b, err := Write(ir.NewModel(g, 17))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Read(b, ""); !errors.Is(err, ir.ErrLimit) {
		t.Fatalf("a type 1000 sequences deep: %v", err)
	}
}

func TestExternalDataChecksBeforeAllocating(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "w.bin"), make([]byte, 16), 0o644); err != nil {
		t.Fatal(err)
	}
	// A shape over the tensor limit fails before the file is opened.
	huge := tensorProto(ir.Float32, []int64{1 << 33}, external("w.bin", 0, 1<<35))
	var err error
	bytes := allocated(func() { _, err = readTensor(huge, dir, ir.Limits{}) })
	if !errors.Is(err, ir.ErrLimit) {
		t.Fatalf("got %v", err)
	}
	// One within the limit but past the file's end fails on the file's
	// size, before its buffer is allocated.
	big := tensorProto(ir.Float32, []int64{1 << 28}, external("w.bin", 8, 1<<30))
	bytes += allocated(func() { _, err = readTensor(big, dir, ir.Limits{}) })
	if err == nil || !strings.Contains(err.Error(), "too short: has 16 bytes, needs 1073741824 at offset 8") {
		t.Fatalf("got %v", err)
	}
	if bytes > 1<<20 {
		t.Errorf("allocated %d bytes for data that is not there", bytes)
	}
}
