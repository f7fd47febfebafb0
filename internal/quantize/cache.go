package quantize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"

	"github.com/kiln-ml/kiln/internal/atomicfile"
	"github.com/kiln-ml/kiln/internal/dataset"
	"github.com/kiln-ml/kiln/internal/readfile"
	"github.com/kiln-ml/kiln/ir"
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
// file gives nil and no error, anything but a regular file (a named pipe)
// an error. Each tensor is decoded and checked on its own, so that an
// edited or damaged entry is named.
func readCache(path, sum string, lim ir.Limits) (*Cache, error) {
	buf, err := readfile.Within(path, lim, nil)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var raw struct {
		CacheHeader
		Tensors map[string]json.RawMessage `json:"tensors"`
	}
	if err := json.Unmarshal(buf, &raw); err != nil || raw.Format != cacheFormat {
		why := fmt.Sprintf("its format is %q", raw.Format)
		if syntax := (*json.SyntaxError)(nil); errors.As(err, &syntax) {
			return nil, fmt.Errorf("calibration cache %s is not valid JSON at %s: %v: delete the cache or recalibrate", path, syntaxPlace(buf, syntax.Offset), err)
		} else if err != nil {
			why = err.Error()
		}
		return nil, fmt.Errorf("calibration cache %s is not a %s (%s): delete it or name another file", path, cacheFormat, why)
	}
	if raw.ModelSHA256 != sum {
		return nil, fmt.Errorf("calibration cache %s was made for model sha256 %s, this is %s", path, raw.ModelSHA256, sum)
	}
	if raw.Bins != Bins || raw.Levels != levels {
		return nil, fmt.Errorf("calibration cache %s has %d bins and %d levels, kiln uses %d and %d: delete it to calibrate again", path, raw.Bins, raw.Levels, Bins, levels)
	}
	c := &Cache{CacheHeader: raw.CacheHeader, Tensors: map[string]*CachedStats{}}
	for _, name := range slices.Sorted(maps.Keys(raw.Tensors)) {
		var t *CachedStats
		err := json.Unmarshal(raw.Tensors[name], &t)
		if err == nil {
			err = t.check()
		}
		if err != nil {
			return nil, fmt.Errorf("calibration cache %s: tensor %q: %v: delete the cache or recalibrate", path, name, err)
		}
		c.Tensors[name] = t
	}
	return c, nil
}

// check rejects statistics that calibration cannot have recorded (a
// hand-edited or damaged cache). min == max is what constant data gives.
func (t *CachedStats) check() error {
	switch {
	case t == nil:
		return fmt.Errorf("no statistics")
	case !isFinite(t.Min) || !isFinite(t.Max):
		return fmt.Errorf("min %v and max %v are not both finite", t.Min, t.Max)
	case t.Min > t.Max:
		return fmt.Errorf("min %v is above max %v", t.Min, t.Max)
	case !isFinite(t.Range[0]) || !isFinite(t.Range[1]):
		return fmt.Errorf("range [%v, %v] is not finite", t.Range[0], t.Range[1])
	case t.Range[0] > t.Range[1]:
		return fmt.Errorf("range [%v, %v] has its low end above its high end", t.Range[0], t.Range[1])
	case t.Zeros < 0 || t.NonFinite < 0:
		return fmt.Errorf("negative counts")
	}
	return t.Hist.check()
}

// syntaxPlace is where offset lies in the cache buf: its line and, since
// writeCache puts each tensor on a line of its own, the tensor it holds.
func syntaxPlace(buf []byte, offset int64) string {
	offset = min(max(offset, 0), int64(len(buf)))
	start := int64(bytes.LastIndexByte(buf[:offset], '\n') + 1)
	place := fmt.Sprintf("line %d", bytes.Count(buf[:offset], []byte("\n"))+1)
	var name string
	tensors := bytes.Index(buf, []byte(`"tensors"`))
	if tensors >= 0 && start > int64(tensors) && json.NewDecoder(bytes.NewReader(bytes.TrimLeft(buf[start:], " \t"))).Decode(&name) == nil {
		place += fmt.Sprintf(" (tensor %q)", name)
	}
	return place
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
