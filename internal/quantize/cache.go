package quantize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"

	"github.com/kiln-ml/kiln/internal/atomicfile"
	"github.com/kiln-ml/kiln/internal/dataset"
)

// cacheFormat names the calibration cache's format and version.
const cacheFormat = "kiln calibration cache 1"

// Cache is the calibration cache file (JSON): what calibrating a model
// found, so that quantizing it again (another method, other --keep-fp32
// nodes) skips the runs. It holds each tensor's min, max and |x|
// histogram, from which every method's range follows, and the ranges of
// the method it was made with.
type Cache struct {
	CacheHeader
	Tensors map[string]*CachedStats `json:"tensors"`
}

// CacheHeader is the cache's fields besides the tensors.
type CacheHeader struct {
	Format string `json:"format"`
	// ModelSHA256 is the hash of the model file's bytes; a cache is only
	// used for the model it was made from.
	ModelSHA256 string `json:"model_sha256"`
	// Method and Percentile are how the ranges were computed; Bins and
	// Levels are the histograms' resolution and the entropy method's
	// levels.
	Method     string  `json:"method"`
	Percentile float64 `json:"percentile,omitempty"`
	Bins       int     `json:"bins"`
	Levels     int     `json:"entropy_levels"`
	// Samples and Runs count the calibration data, Data names it.
	Samples int    `json:"samples"`
	Runs    int    `json:"runs"`
	Data    string `json:"data"`
}

// CachedStats are one tensor's statistics and its range under the
// cache's method.
type CachedStats struct {
	Range [2]float64 `json:"range"`
	Stats
}

// readCache reads the cache at path for the model of hash sum; a missing
// file gives nil and no error.
func readCache(path, sum string) (*Cache, error) {
	buf, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var c Cache
	if err := json.Unmarshal(buf, &c); err != nil || c.Format != cacheFormat {
		why := fmt.Sprintf("its format is %q", c.Format)
		if err != nil {
			why = err.Error()
		}
		return nil, fmt.Errorf("calibration cache %s is not a %s (%s): delete it or name another file", path, cacheFormat, why)
	}
	if c.ModelSHA256 != sum {
		return nil, fmt.Errorf("calibration cache %s was made for model sha256 %s, this is %s", path, c.ModelSHA256, sum)
	}
	if c.Bins != Bins || c.Levels != levels {
		return nil, fmt.Errorf("calibration cache %s has %d bins and %d levels, kiln uses %d and %d: delete it to calibrate again", path, c.Bins, c.Levels, Bins, levels)
	}
	for name, t := range c.Tensors {
		if t == nil {
			return nil, fmt.Errorf("calibration cache %s: tensor %q has no statistics", path, name)
		}
		if err := t.Hist.check(); err != nil {
			return nil, fmt.Errorf("calibration cache %s: tensor %q: %v", path, name, err)
		}
	}
	return &c, nil
}

// newCache records calibration's statistics with their ranges under
// method m.
func newCache(sum string, m Method, data *dataset.Set, stats map[string]*Stats) *Cache {
	c := &Cache{CacheHeader: CacheHeader{Format: cacheFormat, ModelSHA256: sum, Method: m.Name, Bins: Bins, Levels: levels,
		Samples: data.Samples, Runs: data.Runs(), Data: data.Source}, Tensors: map[string]*CachedStats{}}
	if m.Name == "percentile" {
		c.Percentile = m.Percentile
	}
	for name, s := range stats {
		lo, hi := s.Range(m)
		c.Tensors[name] = &CachedStats{Range: [2]float64{lo, hi}, Stats: *s}
	}
	return c
}

// writeCache writes c atomically: the header indented, then one line per
// tensor (sorted by name), so the file reads and diffs as a table.
func writeCache(path string, c *Cache) error {
	head, err := json.MarshalIndent(c.CacheHeader, "", " ")
	if err != nil {
		return err
	}
	var b bytes.Buffer
	b.Write(bytes.TrimSuffix(head, []byte("\n}")))
	b.WriteString(",\n \"tensors\": {")
	for i, name := range slices.Sorted(maps.Keys(c.Tensors)) {
		k, _ := json.Marshal(name)
		v, err := json.Marshal(c.Tensors[name])
		if err != nil {
			return fmt.Errorf("tensor %q: %w", name, err)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "\n  %s: %s", k, v)
	}
	b.WriteString("\n }\n}\n")
	return atomicfile.WriteFile(path, b.Bytes(), 0o644)
}
