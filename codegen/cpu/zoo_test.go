package cpu

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/ir"
)

const zooDir = "../../../shared/zoo"

func zooModel(t testing.TB, name string) (*ir.Model, map[string]*ir.Tensor, *ir.Tensor) {
	t.Helper()
	dir := filepath.Join(zooDir, name)
	if _, err := os.Stat(filepath.Join(dir, "model.onnx")); err != nil {
		t.Skipf("zoo model %s not present (%s)", name, dir)
	}
	m, err := onnx.ReadFile(filepath.Join(dir, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := onnx.ReadTensorFile(filepath.Join(dir, "test_data_set_0", "input_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := onnx.ReadTensorFile(filepath.Join(dir, "test_data_set_0", "output_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	return m, map[string]*ir.Tensor{m.Graph.Inputs[0].Name: in}, want
}

var zooModels = []string{"digits_mlp", "digits_cnn", "resnet18", "squeezenet1_1", "mobilenet_v2", "tiny_bert", "lstm_small"}

func TestZoo(t *testing.T) {
	needLLC(t)
	for _, name := range zooModels {
		t.Run(name, func(t *testing.T) {
			m, feeds, want := zooModel(t, name)
			res, err := Compile(optimize(t, m), Options{})
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			e, err := Load(res)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			for _, threads := range []int{1, 2} {
				out, err := e.Run(feeds, threads, nil)
				if err != nil {
					t.Fatal(err)
				}
				got := out[m.Graph.Outputs[0].Name]
				if errL2 := relL2(got, want); !(errL2 <= 1e-4) {
					t.Errorf("threads=%d: rel. L2 error %.3g > 1e-4", threads, errL2)
				} else if threads == 1 {
					t.Logf("rel. L2 error %.2g; arena %d KiB (tensors %d KiB), weights %d KiB, %d kernels",
						errL2, res.ArenaBytes>>10, res.TensorBytes>>10, len(res.Weights)>>10, len(res.Kernels))
				}
			}
		})
	}
}

func benchModel(b *testing.B, name string) {
	needLLC(b)
	m, feeds, _ := zooModel(b, name)
	res, err := Compile(optimize(b, m), Options{})
	if err != nil {
		b.Fatalf("compile: %v", err)
	}
	e, err := Load(res)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	for _, threads := range []int{1, 2} {
		b.Run(map[int]string{1: "threads=1", 2: "threads=2"}[threads], func(b *testing.B) {
			arena := e.NewArena()
			for i := 0; i < 3; i++ {
				e.Run(feeds, threads, arena)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				e.Run(feeds, threads, arena)
			}
		})
	}
}

func BenchmarkResNet18(b *testing.B)    { benchModel(b, "resnet18") }
func BenchmarkMobileNetV2(b *testing.B) { benchModel(b, "mobilenet_v2") }
func BenchmarkSqueezeNet(b *testing.B)  { benchModel(b, "squeezenet1_1") }
func BenchmarkTinyBERT(b *testing.B)    { benchModel(b, "tiny_bert") }
func BenchmarkDigitsCNN(b *testing.B)   { benchModel(b, "digits_cnn") }
func BenchmarkDigitsMLP(b *testing.B)   { benchModel(b, "digits_mlp") }
