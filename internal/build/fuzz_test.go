package build

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// fuzzModels are the real models FuzzBuildMutated starts from.
var fuzzModels = []string{"digits_mlp.onnx", "digits_cnn.onnx", "unet_small.onnx"}

// FuzzBuildMutated changes the structure of real models the way other
// exporters write them: an older or newer IR version, every initializer
// also listed as a graph input (Caffe2-era files), a static input dim made
// symbolic or zero, another opset import. When the reference executor runs
// the result, cc build's path must give an engine whose outputs match it, or
// refuse with an unsupported-op or limit error; any other error is an
// internal error by another name and fails like a panic.
func FuzzBuildMutated(f *testing.F) {
	if err := cpu.Available(); err != nil {
		f.Skip(err)
	}
	for _, seed := range [][]byte{
		{0, 0, 0, 0, 0},
		{1, 3, 1, 0, 0},
		{0, 1, 1, 2, 1},
		{1, 0, 0, 1, 3},
		{2, 2, 0, 1, 2},
		{1, 4, 1, 3, 4},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := byteReader(data)
		path := filepath.Join("../../testdata/models", fuzzModels[r.next(len(fuzzModels))])
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ReadModel(path)
		if err != nil {
			t.Fatal(err)
		}
		how := mutate(m, &r)
		ref, err := reference.New(m)
		if err != nil {
			return // the mutation made a model the reference refuses
		}
		feeds := randomFeeds(m, int64(len(data)))
		want, err := ref.Run(feeds)
		if err != nil {
			return
		}
		// Winograd off: its build-time tuning times each convolution,
		// seconds a model, and the fuzzer counts an input past 10 s as hung.
		out, err := BuildModel(m, src, Options{OptLevel: 2, Winograd: cpu.WinogradOff})
		if err != nil {
			if !refusal(err) {
				t.Fatalf("%s: an internal error on a model the reference runs: %v", how, err)
			}
			return
		}
		e, err := runtime.LoadBytes(out.Engine)
		if err != nil {
			t.Fatalf("%s: load: %v", how, err)
		}
		defer e.Close()
		ctx, err := e.NewContext(runtime.Options{Threads: 2})
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		got, err := ctx.Run(feeds)
		if err != nil {
			t.Fatalf("%s: run: %v", how, err)
		}
		for name, w := range want {
			if err := closeTo(got[name], w); err != nil {
				t.Fatalf("%s: output %s: %v", how, name, err)
			}
		}
	})
}

// refusal reports whether a build error is one a user may get for a valid
// model: an op, opset or dtype kiln lacks, or a size over a limit.
func refusal(err error) bool {
	var ue *ops.UnsupportedError
	return errors.As(err, &ue) || errors.Is(err, ir.ErrLimit)
}

// mutate applies the mutations data asks for and says which.
func mutate(m *ir.Model, r *byteReader) string {
	how := filepath.Base(m.Graph.Name)
	irVersions := []int64{m.IRVersion, 3, 4, 7, 8, 10}
	m.IRVersion = irVersions[r.next(len(irVersions))]
	how += fmt.Sprintf(" ir_version %d", m.IRVersion)
	if r.next(2) == 1 {
		for _, v := range m.Graph.Initializers {
			if !contains(m.Graph.Inputs, v) {
				m.Graph.Inputs = append(m.Graph.Inputs, v)
			}
		}
		how += ", initializers as inputs"
	}
	if x := firstRunInput(m.Graph); x != nil && x.Type.Shape.Rank() > 0 {
		dims := x.Type.Shape.Dims
		switch r.next(3) {
		case 1:
			dims[0] = ir.Sym("batch")
			how += fmt.Sprintf(", %s dim 0 symbolic", x.Name)
		case 2:
			dims[0] = ir.D(0)
			how += fmt.Sprintf(", %s dim 0 zero", x.Name)
		}
	}
	opsets := []int64{0, 9, 11, 13, 17, 21}
	if v := opsets[r.next(len(opsets))]; v != 0 {
		for i := range m.OpsetImports {
			if d := m.OpsetImports[i].Domain; d == "" || d == "ai.onnx" {
				m.OpsetImports[i].Version = v
			}
		}
		how += fmt.Sprintf(", opset %d", v)
	}
	return how
}

// firstRunInput is the first graph input that is not also an initializer.
func firstRunInput(g *ir.Graph) *ir.Value {
	for _, v := range g.Inputs {
		if !v.IsConst() {
			return v
		}
	}
	return nil
}

// randomFeeds gives each run-time input N(0, 1) data, symbolic dims set to 2.
func randomFeeds(m *ir.Model, seed int64) map[string]*ir.Tensor {
	rng := rand.New(rand.NewSource(seed))
	feeds := map[string]*ir.Tensor{}
	for _, v := range m.Graph.Inputs {
		if v.IsConst() || v.Type.Elem != ir.Float32 {
			continue
		}
		dims := make([]int64, v.Type.Shape.Rank())
		for i, d := range v.Type.Shape.Dims {
			dims[i] = 2
			if d.IsStatic() {
				dims[i] = d.Value
			}
		}
		x := make([]float32, ir.Product(dims))
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		feeds[v.Name] = ir.FromSlice(ir.Float32, dims, x)
	}
	return feeds
}

// closeTo compares an engine's float output with the reference's by shape
// and relative L2 error (1e-4: FP32 kernels reassociate sums).
func closeTo(got, want *ir.Tensor) error {
	if got == nil {
		return errors.New("missing")
	}
	if fmt.Sprint(got.Dims) != fmt.Sprint(want.Dims) {
		return fmt.Errorf("shape %v, want %v", got.Dims, want.Dims)
	}
	if want.DType != ir.Float32 {
		return nil
	}
	g, w := got.Float32s(), want.Float32s()
	var num, den float64
	for i := range w {
		d := float64(g[i]) - float64(w[i])
		num += d * d
		den += float64(w[i]) * float64(w[i])
	}
	if rel := math.Sqrt(num / math.Max(den, 1e-30)); rel > 1e-4 || math.IsNaN(rel) {
		return fmt.Errorf("rel. L2 error %.3g", rel)
	}
	return nil
}

func contains(vs []*ir.Value, v *ir.Value) bool {
	for _, u := range vs {
		if u == v {
			return true
		}
	}
	return false
}

// byteReader draws small numbers from the fuzzer's bytes (zeros once they
// run out).
type byteReader []byte

func (r *byteReader) next(n int) int {
	if len(*r) == 0 || n <= 0 {
		return 0
	}
	b := int((*r)[0])
	*r = (*r)[1:]
	return b % n
}
