package main

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"

	"github.com/kiln-ml/kiln/internal/dataset"
	"github.com/kiln-ml/kiln/ir"
)

// meta is what bench reads of a zoo model's meta.json.
type meta struct {
	Input struct {
		DType string  `json:"dtype"`
		Shape []int64 `json:"shape"`
	} `json:"input"`
	CalibSet struct{ X string }    `json:"calib_set"`
	TestSet  struct{ X, Y string } `json:"test_set"`
}

func readMeta(dir string) (meta, map[string]any, error) {
	var m meta
	raw := map[string]any{}
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		return m, raw, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, raw, fmt.Errorf("%s/meta.json: %v", dir, err)
	}
	return m, raw, json.Unmarshal(b, &raw)
}

// calibration returns the calibration data for model: its meta.json's
// calib_set, else calibSamples random N(0,1) samples of its input written
// to the work folder.
func calibration(o options, model string) (string, error) {
	dir := filepath.Join(o.zooOf(model), model)
	m, _, err := readMeta(dir)
	if err != nil {
		return "", fmt.Errorf("no calibration data: %v", err)
	}
	if m.CalibSet.X != "" {
		return filepath.Join(dir, m.CalibSet.X), nil
	}
	if m.Input.DType != "float32" || len(m.Input.Shape) == 0 {
		return "", fmt.Errorf("no calibration data: meta.json has no calib_set and no float32 input shape")
	}
	const calibSamples = 16
	dims := append([]int64{calibSamples * m.Input.Shape[0]}, m.Input.Shape[1:]...)
	data := make([]float32, ir.Product(dims))
	rng := rand.New(rand.NewSource(1))
	for i := range data {
		data[i] = float32(rng.NormFloat64())
	}
	b, err := dataset.EncodeNPY(ir.FromSlice(ir.Float32, dims, data))
	if err != nil {
		return "", err
	}
	path := filepath.Join(o.work, model+".calib.npy")
	return path, os.WriteFile(path, b, 0o644)
}

// quantized writes model's QDQ form with bin/cc quantize, builds it, and
// lays out a zoo folder holding it for ONNX Runtime (the QDQ model beside
// the original's test data, meta.json's paths made absolute); it returns
// that folder.
func quantized(o options, model string) (string, error) {
	dir := filepath.Join(o.zooOf(model), model)
	calib, err := calibration(o, model)
	if err != nil {
		return "", err
	}
	ortDir := filepath.Join(o.work, "int8-zoo", model)
	if err := os.MkdirAll(ortDir, 0o755); err != nil {
		return "", err
	}
	qdq := filepath.Join(ortDir, "model.onnx")
	if _, err := run(filepath.Join(o.bin, "cc"), "quantize", filepath.Join(dir, "model.onnx"), "--calib", calib, "-o", qdq); err != nil {
		return "", fmt.Errorf("quantize failed: %s", firstLine(err.Error()))
	}
	if _, err := run(filepath.Join(o.bin, "cc"), "build", qdq, "-o", filepath.Join(o.work, model+".int8.kiln")); err != nil {
		return "", fmt.Errorf("build failed: %s", firstLine(err.Error()))
	}
	abs, _ := filepath.Abs(filepath.Join(dir, "test_data_set_0"))
	if err := os.Symlink(abs, filepath.Join(ortDir, "test_data_set_0")); err != nil && !os.IsExist(err) {
		return "", err
	}
	_, raw, err := readMeta(dir)
	if err == nil {
		if ts, ok := raw["test_set"].(map[string]any); ok {
			for k, v := range ts {
				if p, ok := v.(string); ok {
					ts[k], _ = filepath.Abs(filepath.Join(dir, p))
				}
			}
		}
		b, _ := json.Marshal(raw)
		if err := os.WriteFile(filepath.Join(ortDir, "meta.json"), b, 0o644); err != nil {
			return "", err
		}
	}
	return filepath.Dir(ortDir), nil
}

// agreement compares kiln's INT8 engine of model with its FP32 one (built
// before) with bin/infer compare: on the test set with its labels where
// the model has one, else on test_data_set_0.
func agreement(o options, model string) string {
	dir := filepath.Join(o.zooOf(model), model)
	fp32 := filepath.Join(o.work, model+".kiln")
	if _, err := os.Stat(fp32); err != nil { // --precision int8 alone
		if _, err := run(filepath.Join(o.bin, "cc"), "build", filepath.Join(dir, "model.onnx"), "-o", fp32); err != nil {
			return "FP32 build failed: " + firstLine(err.Error())
		}
	}
	args := []string{"compare", filepath.Join(o.work, model+".kiln"), filepath.Join(o.work, model+".int8.kiln"),
		"--json", "--duration", "0.2", "--threads", "1"}
	if m, _, err := readMeta(dir); err == nil && m.TestSet.X != "" && m.TestSet.Y != "" {
		args = append(args, "--data", filepath.Join(dir, m.TestSet.X), "--labels", filepath.Join(dir, m.TestSet.Y))
	} else {
		args = append(args, "--data", filepath.Join(dir, "test_data_set_0"))
	}
	out, err := run(filepath.Join(o.bin, "infer"), args...)
	if err != nil {
		return "compare failed: " + firstLine(err.Error())
	}
	var r struct {
		A, B struct {
			Accuracy *float64 `json:"accuracy"`
		}
		Agreement struct {
			Cosine any `json:"cosine"`
		}
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return "compare: " + err.Error()
	}
	s := fmt.Sprintf("cosine %v with FP32", r.Agreement.Cosine)
	if c, ok := r.Agreement.Cosine.(float64); ok {
		s = fmt.Sprintf("cosine %.4f with FP32", c)
	}
	if r.A.Accuracy != nil && r.B.Accuracy != nil {
		s += fmt.Sprintf("; top-1 %.4f (FP32 %.4f)", *r.B.Accuracy, *r.A.Accuracy)
	}
	return s
}
