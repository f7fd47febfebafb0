package cpu

import (
	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/passes"
)

// Target is this backend as the passes see it (passes.ConvChooser): the
// kernel layer's elementwise ops fuse, the quantized groups its integer
// kernels cover form, and each convolution's algorithm is chosen (and
// measured) for the CPU Options name.
type Target struct {
	choose func(m *ir.Model, fg *ir.Node) (string, error)
}

var _ passes.ConvChooser = (*Target)(nil)

// NewTarget returns the Target of a build with opts (its CPU, Winograd
// setting and timing cache).
func NewTarget(opts Options) (*Target, error) {
	choose, err := ConvChooser(opts)
	if err != nil {
		return nil, err
	}
	return &Target{choose: choose}, nil
}

// Fusible reports whether n's kernel-layer definition is elementwise.
func (*Target) Fusible(n *ir.Node, _ ops.Opsets) bool { return kernel.Fusible(n) }

// CompilesLoops: the CPU targets compile Loop and Scan bodies as functions
// (passes.LoopTarget), so unroll-scans leaves them.
func (*Target) CompilesLoops() {}

// QuantizedKernel reports whether an integer kernel computes the group.
func (*Target) QuantizedKernel(kind ops.GroupKind, body []*ir.Node, roles []ops.Role) bool {
	return QuantizedKernel(kind, body, roles)
}

// ConvAlgorithm chooses convolution group fg's algorithm.
func (t *Target) ConvAlgorithm(m *ir.Model, fg *ir.Node) (string, error) { return t.choose(m, fg) }
