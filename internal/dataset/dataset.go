// Package dataset reads the sample data kiln's tools feed to a model —
// calibration data for quantization, the inputs infer compare runs two
// engines on — and splits it into the runs the model takes. The forms:
//
//   - FILE: a tensor file (ONNX TensorProto .pb or NumPy .npy) whose leading
//     dim counts samples: [32,3,224,224] is 32 samples for an input of
//     [1,3,224,224] (32 runs) or [4,3,224,224] (8 runs), or for an input of
//     [3,224,224] that has no batch dim (32 runs);
//   - DIR: a folder of such files (its .pb and .npy files in name order,
//     other files ignored), their samples concatenated;
//   - an ONNX test_data_set folder (input_N.pb: one run's inputs in the
//     model's input order), or a folder of test_data_set_* folders (a zoo
//     model's folder): one run each;
//   - NAME=FILE, NAME=DIR: the samples of input NAME, one per input, for a
//     model with several.
package dataset

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kiln-ml/kiln/ir"
)

// Input is a model input as one run takes it.
type Input struct {
	Name  string
	DType ir.DType
	Dims  []int64 // one run's shape, the batch dim included
}

func (in Input) String() string { return fmt.Sprintf("%q (%s%v)", in.Name, in.DType, in.Dims) }

// Set is sample data split into runs.
type Set struct {
	Inputs []Input
	// Samples counts the samples over all runs (a run of batch 4 holds 4).
	Samples int
	// Source says where the data came from, for messages.
	Source string

	runs   int
	perRun int // samples per run (file forms)
	// File forms: per input, all samples back to back, and one run's dims.
	data map[string][]byte
	// Test-set forms: each run's tensors and folder.
	sets    []map[string]*ir.Tensor
	setDirs []string
}

// Runs is the number of runs the data fills.
func (s *Set) Runs() int { return s.runs }

// Run returns run i's inputs. The tensors share the set's memory: callers
// must not change them.
func (s *Set) Run(i int) map[string]*ir.Tensor {
	if s.sets != nil {
		return s.sets[i]
	}
	feeds := make(map[string]*ir.Tensor, len(s.Inputs))
	for _, in := range s.Inputs {
		n := int(ir.Product(in.Dims)) * in.DType.Size()
		raw := s.data[in.Name][i*n : (i+1)*n : (i+1)*n]
		t := ir.FromRaw(in.DType, slices.Clone(in.Dims), raw)
		t.Name = in.Name
		feeds[in.Name] = t
	}
	return feeds
}

// SamplesIn is the number of samples run i holds.
func (s *Set) SamplesIn(i int) int {
	if s.sets != nil {
		return batchOf(s.sets[i][s.Inputs[0].Name])
	}
	return s.perRun
}

// RunSource names where run i came from, for messages.
func (s *Set) RunSource(i int) string {
	if s.sets != nil {
		return s.setDirs[i]
	}
	return fmt.Sprintf("%s, samples %d to %d", s.Source, i*s.perRun, (i+1)*s.perRun-1)
}

// batchOf is a test set tensor's sample count: its leading dim.
func batchOf(t *ir.Tensor) int {
	if t == nil || len(t.Dims) == 0 {
		return 1
	}
	return int(t.Dims[0])
}

// Read reads data given in one of the package's forms: specs is one path
// (a file or folder) or one NAME=PATH per input. inputs are the model's
// inputs in order, each at the shape of one run.
func Read(specs []string, inputs []Input, lim ir.Limits) (*Set, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("no data given")
	}
	if len(inputs) == 0 {
		return nil, fmt.Errorf("the model has no inputs to feed data to")
	}
	for _, in := range inputs {
		if in.DType.Size() <= 0 {
			return nil, fmt.Errorf("input %s: no data form holds %s", in, in.DType)
		}
	}
	named := map[string]string{}
	var unnamed []string
	for _, spec := range specs {
		if _, err := os.Stat(spec); err == nil {
			unnamed = append(unnamed, spec)
			continue
		}
		name, path, ok := strings.Cut(spec, "=")
		if !ok {
			_, err := os.Stat(spec)
			return nil, err
		}
		if !slices.ContainsFunc(inputs, func(in Input) bool { return in.Name == name }) {
			if _, err := os.Stat(path); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("%s: the model has no input %q (its inputs: %s)", spec, name, inputNames(inputs))
		}
		if prev, ok := named[name]; ok {
			return nil, fmt.Errorf("input %q given twice (%s and %s)", name, prev, path)
		}
		named[name] = path
	}
	switch {
	case len(unnamed) > 1 || len(unnamed) == 1 && len(named) > 0:
		return nil, fmt.Errorf("give the data as one file or folder, or as NAME=FILE for each input, not both (%s)", strings.Join(specs, ", "))
	case len(unnamed) == 1:
		path := unnamed[0]
		if sets, err := testSets(path); err != nil {
			return nil, err
		} else if sets != nil {
			return readTestSets(path, sets, inputs, lim)
		}
		if len(inputs) > 1 {
			return nil, fmt.Errorf("%s: the model has %d inputs (%s): give each as NAME=FILE, or an ONNX test_data_set folder", path, len(inputs), inputNames(inputs))
		}
		named[inputs[0].Name] = path
	}
	for _, in := range inputs {
		if _, ok := named[in.Name]; !ok {
			return nil, fmt.Errorf("no data for input %s: give it as %s=FILE", in, in.Name)
		}
	}
	return readSamples(named, inputs, lim)
}

func inputNames(inputs []Input) string {
	names := make([]string, len(inputs))
	for i, in := range inputs {
		names[i] = in.Name
	}
	return strings.Join(names, ", ")
}

// testSets returns the test_data_set folders path is or holds, in order
// (nil when it is neither).
func testSets(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() {
		return nil, err
	}
	if isTestSet(path) {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var sets []string
	for _, e := range entries {
		if _, ok := strings.CutPrefix(e.Name(), "test_data_set_"); ok && e.IsDir() && isTestSet(filepath.Join(path, e.Name())) {
			sets = append(sets, filepath.Join(path, e.Name()))
		}
	}
	// test_data_set_10 after test_data_set_9.
	slices.SortFunc(sets, func(a, b string) int { return compareNatural(filepath.Base(a), filepath.Base(b)) })
	return sets, nil
}

func isTestSet(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "input_0.pb"))
	return err == nil
}

// compareNatural orders file names by the number that ends their stem
// where both have one and the stems otherwise agree (x9.pb before
// x10.npy), else by name.
func compareNatural(a, b string) int {
	sa, sb := strings.TrimSuffix(a, filepath.Ext(a)), strings.TrimSuffix(b, filepath.Ext(b))
	na, ea := trailingNumber(sa)
	nb, eb := trailingNumber(sb)
	if ea == nil && eb == nil && na != nb && strings.TrimRight(sa, "0123456789") == strings.TrimRight(sb, "0123456789") {
		if na < nb {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

func trailingNumber(s string) (int, error) {
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	return strconv.Atoi(s[i:])
}

func readTestSets(path string, dirs []string, inputs []Input, lim ir.Limits) (*Set, error) {
	s := &Set{Inputs: inputs, Source: path, runs: len(dirs), setDirs: dirs}
	for _, dir := range dirs {
		feeds := map[string]*ir.Tensor{}
		for i, in := range inputs {
			file := filepath.Join(dir, fmt.Sprintf("input_%d.pb", i))
			t, err := ReadTensor(file, lim)
			if err != nil {
				return nil, err
			}
			if t, err = Convert(t, in.DType); err != nil {
				return nil, fmt.Errorf("%s: input %s: %w", file, in, err)
			}
			if !slices.Equal(t.Dims, in.Dims) {
				return nil, fmt.Errorf("%s: %s%v, but input %s takes %s%v", file, t.DType, t.Dims, in.Name, in.DType, in.Dims)
			}
			t.Name = in.Name
			feeds[in.Name] = t
		}
		extra := filepath.Join(dir, fmt.Sprintf("input_%d.pb", len(inputs)))
		if _, err := os.Stat(extra); err == nil {
			return nil, fmt.Errorf("%s: the model has %d inputs (%s), the folder holds more", extra, len(inputs), inputNames(inputs))
		}
		s.sets = append(s.sets, feeds)
		s.Samples += batchOf(feeds[inputs[0].Name])
	}
	return s, nil
}

// readSamples reads each input's samples from its file or folder and
// checks that all give the same number of runs.
func readSamples(paths map[string]string, inputs []Input, lim ir.Limits) (*Set, error) {
	s := &Set{Inputs: inputs, data: map[string][]byte{}}
	var sources []string
	for i, in := range inputs {
		path := paths[in.Name]
		if len(inputs) > 1 {
			sources = append(sources, in.Name+"="+path)
		} else {
			sources = append(sources, path)
		}
		data, samples, perRun, err := readInput(path, in, lim)
		if err != nil {
			return nil, err
		}
		if i > 0 && samples/perRun != s.runs {
			first := inputs[0]
			return nil, fmt.Errorf("input %q has %d runs of data (%d samples in %s), input %q has %d (%d samples in %s)",
				first.Name, s.runs, s.Samples, paths[first.Name], in.Name, samples/perRun, samples, path)
		}
		if i == 0 {
			s.runs, s.Samples, s.perRun = samples/perRun, samples, perRun
		}
		s.data[in.Name] = data
	}
	s.Source = strings.Join(sources, ", ")
	return s, nil
}

// readInput reads one input's samples from a tensor file or a folder of
// them: the bytes of all samples, their count and the samples per run.
func readInput(path string, in Input, lim ir.Limits) ([]byte, int, int, error) {
	files := []string{path}
	st, err := os.Stat(path)
	if err != nil {
		return nil, 0, 0, err
	}
	if st.IsDir() {
		if files, err = tensorFiles(path); err != nil {
			return nil, 0, 0, err
		}
	}
	var data []byte
	samples, perRun := 0, 0
	for _, file := range files {
		t, err := ReadTensor(file, lim)
		if err != nil {
			return nil, 0, 0, err
		}
		n, batch, err := fit(t, in)
		if err != nil {
			hint := ""
			if len(files) > 1 {
				hint = fmt.Sprintf(" (give the file itself instead of the folder %s)", path)
			}
			return nil, 0, 0, fmt.Errorf("%s: %w%s", file, err, hint)
		}
		if perRun != 0 && batch != perRun {
			return nil, 0, 0, fmt.Errorf("%s: %s%v has samples of another shape than the folder's first file", file, t.DType, t.Dims)
		}
		perRun = batch
		if t, err = Convert(t, in.DType); err != nil {
			return nil, 0, 0, fmt.Errorf("%s: input %s: %w", file, in, err)
		}
		data = append(data, t.Raw...)
		samples += n
	}
	if samples%perRun != 0 {
		return nil, 0, 0, fmt.Errorf("%s holds %d samples, not a multiple of input %s's batch of %d", path, samples, in, perRun)
	}
	return data, samples, perRun, nil
}

// fit checks that t holds samples for in: t's leading dim counts them and
// the rest is in's shape without its batch dim ([N,3,224,224] for
// [4,3,224,224]: 4 samples a run) or in's whole shape (for [3,224,224]:
// one a run). It returns the samples and the samples per run.
func fit(t *ir.Tensor, in Input) (int, int, error) {
	want := func() error {
		shape := func(dims []int64) string {
			s := make([]string, len(dims))
			for i, d := range dims {
				s[i] = strconv.FormatInt(d, 10)
			}
			return strings.Join(append([]string{"N"}, s...), ",")
		}
		alt := ""
		if len(in.Dims) > 0 {
			alt = fmt.Sprintf(" or [%s]", shape(in.Dims[1:]))
		}
		return fmt.Errorf("%s%v does not hold samples for input %s: want [%s]%s, N samples", t.DType, t.Dims, in, shape(in.Dims), alt)
	}
	if len(t.Dims) == 0 {
		return 0, 0, want()
	}
	n := t.Dims[0]
	batch := int64(1)
	switch {
	case len(t.Dims) == len(in.Dims)+1 && slices.Equal(t.Dims[1:], in.Dims):
	case len(t.Dims) == len(in.Dims) && slices.Equal(t.Dims[1:], in.Dims[1:]):
		batch = in.Dims[0]
	default:
		return 0, 0, want()
	}
	if n == 0 {
		return 0, 0, fmt.Errorf("%s%v holds no samples", t.DType, t.Dims)
	}
	if batch < 1 {
		return 0, 0, fmt.Errorf("input %s has a batch of %d", in, batch)
	}
	return int(n), int(batch), nil
}

// tensorFiles lists a folder's .pb and .npy files in name order.
func tensorFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if !e.IsDir() && (ext == ".pb" || ext == ".npy") {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	slices.SortFunc(files, compareNatural)
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: the folder holds no .pb or .npy files (nor test_data_set_* folders)", dir)
	}
	return files, nil
}

// ReadLabels reads class labels: an integer tensor file (.pb or .npy) of
// one label per sample, any shape ([N] or [N,1]).
func ReadLabels(path string, lim ir.Limits) ([]int64, error) {
	t, err := ReadTensor(path, lim)
	if err != nil {
		return nil, err
	}
	switch t.DType {
	case ir.Int64, ir.Int32, ir.Int16, ir.Int8, ir.Uint8, ir.Uint16, ir.Uint32:
	default:
		return nil, fmt.Errorf("%s: labels must be integers (int64), the file holds %s", path, t.DType)
	}
	labels := make([]int64, t.Len())
	for i := range labels {
		labels[i] = t.Int64At(i)
	}
	return labels, nil
}
