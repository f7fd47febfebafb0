package quantize

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

const digitsCNN = "../../testdata/models/digits_cnn.onnx"

// digitsData writes 8 random digits ([8,1,8,8] in [0, 1)), changed by
// edit, as a TensorProto file.
func digitsData(t *testing.T, seed uint64, edit func(x []float32)) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 3))
	x := ir.NewTensor(ir.Float32, 8, 1, 8, 8)
	for i := range ir.Data[float32](x) {
		ir.Data[float32](x)[i] = rng.Float32()
	}
	if edit != nil {
		edit(ir.Data[float32](x))
	}
	return writeTensor(t, t.TempDir(), "calib.pb", x)
}

// quantizeDigits quantizes digits_cnn on the reference executor and
// returns the result and the float model.
func quantizeDigits(t *testing.T, opts Options) (*Result, *ir.Model, error) {
	t.Helper()
	src, err := os.ReadFile(digitsCNN)
	require.NoError(t, err)
	_, float := modelBytesOf(t, src)
	_, m := modelBytesOf(t, src)
	opts.reference = true
	res, err := Quantize(m, src, opts)
	return res, float, err
}

// relL2OnRandom is the largest ‖q − f‖ / ‖f‖ of the outputs of q and of
// the float model on random non-zero digits.
func relL2OnRandom(t *testing.T, float, q *ir.Model) float64 {
	t.Helper()
	worst := 0.0
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(50+seed, 0))
		x := ir.NewTensor(ir.Float32, 1, 1, 8, 8)
		for i := range ir.Data[float32](x) {
			ir.Data[float32](x)[i] = 0.05 + 0.95*rng.Float32()
		}
		f := runReference(t, float, map[string]*ir.Tensor{"input": x})["output"].Float32s()
		g := runReference(t, q, map[string]*ir.Tensor{"input": x})["output"].Float32s()
		var ff, dd float64
		for i := range f {
			ff += float64(f[i]) * float64(f[i])
			dd += (float64(f[i]) - float64(g[i])) * (float64(f[i]) - float64(g[i]))
		}
		worst = max(worst, math.Sqrt(dd/ff))
	}
	return worst
}

func warningWith(ws []string, parts ...string) string {
	for _, w := range ws {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(w, p)
		}
		if all {
			return w
		}
	}
	return ""
}

// All-zero calibration data: calibration learns nothing of the input or
// of what is computed from it, so nothing is quantized from those ranges
// (the model agrees with the float one on real inputs) and the warning
// names the input and the data. Before, the input got scale 2^-100 and
// every real input saturated: relative L2 1.0.
func TestAllZeroCalibration(t *testing.T) {
	calib := digitsData(t, 1, func(x []float32) { clear(x) })
	for _, method := range []string{"minmax", "entropy"} {
		res, float, err := quantizeDigits(t, Options{Data: []string{calib}, Method: Method{Name: method}})
		require.NoError(t, err)
		w := warningWith(res.Warnings, `tensor "input" (calibration data `+calib+`): every calibration value of it is 0;`, "stay float")
		assert.NotEmpty(t, w, "%s: %q", method, res.Warnings)
		t.Logf("%s: %q", method, res.Warnings)
		assert.Empty(t, res.Units, method)
		assert.Less(t, relL2OnRandom(t, float, res.Model), 1e-5, method)
	}
}

// A tensor calibration saw at a single value c ≠ 0 (here the input, all
// 0.5): the same, the warning naming the value.
func TestConstantCalibration(t *testing.T) {
	calib := digitsData(t, 2, func(x []float32) {
		for i := range x {
			x[i] = 0.5
		}
	})
	res, float, err := quantizeDigits(t, Options{Data: []string{calib}, Method: Method{Name: "minmax"}})
	require.NoError(t, err)
	assert.NotEmpty(t, warningWith(res.Warnings, `tensor "input" (calibration data `+calib+`): every calibration value of it is 0.5;`), "%q", res.Warnings)
	assert.Less(t, relL2OnRandom(t, float, res.Model), 1e-5)
}

// One 1e30 among 8 ordinary samples: under minmax the input's range makes
// nearly every ordinary value quantize to 0. The nodes reading such
// tensors stay float, the warning names the tensor, its range and what to
// do; the model agrees with the float one on ordinary inputs.
func TestOutlierCalibration(t *testing.T) {
	calib := digitsData(t, 3, func(x []float32) { x[3*64+37] = 1e30 })
	for _, method := range []string{"minmax", "entropy", "percentile=99.99"} {
		m, err := ParseMethod(method)
		require.NoError(t, err)
		res, float, err := quantizeDigits(t, Options{Data: []string{calib}, Method: m})
		require.NoError(t, err)
		w := warningWith(res.Warnings, `tensor "input" (calibration data `+calib+`): its `+method+" range [", ", 1e+30] quantizes 99.", "nonzero calibration values to 0", "stays float")
		assert.NotEmpty(t, w, "%s: %q", method, res.Warnings)
		t.Logf("%s: %q", method, res.Warnings)
		// The histogram holds every ordinary value in its first bin:
		// another method cannot help, the data must change.
		assert.Contains(t, w, "remove the samples that hold them", method)
		assert.Less(t, relL2OnRandom(t, float, res.Model), 0.2, method)
		for _, w := range res.Warnings {
			assert.NotContains(t, w, "agrees badly", "the float nodes agree")
		}
	}
}

// An outlier the histogram still resolves (one 3000 among 10^5 values in
// [0, 1)): minmax's range is blown, and the warning suggests the methods
// that clip it.
func TestOutlierSuggestsMethod(t *testing.T) {
	s := &Stats{}
	rng := rand.New(rand.NewPCG(4, 4))
	xs := make([]float32, 100000)
	for i := range xs {
		xs[i] = rng.Float32()
	}
	xs[7] = 3000
	s.Add(xs)
	why, kind := s.problem([2]float64{s.Min, s.Max}, Method{Name: "minmax"}, false)
	assert.Equal(t, rangeBlown, kind)
	assert.Contains(t, why, "its minmax range [0, 3000] quantizes 100.0% of its nonzero calibration values to 0")
	assert.Contains(t, s.remedy(Method{Name: "minmax"}, false), "--method percentile")
	assert.Contains(t, s.remedy(Method{Name: "minmax"}, true), "remove the samples", "a graph output keeps its observed range")
	lo, hi := s.Range(Method{Name: "percentile", Percentile: DefaultPercentile})
	why, _ = s.problem([2]float64{lo, hi}, Method{Name: "percentile", Percentile: DefaultPercentile}, false)
	assert.Empty(t, why, "percentile's range is fine")

	// A ReLU's many exact zeros are not lost values.
	relu := &Stats{}
	relu.Add(append(make([]float32, 5000), xs[8:]...))
	lo, hi = relu.Range(Method{Name: "minmax"})
	why, _ = relu.problem([2]float64{lo, hi}, Method{Name: "minmax"}, false)
	assert.Empty(t, why)
}

// editCache calibrates digits_cnn into a cache and edits the line of
// tensor "input" in it (writeCache puts each tensor on a line), replacing
// each old by its new; it returns the cache's path and the data's.
func editCache(t *testing.T, oldNew ...string) (cache, calib string) {
	t.Helper()
	calib = digitsData(t, 5, nil)
	cache = filepath.Join(t.TempDir(), "calib.json")
	_, _, err := quantizeDigits(t, Options{Data: []string{calib}, CacheFile: cache, Method: Method{Name: "minmax"}})
	require.NoError(t, err)
	buf, err := os.ReadFile(cache)
	require.NoError(t, err)
	lines := strings.Split(string(buf), "\n")
	edited := false
	for i, line := range lines {
		if strings.HasPrefix(line, `  "input": {`) {
			lines[i] = strings.NewReplacer(oldNew...).Replace(line)
			edited = lines[i] != line
		}
	}
	require.True(t, edited)
	require.NoError(t, os.WriteFile(cache, []byte(strings.Join(lines, "\n")), 0o644))
	return cache, calib
}

// A cache edited to min above max, NaN or Inf is refused, naming the
// file, the tensor and the values.
func TestBadCacheRefused(t *testing.T) {
	for _, c := range []struct{ old, new, msg string }{
		{`"range":[`, `"range":[5,1],"was":[`, `tensor "input": range [5, 1] has its low end above its high end`},
		{`"min":`, `"min":7000,"was":`, `tensor "input": min 7000 is above max`},
		{`"max":`, `"max":NaN,"was":`, `not valid JSON at line`},
		{`"max":`, `"max":1e999,"was":`, `tensor "input": json: cannot unmarshal number 1e999`},
	} {
		cache, _ := editCache(t, c.old, c.new)
		_, _, err := quantizeDigits(t, Options{CacheFile: cache, Method: Method{Name: "minmax"}})
		require.Error(t, err, c.new)
		assert.Contains(t, err.Error(), "calibration cache "+cache, c.new)
		assert.Contains(t, err.Error(), c.msg)
		assert.Contains(t, err.Error(), "delete the cache or recalibrate")
		assert.Contains(t, err.Error(), `tensor "`, "names the tensor")
	}
}

// A cache edited to min == max (what constant data gives, so not refused)
// is treated as calibration on constant data: nothing reading the tensor
// is quantized, and the warning says so.
func TestCacheMinEqualsMax(t *testing.T) {
	cache, _ := editCache(t, `"min":`, `"min":0.5,"was_min":`, `"max":`, `"max":0.5,"was_max":`)
	res, float, err := quantizeDigits(t, Options{CacheFile: cache, Method: Method{Name: "minmax"}})
	require.NoError(t, err)
	assert.NotEmpty(t, warningWith(res.Warnings, `tensor "input" (calibration data in the calibration cache `+cache+`): every calibration value of it is 0.5;`), "%q", res.Warnings)
	assert.Less(t, relL2OnRandom(t, float, res.Model), 1e-5)
}

// A cache whose range is valid but wrong (the input's range edited to
// [0, 0.001]) gives a model that disagrees with the float one on the
// calibration data: a warning naming the output, and with Strict an
// error. Without data the check cannot run, and Strict refuses.
func TestAgreementCheck(t *testing.T) {
	cache, calib := editCache(t, `"range":[`, `"range":[0,0.001],"was":[`)
	res, float, err := quantizeDigits(t, Options{Data: []string{calib}, CacheFile: cache, Method: Method{Name: "minmax"}})
	require.NoError(t, err)
	assert.True(t, res.FromCache)
	require.Len(t, res.Agreement, 1)
	a := res.Agreement[0]
	assert.Equal(t, "output", a.Output)
	assert.Equal(t, 8, a.Runs)
	assert.Greater(t, a.RelL2, MaxRelL2)
	assert.Greater(t, relL2OnRandom(t, float, res.Model), MaxRelL2, "the model is as bad as the check says")
	w := warningWith(res.Warnings, "agrees badly with the float model", `output "output"`, calib)
	assert.NotEmpty(t, w, "%q", res.Warnings)

	_, _, err = quantizeDigits(t, Options{Data: []string{calib}, CacheFile: cache, Method: Method{Name: "minmax"}, Strict: true})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `output "output" differs by relative L2`)
	assert.Contains(t, err.Error(), "--strict")

	_, _, err = quantizeDigits(t, Options{CacheFile: cache, Method: Method{Name: "minmax"}, Strict: true})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "needs calibration data (--calib)")

	// Well-calibrated, the same model agrees.
	res, _, err = quantizeDigits(t, Options{Data: []string{calib}, Method: Method{Name: "entropy"}, Strict: true})
	require.NoError(t, err)
	require.Len(t, res.Agreement, 1)
	assert.Less(t, res.Agreement[0].RelL2, MaxRelL2)
	assert.Greater(t, res.Agreement[0].Cosine, 0.99)
}
