package reference

import (
	"errors"
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

// expandModel is y = Expand(x, shape) with the shape fed at run time, so
// only the run knows the output's size.
func expandModel() *ir.Model {
	g := ir.NewGraph("expand")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1)))
	shape := g.AddInput("shape", ir.TensorType(ir.Int64, ir.S(2)))
	y := g.Apply("Expand", []*ir.Value{x, shape})
	y.Name = "y"
	g.SetOutputs(y)
	return ir.NewModel(g, 17)
}

// An Expand to a run-time shape of 2^62 elements once wrapped to a 0-byte
// tensor (and 2^33 floats killed the process in the allocator); now the
// node's output size is checked before its kernel runs.
func TestRunChecksOutputSizesBeforeKernels(t *testing.T) {
	e, err := New(expandModel())
	if err != nil {
		t.Fatal(err)
	}
	x := ir.FromSlice(ir.Float32, []int64{1}, []float32{rand.New(rand.NewSource(1)).Float32() + 0.5})
	for _, tc := range []struct {
		shape []int64
		want  string
	}{
		{[]int64{2147483648, 2147483648}, `output "y" (float[2147483648,2147483648]): its size in bytes overflows int64`},
		{[]int64{2, 1 << 32}, `output "y" (float[2,4294967296]) is 34359738368 bytes (32 GiB), over the tensor limit of 17179869184 bytes (16 GiB)`},
	} {
		_, err := e.Run(map[string]*ir.Tensor{"x": x, "shape": ir.FromSlice(ir.Int64, []int64{2}, tc.shape)})
		if !errors.Is(err, ir.ErrLimit) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("shape %v: got %v, want %q", tc.shape, err, tc.want)
		}
	}
	// Within the limits it runs, and broadcasts x.
	out, err := e.Run(map[string]*ir.Tensor{"x": x, "shape": ir.FromSlice(ir.Int64, []int64{2}, []int64{3, 5})})
	if err != nil {
		t.Fatal(err)
	}
	got := ir.Data[float32](out["y"])
	if len(got) != 15 {
		t.Fatalf("got %d elements, want 15", len(got))
	}
	for i, v := range got {
		if v != ir.Data[float32](x)[0] {
			t.Fatalf("element %d is %v, want %v", i, v, ir.Data[float32](x)[0])
		}
	}
	// A lowered limit refuses what the default admits.
	e, err = NewWithin(expandModel(), ir.Limits{MaxTensorBytes: 59})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Run(map[string]*ir.Tensor{"x": x, "shape": ir.FromSlice(ir.Int64, []int64{2}, []int64{3, 5})}); !errors.Is(err, ir.ErrLimit) {
		t.Errorf("60 bytes under a limit of 59: %v", err)
	}
}

func TestNewRefusesHugeStaticInput(t *testing.T) {
	g := ir.NewGraph("huge")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(2147483648, 2147483648)))
	g.SetOutputs(g.Apply("Relu", []*ir.Value{x}))
	_, err := New(ir.NewModel(g, 17))
	if !errors.Is(err, ir.ErrLimit) || !strings.Contains(err.Error(), `input "x" (float[2147483648,2147483648])`) {
		t.Fatalf("got %v", err)
	}
}

// A caller's tensor whose dims overflow must not pass for an empty one.
func TestCheckTensorOverflowingDims(t *testing.T) {
	v := &ir.Value{Name: "x", Type: ir.TensorType(ir.Float32, ir.ShapeOf(ir.Sym("N"), ir.Sym("M")))}
	err := CheckTensor(v, &ir.Tensor{DType: ir.Float32, Dims: []int64{1 << 31, 1 << 31}, Raw: []byte{}}, map[string]int64{})
	if err == nil || !strings.Contains(err.Error(), "overflows") {
		t.Fatalf("got %v", err)
	}
}

func TestOpsetTooNew(t *testing.T) {
	m := expandModel()
	m.OpsetImports[0].Version = 99
	if _, err := New(m); err == nil || !strings.Contains(err.Error(), `opset 99 for domain "": kiln supports up to 26`) {
		t.Fatalf("got %v", err)
	}
}
