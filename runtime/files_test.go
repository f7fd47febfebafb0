package runtime_test

import (
	"path/filepath"
	"testing"

	"github.com/kiln-ml/kiln/internal/readfile/fifotest"
	"github.com/kiln-ml/kiln/runtime"
)

// Issue 32: a named pipe as the engine hung `infer` and the server's
// loader forever; LoadWith refuses it at once, by name, copying the
// weights or mapping them.
func TestLoadRefusesNamedPipe(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "e.kiln")
	fifotest.Make(t, fifo)
	fifotest.Returns(t, fifo, func() error { _, err := runtime.Load(fifo); return err })
	fifotest.Returns(t, fifo, func() error {
		_, err := runtime.LoadWith(fifo, runtime.LoadOptions{CopyWeights: true})
		return err
	})
}
