package runtime_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
)

// `infer run --threads 100000` once started 100,000 OS threads and died of
// thread exhaustion: NewContext caps the count at MaxThreads, visibly.
func TestNewContextClampsThreads(t *testing.T) {
	eng := loadModel(t, "digits_cnn")
	ctx, err := eng.NewContext(runtime.Options{Threads: 100000})
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Threads() != runtime.MaxThreads() {
		t.Fatalf("Threads() = %d, want MaxThreads() = %d", ctx.Threads(), runtime.MaxThreads())
	}
	one, err := eng.NewContext(runtime.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	feeds := randomInputs(eng, 3)
	got, err := ctx.Run(feeds)
	if err != nil {
		t.Fatal(err)
	}
	want, err := one.Run(feeds)
	if err != nil {
		t.Fatal(err)
	}
	name := eng.Outputs()[0].Name
	for i, w := range want[name].Float32s() {
		if d := got[name].Float32s()[i] - w; d > 1e-4 || d < -1e-4 {
			t.Fatalf("output[%d] = %v at %d threads, %v at 1", i, got[name].Float32s()[i], ctx.Threads(), w)
		}
	}
}

func TestNewContextLimits(t *testing.T) {
	eng := loadModel(t, "digits_cnn")
	arena := eng.Meta.ArenaBytes
	if arena <= 0 {
		t.Fatalf("digits_cnn has an arena of %d bytes", arena)
	}
	if _, err := eng.NewContext(runtime.Options{Limits: ir.Limits{MaxArenaBytes: arena}}); err != nil {
		t.Fatalf("an arena at the limit: %v", err)
	}
	_, err := eng.NewContext(runtime.Options{Limits: ir.Limits{MaxArenaBytes: arena - 1}})
	if !errors.Is(err, ir.ErrLimit) || !strings.Contains(err.Error(), "the engine's arena is") || !strings.Contains(err.Error(), ir.FlagMaxArenaBytes) {
		t.Fatalf("an arena one byte over the limit: %v", err)
	}
	in := eng.Inputs()[0]
	_, err = eng.NewContext(runtime.Options{Limits: ir.Limits{MaxTensorBytes: 4}})
	if !errors.Is(err, ir.ErrLimit) || !strings.Contains(err.Error(), `engine binding "`+in.Name+`"`) {
		t.Fatalf("bindings over the tensor limit: %v", err)
	}
}
