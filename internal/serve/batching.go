package serve

import (
	"slices"
	"strings"
	"time"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// Dynamic batching: a worker that takes a request waits up to
// --max-queue-delay for more, up to --max-batch rows, concatenates their
// inputs along dim 0, runs them as one inference and splits the outputs.
// It applies to engines whose inputs and outputs all lead with the same
// dynamic dim (a batch dim, e.g. exported with dynamic_axes={0: "N"})
// that no other dim depends on; other engines run one request at a time.

// batchLimit is the most rows one batched run of eng takes: maxBatch
// capped at the batch dim's range, or 0 when eng cannot be batched.
func batchLimit(eng *runtime.Engine, maxBatch int) int64 {
	if maxBatch <= 1 || len(eng.Meta.Pinned) > 0 {
		return 0
	}
	ins, outs := eng.Inputs(), eng.Outputs()
	if len(ins) == 0 || len(ins[0].Dims) == 0 {
		return 0
	}
	sym := ins[0].Dims[0]
	i := slices.IndexFunc(eng.Meta.Symbols, func(s engine.Symbol) bool { return s.Name == sym })
	if sym == "" || i < 0 {
		return 0
	}
	for _, b := range append(ins, outs...) {
		if len(b.Dims) == 0 || b.Dims[0] != sym {
			return 0
		}
		for _, d := range b.Dims[1:] {
			if strings.Contains(d, sym) {
				return 0
			}
		}
	}
	return min(int64(maxBatch), eng.Meta.Symbols[i].Max)
}

// gather adds queued jobs to batch until it holds maxBatch rows or the
// delay has passed. A job that does not fit (too many rows, or other
// dims than the batch's) is returned as carry, to run next.
func (m *model) gather(batch []*job) (out []*job, carry *job) {
	rows := batch[0].rows
	var timeout <-chan time.Time
	if m.delay > 0 {
		timer := time.NewTimer(m.delay)
		defer timer.Stop()
		timeout = timer.C
	}
	for rows < m.maxBatch {
		var j *job
		var ok bool
		if timeout == nil {
			select {
			case j, ok = <-m.queue:
			default:
				return batch, nil
			}
		} else {
			select {
			case j, ok = <-m.queue:
			case <-timeout:
				return batch, nil
			}
		}
		if !ok {
			return batch, nil
		}
		if j.ctx.Err() != nil {
			j.done <- result{err: ctxError(j.ctx, m)}
			continue
		}
		if rows+j.rows > m.maxBatch || !sameRows(m.inputs, batch[0], j) {
			return batch, j
		}
		batch = append(batch, j)
		rows += j.rows
	}
	return batch, nil
}

// sameRows reports whether a's and b's inputs agree in every dim but the
// first, so that they concatenate.
func sameRows(inputs []engine.Binding, a, b *job) bool {
	for _, in := range inputs {
		if !slices.Equal(a.inputs[in.Name].Dims[1:], b.inputs[in.Name].Dims[1:]) {
			return false
		}
	}
	return true
}

// concat joins the batch's inputs along dim 0.
func concat(inputs []engine.Binding, batch []*job) map[string]*ir.Tensor {
	out := make(map[string]*ir.Tensor, len(inputs))
	for _, in := range inputs {
		first := batch[0].inputs[in.Name]
		dims := slices.Clone(first.Dims)
		dims[0] = 0
		size := 0
		for _, j := range batch {
			dims[0] += j.rows
			size += len(j.inputs[in.Name].Raw)
		}
		raw := ir.AlignedBytes(size)[:0]
		for _, j := range batch {
			raw = append(raw, j.inputs[in.Name].Raw...)
		}
		t := ir.FromRaw(first.DType, dims, raw)
		t.Name = in.Name
		out[in.Name] = t
	}
	return out
}

// split cuts a batched run's outputs into each job's rows.
func split(outs map[string]*ir.Tensor, batch []*job) []map[string]*ir.Tensor {
	total := int64(0)
	for _, j := range batch {
		total += j.rows
	}
	res := make([]map[string]*ir.Tensor, len(batch))
	for i := range res {
		res[i] = make(map[string]*ir.Tensor, len(outs))
	}
	for name, t := range outs {
		rowBytes := int64(len(t.Raw)) / total
		start := int64(0)
		for i, j := range batch {
			dims := slices.Clone(t.Dims)
			dims[0] = j.rows
			part := ir.FromRaw(t.DType, dims, t.Raw[start*rowBytes:(start+j.rows)*rowBytes:(start+j.rows)*rowBytes])
			part.Name = name
			res[i][name] = part
			start += j.rows
		}
	}
	return res
}
