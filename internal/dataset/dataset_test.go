package dataset

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/ir"
)

// randomTensor is a float32 tensor of N(0,1) values, distinct per seed.
func randomTensor(seed int64, dims ...int64) *ir.Tensor {
	rng := rand.New(rand.NewSource(seed))
	t := ir.NewTensor(ir.Float32, dims...)
	for i := range ir.Data[float32](t) {
		ir.Data[float32](t)[i] = float32(rng.NormFloat64())
	}
	return t
}

func writePB(t *testing.T, path string, x *ir.Tensor) {
	t.Helper()
	data, err := onnx.WriteTensor(x)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

func writeNPY(t *testing.T, path string, x *ir.Tensor) {
	t.Helper()
	data, err := EncodeNPY(x)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

// sample returns sample i of x, whose leading dim counts samples.
func sample(x *ir.Tensor, i int) []float32 {
	n := int(ir.Product(x.Dims[1:]))
	return x.Float32s()[i*n : (i+1)*n]
}

func TestFileSplitsIntoBatches(t *testing.T) {
	dir := t.TempDir()
	x := randomTensor(1, 8, 1, 4, 4)
	writePB(t, filepath.Join(dir, "x.pb"), x)

	// Batch 1: eight runs, one sample each, in order.
	s, err := Read([]string{filepath.Join(dir, "x.pb")}, []Input{{"input", ir.Float32, []int64{1, 1, 4, 4}}}, ir.Limits{})
	require.NoError(t, err)
	require.Equal(t, 8, s.Runs())
	assert.Equal(t, 8, s.Samples)
	for i := range 8 {
		run := s.Run(i)["input"]
		assert.Equal(t, []int64{1, 1, 4, 4}, run.Dims)
		assert.Equal(t, sample(x, i), run.Float32s())
		assert.Equal(t, 1, s.SamplesIn(i))
	}

	// Batch 4: two runs of four.
	s, err = Read([]string{filepath.Join(dir, "x.pb")}, []Input{{"input", ir.Float32, []int64{4, 1, 4, 4}}}, ir.Limits{})
	require.NoError(t, err)
	require.Equal(t, 2, s.Runs())
	assert.Equal(t, 4, s.SamplesIn(1))
	assert.Equal(t, append(append(append(sample(x, 4), sample(x, 5)...), sample(x, 6)...), sample(x, 7)...), s.Run(1)["input"].Float32s())

	// An input without a batch dim takes one sample a run.
	s, err = Read([]string{filepath.Join(dir, "x.pb")}, []Input{{"input", ir.Float32, []int64{1, 4, 4}}}, ir.Limits{})
	require.NoError(t, err)
	require.Equal(t, 8, s.Runs())
	assert.Equal(t, []int64{1, 4, 4}, s.Run(3)["input"].Dims)
	assert.Equal(t, sample(x, 3), s.Run(3)["input"].Float32s())

	// 8 samples do not fill batches of 3.
	_, err = Read([]string{filepath.Join(dir, "x.pb")}, []Input{{"input", ir.Float32, []int64{3, 1, 4, 4}}}, ir.Limits{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "holds 8 samples, not a multiple of input \"input\" (float[3 1 4 4])'s batch of 3")

	// Samples of another shape are refused, naming the file, the shapes and the input.
	_, err = Read([]string{filepath.Join(dir, "x.pb")}, []Input{{"input", ir.Float32, []int64{1, 16}}}, ir.Limits{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "x.pb: float[8 1 4 4] does not hold samples for input \"input\" (float[1 16]): want [N,1,16] or [N,16], N samples")
}

// A .npy file of float64 (NumPy's default) feeds a float32 input.
func TestNPYConverted(t *testing.T) {
	dir := t.TempDir()
	x := randomTensor(2, 6, 5)
	x64, err := Convert(x, ir.Float64)
	require.NoError(t, err)
	writeNPY(t, filepath.Join(dir, "x.npy"), x64)
	s, err := Read([]string{filepath.Join(dir, "x.npy")}, []Input{{"x", ir.Float32, []int64{2, 5}}}, ir.Limits{})
	require.NoError(t, err)
	require.Equal(t, 3, s.Runs())
	assert.Equal(t, x.Float32s()[10:20], s.Run(1)["x"].Float32s())
	assert.Equal(t, ir.Float32, s.Run(1)["x"].DType)
}

// A folder's tensor files are read in name order (file10 after file9),
// their samples concatenated; other files are ignored.
func TestFolderOfFiles(t *testing.T) {
	dir := t.TempDir()
	a, b, c := randomTensor(3, 2, 3), randomTensor(4, 1, 3), randomTensor(5, 3, 3)
	writePB(t, filepath.Join(dir, "part9.pb"), a)
	writeNPY(t, filepath.Join(dir, "part10.npy"), b)
	writePB(t, filepath.Join(dir, "part1.pb"), c)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "meta.json"), []byte("{}"), 0o644))
	s, err := Read([]string{dir}, []Input{{"x", ir.Float32, []int64{1, 3}}}, ir.Limits{})
	require.NoError(t, err)
	require.Equal(t, 6, s.Runs())
	var got []float32
	for i := range s.Runs() {
		got = append(got, s.Run(i)["x"].Float32s()...)
	}
	want := append(append(append([]float32{}, c.Float32s()...), a.Float32s()...), b.Float32s()...)
	assert.Equal(t, want, got)

	// A file that does not fit is named, with a hint to give the file.
	writePB(t, filepath.Join(dir, "labels.pb"), ir.FromSlice(ir.Int64, []int64{6}, []int64{1, 2, 3, 4, 5, 6}))
	_, err = Read([]string{dir}, []Input{{"x", ir.Float32, []int64{1, 3}}}, ir.Limits{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "labels.pb: int64[6] does not hold samples")
	assert.Contains(t, err.Error(), "give the file itself instead of the folder")

	_, err = Read([]string{t.TempDir()}, []Input{{"x", ir.Float32, []int64{1, 3}}}, ir.Limits{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "holds no .pb or .npy files")
}

// An ONNX test_data_set folder is one run with each input; a folder of
// them is one run each, test_data_set_10 after test_data_set_9.
func TestTestDataSets(t *testing.T) {
	root := t.TempDir()
	inputs := []Input{{"a", ir.Float32, []int64{1, 2}}, {"b", ir.Float32, []int64{1, 3}}}
	for _, k := range []int{0, 9, 10} {
		set := filepath.Join(root, fmt.Sprintf("test_data_set_%d", k))
		writePB(t, filepath.Join(set, "input_0.pb"), randomTensor(int64(10*k), 1, 2))
		writePB(t, filepath.Join(set, "input_1.pb"), randomTensor(int64(10*k+1), 1, 3))
		writePB(t, filepath.Join(set, "output_0.pb"), randomTensor(7, 1, 1))
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "model.onnx"), []byte("not read"), 0o644))

	s, err := Read([]string{filepath.Join(root, "test_data_set_9")}, inputs, ir.Limits{})
	require.NoError(t, err)
	require.Equal(t, 1, s.Runs())
	assert.Equal(t, randomTensor(91, 1, 3).Float32s(), s.Run(0)["b"].Float32s())

	s, err = Read([]string{root}, inputs, ir.Limits{})
	require.NoError(t, err)
	require.Equal(t, 3, s.Runs())
	assert.Equal(t, 3, s.Samples)
	assert.Equal(t, randomTensor(90, 1, 2).Float32s(), s.Run(1)["a"].Float32s())
	assert.Equal(t, randomTensor(100, 1, 2).Float32s(), s.Run(2)["a"].Float32s())
	assert.Contains(t, s.RunSource(2), "test_data_set_10")

	// A set of another shape, or with more inputs than the model, is refused.
	_, err = Read([]string{root}, []Input{{"a", ir.Float32, []int64{1, 4}}, {"b", ir.Float32, []int64{1, 3}}}, ir.Limits{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "input_0.pb: float[1 2], but input a takes float[1 4]")
	_, err = Read([]string{root}, inputs[:1], ir.Limits{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the model has 1 inputs (a), the folder holds more")
}

func TestNamedInputs(t *testing.T) {
	dir := t.TempDir()
	writePB(t, filepath.Join(dir, "a.pb"), randomTensor(1, 4, 2))
	writeNPY(t, filepath.Join(dir, "b.npy"), randomTensor(2, 4, 3))
	writePB(t, filepath.Join(dir, "short.pb"), randomTensor(3, 2, 3))
	inputs := []Input{{"a", ir.Float32, []int64{1, 2}}, {"b", ir.Float32, []int64{1, 3}}}
	a, b := "a="+filepath.Join(dir, "a.pb"), "b="+filepath.Join(dir, "b.npy")

	s, err := Read([]string{b, a}, inputs, ir.Limits{})
	require.NoError(t, err)
	require.Equal(t, 4, s.Runs())
	assert.Equal(t, randomTensor(2, 4, 3).Float32s()[6:9], s.Run(2)["b"].Float32s())
	assert.Equal(t, randomTensor(1, 4, 2).Float32s()[4:6], s.Run(2)["a"].Float32s())

	for _, c := range []struct {
		specs []string
		want  string
	}{
		{[]string{a}, `no data for input "b" (float[1 3]): give it as b=FILE`},
		{[]string{a, "b=" + filepath.Join(dir, "short.pb")}, `input "a" has 4 runs of data (4 samples in`},
		{[]string{a, b, "c=" + filepath.Join(dir, "a.pb")}, `the model has no input "c" (its inputs: a, b)`},
		{[]string{a, b, "a=" + filepath.Join(dir, "a.pb")}, `input "a" given twice`},
		{[]string{filepath.Join(dir, "a.pb")}, "the model has 2 inputs (a, b): give each as NAME=FILE"},
		{[]string{filepath.Join(dir, "a.pb"), b}, "not both"},
		{[]string{filepath.Join(dir, "missing.pb")}, "missing.pb: no such file"},
		{[]string{"a=" + filepath.Join(dir, "missing.pb"), b}, "missing.pb: no such file"},
	} {
		_, err := Read(c.specs, inputs, ir.Limits{})
		require.Error(t, err, "%v", c.specs)
		assert.Contains(t, err.Error(), c.want, "%v", c.specs)
	}
}

// Files past --max-file-bytes are refused before they are read.
func TestLimits(t *testing.T) {
	dir := t.TempDir()
	writeNPY(t, filepath.Join(dir, "x.npy"), randomTensor(1, 64, 16))
	_, err := Read([]string{filepath.Join(dir, "x.npy")}, []Input{{"x", ir.Float32, []int64{1, 16}}}, ir.Limits{MaxFileBytes: 1024})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "x.npy")
}

func TestReadLabels(t *testing.T) {
	dir := t.TempDir()
	writePB(t, filepath.Join(dir, "y.pb"), ir.FromSlice(ir.Int64, []int64{4}, []int64{3, 1, 4, 1}))
	writeNPY(t, filepath.Join(dir, "y.npy"), ir.FromSlice(ir.Int32, []int64{4, 1}, []int32{5, 9, 2, 6}))
	writePB(t, filepath.Join(dir, "f.pb"), randomTensor(1, 4))
	got, err := ReadLabels(filepath.Join(dir, "y.pb"), ir.Limits{})
	require.NoError(t, err)
	assert.Equal(t, []int64{3, 1, 4, 1}, got)
	got, err = ReadLabels(filepath.Join(dir, "y.npy"), ir.Limits{})
	require.NoError(t, err)
	assert.Equal(t, []int64{5, 9, 2, 6}, got)
	_, err = ReadLabels(filepath.Join(dir, "f.pb"), ir.Limits{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "labels must be integers (int64), the file holds float")
}

// EncodeNPY writes what ParseNPY reads back, for each type it reads.
func TestEncodeNPYRoundTrip(t *testing.T) {
	for _, x := range []*ir.Tensor{
		randomTensor(1, 2, 3),
		ir.FromSlice(ir.Float64, []int64{3}, []float64{0.5, -1, 2}),
		ir.FromSlice(ir.Int64, []int64{1, 2}, []int64{-7, 1 << 40}),
		ir.FromSlice(ir.Int32, []int64{2}, []int32{-3, 4}),
		ir.FromSlice(ir.Uint8, []int64{2, 1}, []uint8{200, 1}),
		ir.FromSlice(ir.Float32, []int64{}, []float32{2.5}),
	} {
		data, err := EncodeNPY(x)
		require.NoError(t, err)
		assert.Zero(t, (len(data)-len(x.Raw))%64, "header padded to 64 bytes")
		back, err := ParseNPY(data)
		require.NoError(t, err)
		assert.Equal(t, x.DType, back.DType)
		assert.Equal(t, x.Dims, back.Dims)
		assert.Equal(t, x.Raw, back.Raw)
	}
	_, err := EncodeNPY(ir.NewTensor(ir.Float16, 2))
	assert.Error(t, err)
}
