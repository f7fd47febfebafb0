package quantize

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/readfile/fifotest"
	"github.com/kiln-ml/kiln/ir"
)

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// The cache is written after calibrating; the same model then quantizes
// from it without data, to the same bytes, and with another method
// without data too; a cache from another model is refused, naming both
// hashes.
func TestCalibrationCache(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "calib.json")
	calib := writeTensor(t, dir, "x.pb", randn(rand.New(rand.NewPCG(11, 11)), 1, 8, 3, 8, 8))

	src, m := modelBytes(t, convNet(6))
	first := quantizeOnReference(t, m, src, Options{Data: []string{calib}, CacheFile: cache})
	assert.True(t, first.CacheWritten)
	assert.False(t, first.FromCache)
	want, err := onnx.Write(first.Model)
	require.NoError(t, err)
	written, err := os.ReadFile(cache)
	require.NoError(t, err)

	_, m = modelBytes(t, convNet(6))
	again := quantizeOnReference(t, m, src, Options{CacheFile: cache})
	assert.True(t, again.FromCache)
	assert.False(t, again.CacheWritten)
	assert.Equal(t, 8, again.Samples)
	got, err := onnx.Write(again.Model)
	require.NoError(t, err)
	assert.Equal(t, want, got, "the cache gives the model calibration gave")
	after, err := os.ReadFile(cache)
	require.NoError(t, err)
	assert.Equal(t, written, after, "a cache that was used is left as it is")

	// Another method from the same statistics: no runs, another model.
	_, m = modelBytes(t, convNet(6))
	other := quantizeOnReference(t, m, src, Options{CacheFile: cache, Method: Method{Name: "minmax"}})
	assert.True(t, other.FromCache)
	got, err = onnx.Write(other.Model)
	require.NoError(t, err)
	assert.NotEqual(t, want, got)
	// ... the one calibrating with minmax gives.
	_, m = modelBytes(t, convNet(6))
	direct := quantizeOnReference(t, m, src, Options{Data: []string{calib}, Method: Method{Name: "minmax"}})
	wantMinmax, err := onnx.Write(direct.Model)
	require.NoError(t, err)
	assert.Equal(t, wantMinmax, got)

	// Another model: refused, naming why.
	otherSrc, m := modelBytes(t, convNet(7))
	_, err = Quantize(m, otherSrc, Options{CacheFile: cache, Data: []string{calib}, Method: Method{Name: "entropy"}, reference: true})
	require.Error(t, err)
	assert.Equal(t, "calibration cache "+cache+" was made for model sha256 "+sha(src)+", this is "+sha(otherSrc), err.Error())

	// Not a cache: refused, the file untouched.
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"format": "something else"}`), 0o644))
	_, m = modelBytes(t, convNet(6))
	_, err = Quantize(m, src, Options{CacheFile: bad, Data: []string{calib}, Method: Method{Name: "entropy"}, reference: true})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not a kiln calibration cache")
	content, _ := os.ReadFile(bad)
	assert.Equal(t, `{"format": "something else"}`, string(content))

	// A damaged histogram: refused.
	damaged := filepath.Join(dir, "damaged.json")
	require.NoError(t, os.WriteFile(damaged, []byte(`{"format": "kiln calibration cache 1", "model_sha256": "`+sha(src)+`", "bins": 2048, "entropy_levels": 128, "tensors": {"x": {"range": [0, 1], "min": 0, "max": 1, "histogram": {"range": 1, "counts": [1, 2]}}}}`), 0o644))
	_, m = modelBytes(t, convNet(6))
	_, err = Quantize(m, src, Options{CacheFile: damaged, Method: Method{Name: "entropy"}, reference: true})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `tensor "x": histogram has 2 bins`)
}

// A named pipe as the cache is refused, naming it, instead of blocking
// the read forever.
func TestCacheFIFORefused(t *testing.T) {
	pipe := filepath.Join(t.TempDir(), "calib.json")
	fifotest.Make(t, pipe)
	fifotest.Returns(t, pipe, func() error { _, err := readCache(pipe, "", ir.Limits{}); return err })
}
