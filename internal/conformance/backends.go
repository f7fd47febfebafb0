package conformance

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// Reference is the backend that runs models on the reference executor,
// under Limits (zero fields: ir.DefaultLimits).
type Reference struct {
	Limits ir.Limits
	// Rewrite, when set, changes the model before the executor takes it:
	// cmd/cc sets autodiff.ExpandGradients, which expands the Gradient
	// nodes that state facts about their graph (infer, which links no
	// passes, leaves it nil).
	Rewrite func(m *ir.Model) error
}

// ReadLimits are the limits RunTest reads the test's files under.
func (r Reference) ReadLimits() ir.Limits { return r.Limits }

// Prepare builds a reference executor for the model. Unsupported ops,
// opsets and dtypes come back as reference.UnsupportedErrors, which
// RunTest reports as UNSUPPORTED.
func (r Reference) Prepare(m *ir.Model) (Runner, error) {
	if r.Rewrite != nil {
		if err := r.Rewrite(m); err != nil {
			return nil, err
		}
	}
	e, err := reference.NewWithin(m, r.Limits)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// backends are the backends `cc test --backend` can name. Backends that
// need the compiler (cpu) are registered by cmd/cc.
var backends = map[string]Backend{
	"reference": Reference{},
}

// Register adds a backend under name, replacing any of that name. Call it
// from an init function: the registry is not locked.
func Register(name string, b Backend) { backends[name] = b }

// BackendNames lists the registered backends, sorted.
func BackendNames() []string {
	names := make([]string, 0, len(backends))
	for name := range backends {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// LookupBackend returns the backend registered under name.
func LookupBackend(name string) (Backend, error) {
	if b, ok := backends[name]; ok {
		return b, nil
	}
	return nil, fmt.Errorf("unknown backend %q (backends: %s)", name, strings.Join(BackendNames(), ", "))
}
