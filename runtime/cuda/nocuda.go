//go:build !cuda

package cuda

import (
	"errors"
	"time"

	"github.com/kiln-ml/kiln/cudacode"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// ErrNotBuilt is what Load returns in a runtime built without the cuda
// tag.
var ErrNotBuilt = errors.New("this runtime was built without CUDA: build infer with `go build -tags cuda ./cmd/infer` on a machine with the CUDA driver's headers and libcuda (see README: Targets)")

// Engine is a loaded CUDA engine (never, without the cuda tag).
type Engine struct {
	Meta               engine.Metadata
	Module             *cudacode.Module
	Device, Arch, Code string
}

// Timing is one run's phases.
type Timing struct{ H2D, Compute, D2H time.Duration }

// LoadBytes fails: the runtime has no CUDA.
func LoadBytes([]byte) (*Engine, error) { return nil, ErrNotBuilt }

// Run fails: the runtime has no CUDA.
func (*Engine) Run(map[string]*ir.Tensor) (map[string]*ir.Tensor, Timing, error) {
	return nil, Timing{}, ErrNotBuilt
}

// Close does nothing.
func (*Engine) Close() error { return nil }

// Available reports whether this runtime can run CUDA engines.
func Available() error { return ErrNotBuilt }
