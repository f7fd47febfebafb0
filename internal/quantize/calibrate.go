package quantize

import (
	"fmt"
	"slices"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/internal/dataset"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// observed lists the tensors calibration records: every float32 graph
// input and node output of the top-level graph, so that one calibration
// serves any --keep-fp32 choice (and its cache any later one).
func observed(g *ir.Graph) []*ir.Value {
	var vs []*ir.Value
	for _, v := range g.Inputs {
		if v.Const == nil && v.Type.Elem == ir.Float32 {
			vs = append(vs, v)
		}
	}
	for _, n := range g.Nodes {
		for _, v := range n.Outputs {
			if v != nil && v.Type.Elem == ir.Float32 {
				vs = append(vs, v)
			}
		}
	}
	return vs
}

// runInputs are m's inputs at the shape one calibration run feeds: a
// dynamic leading (batch) dim runs at 1; other dynamic dims have no size
// to run at.
func runInputs(m *ir.Model) ([]dataset.Input, error) {
	var ins []dataset.Input
	for _, v := range m.Graph.Inputs {
		if v.Const != nil {
			continue
		}
		if !v.Type.IsTensor() || !v.Type.Shape.Ranked {
			return nil, fmt.Errorf("input %q is %s: calibration feeds tensors of known rank", v.Name, v.Type)
		}
		dims := make([]int64, len(v.Type.Shape.Dims))
		for i, d := range v.Type.Shape.Dims {
			switch {
			case d.IsStatic():
				dims[i] = d.Value
			case i == 0:
				dims[i] = 1
			default:
				return nil, fmt.Errorf("input %q is %s: calibration runs need its dims other than the batch known (re-export the model with them static)", v.Name, v.Type)
			}
		}
		ins = append(ins, dataset.Input{Name: v.Name, DType: v.Type.Elem, Dims: dims})
	}
	return ins, nil
}

// keptOutputBytes bounds the float outputs calibration keeps for the
// agreement check (beyond it the check runs the float model again).
const keptOutputBytes = 256 << 20

// calibrate compiles m (which it does not change) into an engine that
// outputs every tensor of vs besides its own outputs, runs it on every run
// of data and returns the statistics of each tensor by name, and m's float
// outputs of each run (nil when they would take more than
// keptOutputBytes).
func calibrate(m *ir.Model, vs []*ir.Value, data *dataset.Set, opts Options) (map[string]*Stats, []map[string]*ir.Tensor, error) {
	// A copy to add outputs to: the build's passes change the model.
	buf, err := onnx.Write(m)
	if err != nil {
		return nil, nil, err
	}
	cm, err := onnx.ReadWithin(buf, "", opts.Build.Limits)
	if err != nil {
		return nil, nil, err
	}
	byName := map[string]*ir.Value{}
	for _, n := range cm.Graph.Nodes {
		for _, v := range n.Outputs {
			if v != nil {
				byName[v.Name] = v
			}
		}
	}
	stats := map[string]*Stats{}
	var fromInputs []string
	for _, v := range vs {
		stats[v.Name] = &Stats{}
		cv := byName[v.Name]
		if cv == nil { // a graph input: its values are the data's
			fromInputs = append(fromInputs, v.Name)
			continue
		}
		if !slices.Contains(cm.Graph.Outputs, cv) {
			cm.Graph.Outputs = append(cm.Graph.Outputs, cv)
		}
	}
	if opts.Progress != nil {
		opts.Progress(-1, data.Runs())
	}
	run, done, err := calibrationRunner(cm, buf, data, opts)
	if err != nil {
		return nil, nil, err
	}
	defer done()
	if opts.Progress != nil {
		opts.Progress(0, data.Runs())
	}
	var kept []map[string]*ir.Tensor
	keptBytes := 0
	for i := range data.Runs() {
		feeds := data.Run(i)
		outs, err := run(feeds)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", data.RunSource(i), err)
		}
		for _, v := range vs {
			t := outs[v.Name]
			if slices.Contains(fromInputs, v.Name) {
				t = feeds[v.Name]
			}
			if t == nil || t.DType != ir.Float32 {
				return nil, nil, fmt.Errorf("the calibration engine gave no float32 %q", v.Name)
			}
			stats[v.Name].Add(t.Float32s())
		}
		kept, keptBytes = keepOutputs(kept, keptBytes, m.Graph.Outputs, outs)
		if opts.Progress != nil {
			opts.Progress(i+1, data.Runs())
		}
	}
	return stats, kept, nil
}

// keepOutputs appends a copy of one run's float outputs to kept, which
// holds size bytes, unless that would pass keptOutputBytes (or has: nil).
func keepOutputs(kept []map[string]*ir.Tensor, size int, outputs []*ir.Value, outs map[string]*ir.Tensor) ([]map[string]*ir.Tensor, int) {
	if size < 0 {
		return nil, size
	}
	run := map[string]*ir.Tensor{}
	for _, v := range outputs {
		if t := outs[v.Name]; t != nil && t.DType == ir.Float32 {
			run[v.Name] = t.Clone() // the engine reuses its buffers
			size += len(t.Raw)
		}
	}
	if size > keptOutputBytes {
		return nil, -1
	}
	return append(kept, run), size
}

// calibrationRunner returns what runs the calibration model cm (whose ONNX
// bytes are buf) on one run's inputs, and what releases it: a native engine
// compiled for this machine, or the reference executor when the tests ask.
func calibrationRunner(cm *ir.Model, buf []byte, data *dataset.Set, opts Options) (func(map[string]*ir.Tensor) (map[string]*ir.Tensor, error), func(), error) {
	if opts.reference {
		ex, err := reference.NewWithin(cm, opts.Build.Limits)
		if err != nil {
			return nil, nil, err
		}
		return ex.Run, func() {}, nil
	}
	// An engine for this machine, whatever the final build targets. It
	// needs the float results, not the last microsecond: Winograd's
	// per-layer timing would cost more than it saves.
	bopts := build.Options{CPU: "native", OptLevel: 2, LLC: opts.Build.LLC, Limits: opts.Build.Limits, Winograd: cpu.WinogradOff,
		Shapes: build.Shapes{Pin: map[string][]int64{}}}
	for _, in := range data.Inputs {
		bopts.Shapes.Pin[in.Name] = in.Dims
	}
	out, err := build.BuildModel(cm, buf, bopts)
	if err != nil {
		return nil, nil, fmt.Errorf("compiling the calibration engine: %w", err)
	}
	eng, err := runtime.LoadBytes(out.Engine)
	if err != nil {
		return nil, nil, fmt.Errorf("loading the calibration engine: %w", err)
	}
	ctx, err := eng.NewContext(runtime.Options{Threads: opts.Threads, Limits: opts.Build.Limits})
	if err != nil {
		eng.Close()
		return nil, nil, err
	}
	return ctx.Run, func() { eng.Close() }, nil
}
