package runtime_test

import (
	"flag"
	"fmt"
	"github.com/kiln-ml/kiln/codegen/cpu"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/engine"
)

const models = "../testdata/models"

// TestMain leaves out the Example when llc is absent: it compiles a model
// first, and an Example cannot skip itself.
func TestMain(m *testing.M) {
	flag.Parse()
	if err := cpu.Available(); err != nil && flag.Lookup("test.run").Value.String() == "" {
		fmt.Printf("%v: skipping the Example and the engine tests\n", err)
		flag.Set("test.run", "^(Test|Fuzz)")
	}
	os.Exit(m.Run())
}

// Example compiles the bundled digits MLP (as `cc build` does), loads the
// engine file and classifies one image on two threads.
func Example() {
	dir, err := os.MkdirTemp("", "kiln-example-*")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	built, err := build.Build("../testdata/models/digits_mlp.onnx", build.Options{OptLevel: 2})
	if err != nil {
		panic(err)
	}
	path := filepath.Join(dir, "digits_mlp.kiln")
	if err := os.WriteFile(path, built.Engine, 0o644); err != nil {
		panic(err)
	}

	eng, err := runtime.Load(path)
	if err != nil {
		panic(err)
	}
	defer eng.Close()
	ctx, err := eng.NewContext(runtime.Options{Threads: 2})
	if err != nil {
		panic(err)
	}
	in, out := eng.Inputs()[0], eng.Outputs()[0]
	fmt.Printf("input %s %s%v, output %s %s%v\n", in.Name, in.DType, in.Shape, out.Name, out.DType, out.Shape)

	image, err := onnx.ReadTensorFile("../testdata/models/digits_mlp/test_data_set_0/input_0.pb")
	if err != nil {
		panic(err)
	}
	outs, err := ctx.Run(map[string]*ir.Tensor{in.Name: image})
	if err != nil {
		panic(err)
	}
	logits := outs[out.Name].Float32s()
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	fmt.Println("digit:", best)
	// Output:
	// input input float[1 64], output output float[1 10]
	// digit: 2
}

func needLLC(t testing.TB) {
	t.Helper()
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
}

// loadModel builds a bundled model. The digits models are small enough
// that codegen caps them at one thread; the tests lift the cap (re-encoding
// the engine) so they exercise the runtime's multi-thread paths.
func loadModel(t testing.TB, name string) *runtime.Engine {
	t.Helper()
	needLLC(t)
	built, err := build.Build(filepath.Join(models, name+".onnx"), build.Options{OptLevel: 2})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := engine.Decode(built.Engine)
	if err != nil {
		t.Fatal(err)
	}
	if dec.Meta.MaxThreads != 1 {
		t.Fatalf("%s: codegen should cap this tiny model at 1 thread, got %d", name, dec.Meta.MaxThreads)
	}
	capped, err := runtime.LoadBytes(built.Engine)
	if err != nil {
		t.Fatal(err)
	}
	defer capped.Close()
	if ctx, err := capped.NewContext(runtime.Options{Threads: 4}); err != nil || ctx.Threads() != 1 {
		t.Fatalf("%s: a capped engine's context should use 1 thread (err %v)", name, err)
	}
	dec.Meta.MaxThreads = 0
	uncapped, err := dec.Encode()
	if err != nil {
		t.Fatal(err)
	}
	eng, err := runtime.LoadBytes(uncapped)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

func randomInputs(eng *runtime.Engine, seed int64) map[string]*ir.Tensor {
	rng := rand.New(rand.NewSource(seed))
	feeds := map[string]*ir.Tensor{}
	for _, b := range eng.Inputs() {
		t := ir.NewTensor(ir.Float32, b.Shape...)
		for i := range t.Float32s() {
			t.Float32s()[i] = float32(rng.NormFloat64())
		}
		feeds[b.Name] = t
	}
	return feeds
}

// TestConcurrentContexts runs one engine from 8 goroutines at once, each
// with its own Context (arena and worker threads) and inputs, 100 times
// each: every output must be bit-identical to the same input's serial run.
// Under -race this also checks the worker pool's handoffs.
func TestConcurrentContexts(t *testing.T) {
	const goroutines, runs = 8, 100
	for _, name := range []string{"digits_mlp", "digits_cnn"} {
		t.Run(name, func(t *testing.T) {
			eng := loadModel(t, name)
			out := eng.Outputs()[0].Name
			serial, err := eng.NewContext(runtime.Options{Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			inputs := make([]map[string]*ir.Tensor, goroutines)
			want := make([]*ir.Tensor, goroutines)
			for g := range inputs {
				inputs[g] = randomInputs(eng, int64(g))
				outs, err := serial.Run(inputs[g])
				if err != nil {
					t.Fatal(err)
				}
				want[g] = outs[out]
			}
			var wg sync.WaitGroup
			errs := make(chan error, goroutines)
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, err := eng.NewContext(runtime.Options{Threads: 2})
					if err != nil {
						errs <- err
						return
					}
					for i := range runs {
						outs, err := ctx.Run(inputs[g])
						if err != nil {
							errs <- err
							return
						}
						if !outs[out].Equal(want[g]) {
							errs <- fmt.Errorf("goroutine %d, run %d: output differs from the serial run", g, i)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// TestThreadCounts runs contexts of 1 to 4 threads (more than this
// machine may have cores) on one engine; the results agree to rounding.
func TestThreadCounts(t *testing.T) {
	eng := loadModel(t, "digits_cnn")
	feeds := randomInputs(eng, 1)
	out := eng.Outputs()[0].Name
	var first []float32
	for threads := 1; threads <= 4; threads++ {
		ctx, err := eng.NewContext(runtime.Options{Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
		if ctx.Threads() != threads {
			t.Fatalf("Threads() = %d, want %d", ctx.Threads(), threads)
		}
		for range 20 {
			outs, err := ctx.Run(feeds)
			if err != nil {
				t.Fatal(err)
			}
			got := outs[out].Float32s()
			if first == nil {
				first = got
			}
			for i := range got {
				if d := got[i] - first[i]; d > 1e-4 || d < -1e-4 {
					t.Fatalf("threads=%d: output[%d] = %v, with 1 thread %v", threads, i, got[i], first[i])
				}
			}
		}
	}
}

// TestRunProfiled: the profile has a time per kernel and the outputs are
// those of Run.
func TestRunProfiled(t *testing.T) {
	eng := loadModel(t, "digits_cnn")
	feeds := randomInputs(eng, 2)
	out := eng.Outputs()[0].Name
	ctx, err := eng.NewContext(runtime.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	want, err := ctx.Run(feeds)
	if err != nil {
		t.Fatal(err)
	}
	p, err := eng.NewProfile()
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Kernels) == 0 || len(p.Kernels) != len(eng.Meta.Kernels) {
		t.Fatalf("profile kernels %v, engine kernels %v", p.Kernels, eng.Meta.Kernels)
	}
	for range 200 {
		got, err := ctx.RunProfiled(feeds, p)
		if err != nil {
			t.Fatal(err)
		}
		if !got[out].Equal(want[out]) {
			t.Fatal("RunProfiled's output differs from Run's")
		}
	}
	if p.Runs != 200 {
		t.Fatalf("Runs = %d, want 200", p.Runs)
	}
	median, mean := p.Median(), p.Mean()
	var total float64
	for i := range median {
		if median[i] < 0 || mean[i] < 0 {
			t.Fatalf("kernel %s: median %v, mean %v", p.Kernels[i], median[i], mean[i])
		}
		total += mean[i].Seconds()
	}
	if total <= 0 || total > 1 {
		t.Fatalf("the kernels' mean times sum to %gs", total)
	}

	other := loadModel(t, "digits_mlp")
	if _, err := ctx.RunProfiled(feeds, func() *runtime.Profile { p, _ := other.NewProfile(); return p }()); err == nil {
		t.Fatal("RunProfiled accepted another engine's profile")
	}
}
