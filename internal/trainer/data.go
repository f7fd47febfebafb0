package trainer

import (
	"fmt"
	"math/rand"
	"slices"
	"sync"

	"github.com/kiln-ml/kiln/internal/dataset"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// Samples is a data set in memory: each input's samples back to back, and
// their labels.
type Samples struct {
	N      int
	inputs []field
	labels field
}

// field is one input's (or the labels') samples.
type field struct {
	name  string
	dtype ir.DType
	dims  []int64 // one sample's, without the batch dim
	size  int     // bytes per sample
	data  []byte
}

// Load reads the data (the forms of internal/dataset: a tensor file whose
// leading dim counts samples, a folder of them, NAME=FILE per input) and
// the labels (class indices for softmax-cross-entropy, an integer file of
// one per sample; for mse, targets of the output's shape) for the engine's
// data inputs, at the shapes its bindings give.
func Load(tr *engine.Training, inputs []engine.Binding, data []string, labels string, lim ir.Limits) (*Samples, error) {
	var ins []dataset.Input
	var fields []field
	for _, name := range tr.Data {
		b := binding(inputs, name)
		if b == nil {
			return nil, fmt.Errorf("the engine lacks its data input %q", name)
		}
		d, err := ir.ParseDType(b.DType)
		if err != nil {
			return nil, err
		}
		dims := append([]int64{1}, b.Shape[1:]...)
		ins = append(ins, dataset.Input{Name: name, DType: d, Dims: dims})
		fields = append(fields, field{name: name, dtype: d, dims: slices.Clone(b.Shape[1:]), size: int(ir.Product(b.Shape[1:])) * d.Size()})
	}
	set, err := dataset.Read(data, ins, lim)
	if err != nil {
		return nil, err
	}
	s := &Samples{N: set.Runs(), inputs: fields}
	for i := 0; i < set.Runs(); i++ {
		run := set.Run(i)
		for k := range s.inputs {
			s.inputs[k].data = append(s.inputs[k].data, run[s.inputs[k].name].Raw...)
		}
	}
	lb := binding(inputs, tr.Label)
	if lb == nil {
		return nil, fmt.Errorf("the engine lacks its label input %q", tr.Label)
	}
	ld, err := ir.ParseDType(lb.DType)
	if err != nil {
		return nil, err
	}
	s.labels = field{name: tr.Label, dtype: ld, dims: slices.Clone(lb.Shape[1:]), size: int(ir.Product(lb.Shape[1:])) * ld.Size()}
	if tr.LossKind == "softmax-cross-entropy" {
		ys, err := dataset.ReadLabels(labels, lim)
		if err != nil {
			return nil, err
		}
		if len(ys) != s.N {
			return nil, fmt.Errorf("%s holds %d labels for %d samples", labels, len(ys), s.N)
		}
		t := ir.FromSlice(ir.Int64, []int64{int64(len(ys))}, ys)
		s.labels.data = t.Raw
		if ld != ir.Int64 || s.labels.size != 8 {
			return nil, fmt.Errorf("the engine's label input is %s%v, want int64 class indices", ld, lb.Shape)
		}
	} else {
		set, err := dataset.Read([]string{labels}, []dataset.Input{{Name: tr.Label, DType: ld, Dims: append([]int64{1}, s.labels.dims...)}}, lim)
		if err != nil {
			return nil, err
		}
		if set.Runs() != s.N {
			return nil, fmt.Errorf("%s holds %d targets for %d samples", labels, set.Runs(), s.N)
		}
		for i := 0; i < set.Runs(); i++ {
			s.labels.data = append(s.labels.data, set.Run(i)[tr.Label].Raw...)
		}
	}
	return s, nil
}

// CheckClasses refuses labels outside [0, classes).
func (s *Samples) CheckClasses(classes int) error {
	if s.labels.dtype != ir.Int64 || classes <= 0 {
		return nil
	}
	t := ir.FromRaw(ir.Int64, []int64{int64(s.N)}, s.labels.data)
	for i, y := range ir.Data[int64](t) {
		if y < 0 || y >= int64(classes) {
			return fmt.Errorf("label %d of sample %d is not a class of the model's %d", y, i, classes)
		}
	}
	return nil
}

// Batch is one mini-batch: the data inputs by name and the labels; Valid
// rows are samples (an evaluation's last batch pads the rest).
type Batch struct {
	Data   map[string]*ir.Tensor
	Labels *ir.Tensor
	Valid  int
	// Epoch counts from 1; Index is the batch's place in its epoch.
	Epoch, Index int
}

func (s *Samples) newBatch(b int) *Batch {
	bt := &Batch{Data: map[string]*ir.Tensor{}}
	for _, f := range s.inputs {
		t := ir.NewTensor(f.dtype, append([]int64{int64(b)}, f.dims...)...)
		t.Name = f.name
		bt.Data[f.name] = t
	}
	bt.Labels = ir.NewTensor(s.labels.dtype, append([]int64{int64(b)}, s.labels.dims...)...)
	return bt
}

// fill copies the samples order[i] into the batch's rows (zeros past them).
func (s *Samples) fill(bt *Batch, order []int) {
	copyRows := func(f field, dst []byte) {
		clear(dst)
		for r, i := range order {
			copy(dst[r*f.size:(r+1)*f.size], f.data[i*f.size:(i+1)*f.size])
		}
	}
	for _, f := range s.inputs {
		copyRows(f, bt.Data[f.name].Raw)
	}
	copyRows(s.labels, bt.Labels.Raw)
	bt.Valid = len(order)
}

// PerEpoch is the number of full batches of size b an epoch holds (the
// samples left over go unused that epoch; the shuffle varies which).
func (s *Samples) PerEpoch(b int) int { return s.N / b }

// Loader assembles shuffled batches on a background goroutine while the
// caller trains on the previous one: the data pipeline never waits on
// the step, and the step waits only when a batch takes longer to build.
type Loader struct {
	ready chan *Batch
	free  chan *Batch
	stop  chan struct{}
	wg    sync.WaitGroup
}

// Shuffled starts the worker: epochs of the samples in a new seeded order
// each, PerEpoch(b) batches of b each. Up to ahead batches wait ready.
func (s *Samples) Shuffled(b, epochs, ahead int, seed int64) *Loader {
	l := &Loader{ready: make(chan *Batch, ahead), free: make(chan *Batch, ahead+2), stop: make(chan struct{})}
	for i := 0; i < ahead+2; i++ {
		l.free <- s.newBatch(b)
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer close(l.ready)
		rng := rand.New(rand.NewSource(seed))
		for e := 1; e <= epochs; e++ {
			order := rng.Perm(s.N)
			for k := 0; k < s.PerEpoch(b); k++ {
				var bt *Batch
				select {
				case bt = <-l.free:
				case <-l.stop:
					return
				}
				s.fill(bt, order[k*b:(k+1)*b])
				bt.Epoch, bt.Index = e, k
				select {
				case l.ready <- bt:
				case <-l.stop:
					return
				}
			}
		}
	}()
	return l
}

// Next returns the next batch, or false after the last.
func (l *Loader) Next() (*Batch, bool) {
	b, ok := <-l.ready
	return b, ok
}

// Done hands a batch's buffers back for reuse.
func (l *Loader) Done(b *Batch) {
	select {
	case l.free <- b:
	default:
	}
}

// Close stops the worker.
func (l *Loader) Close() {
	close(l.stop)
	l.wg.Wait()
}

// Sequential yields the samples in order in batches of b, the last padded
// with zero rows (Valid says how many are real): for evaluation.
func (s *Samples) Sequential(b int, f func(*Batch) error) error {
	bt := s.newBatch(b)
	order := make([]int, 0, b)
	for start := 0; start < s.N; start += b {
		order = order[:0]
		for i := start; i < min(start+b, s.N); i++ {
			order = append(order, i)
		}
		s.fill(bt, order)
		if err := f(bt); err != nil {
			return err
		}
	}
	return nil
}
