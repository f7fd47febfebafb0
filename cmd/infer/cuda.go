package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/kiln-ml/kiln/cudacode"
	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/cli"
	"github.com/kiln-ml/kiln/internal/conformance"
	"github.com/kiln-ml/kiln/ir"
	cudart "github.com/kiln-ml/kiln/runtime/cuda"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// CUDA engines (cc build --target cuda) run through runtime/cuda, which
// only an infer built with -tags cuda has; check and bench take them.

// gpuEngine loads path when it holds CUDA code: nil, nil for any other
// engine (the CPU runtime then loads it and reports what is wrong).
func gpuEngine(path, pubPath string) (*cudart.Engine, error) {
	// The head says which code the file holds: a CPU engine is left to
	// the CPU runtime without reading its sections here.
	head, unmap, err := engine.Map(path)
	if err != nil {
		return nil, nil
	}
	hf, err := engine.Parse(head)
	cuda := err == nil && hf.HasCode(cudacode.Triple)
	unmap()
	if !cuda {
		return nil, nil
	}
	buf, err := os.ReadFile(path)
	if err != nil {
		return nil, nil
	}
	f, err := engine.Decode(buf)
	if err != nil || f.Code[cudacode.Triple] == nil {
		return nil, nil
	}
	if pubPath != "" {
		key, err := engine.ReadPublicKeyFile(pubPath)
		if err != nil {
			return nil, cli.FileError(pubPath, err)
		}
		if err := f.VerifySigner(key); err != nil {
			return nil, cli.FileError(path, err)
		}
	}
	e, err := cudart.LoadBytes(buf)
	if err != nil {
		return nil, cli.FileError(path, err)
	}
	return e, nil
}

// checkGPU is infer check for a CUDA engine.
func checkGPU(env *cli.Env, e *cudart.Engine, dir string, relL2 float64) error {
	feeds := map[string]*ir.Tensor{}
	for i, b := range e.Meta.Inputs {
		t, err := onnx.ReadTensorFile(filepath.Join(dir, fmt.Sprintf("input_%d.pb", i)))
		if err != nil {
			return err
		}
		feeds[b.Name] = t
	}
	outs, _, err := e.Run(feeds)
	if err != nil {
		return err
	}
	failed := false
	for i, b := range e.Meta.Outputs {
		want, err := onnx.ReadTensorFile(filepath.Join(dir, fmt.Sprintf("output_%d.pb", i)))
		if err != nil {
			return err
		}
		detail, ok := conformance.Compare(want, outs[b.Name], conformance.Tolerance{RelL2: relL2})
		status := "PASS"
		if !ok {
			status, failed = "FAIL", true
		}
		fmt.Fprintf(env.Stdout, "%s %s: %s (%s, %s)\n", status, b.Name, detail, e.Device, e.Code)
	}
	if failed {
		return cli.Exit(1)
	}
	return nil
}

// gpuReport is infer bench's report for a CUDA engine: trtexec's split
// of each run into host-to-device copies, compute and device-to-host
// copies (medians, in ms, from events on the stream).
type gpuReport struct {
	report
	Device string  `json:"device"`
	Code   string  `json:"code"`
	H2DMS  float64 `json:"h2d_ms"`
	GPUMS  float64 `json:"compute_ms"`
	D2HMS  float64 `json:"d2h_ms"`
}

// benchGPU is infer bench for a CUDA engine, on random inputs.
func benchGPU(env *cli.Env, e *cudart.Engine, path string, loadMS float64, warmup, duration time.Duration, iterations int, asJSON bool) error {
	feeds := map[string]*ir.Tensor{}
	for i, b := range e.Meta.Inputs {
		t, err := randomTensor(b.DType, b.Shape, int64(i+1))
		if err != nil {
			return err
		}
		feeds[b.Name] = t
	}
	first := time.Now()
	if _, _, err := e.Run(feeds); err != nil {
		return err
	}
	firstMS := ms(time.Since(first))
	for end := time.Now().Add(warmup); time.Now().Before(end); {
		if _, _, err := e.Run(feeds); err != nil {
			return err
		}
	}
	var lat, h2d, gpu, d2h []float64
	start := time.Now()
	for i := 0; iterations > 0 && i < iterations || iterations == 0 && time.Since(start) < duration; i++ {
		t0 := time.Now()
		_, tm, err := e.Run(feeds)
		if err != nil {
			return err
		}
		lat = append(lat, ms(time.Since(t0)))
		h2d, gpu, d2h = append(h2d, ms(tm.H2D)), append(gpu, ms(tm.Compute)), append(d2h, ms(tm.D2H))
	}
	median := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[len(s)/2]
	}
	r := gpuReport{report: summarize(lat, time.Since(start)), Device: e.Device, Code: e.Code,
		H2DMS: median(h2d), GPUMS: median(gpu), D2HMS: median(d2h)}
	r.Engine, r.Threads, r.LoadMS, r.FirstRunMS, r.PeakRSS = path, 1, loadMS, firstMS, peakRSS()
	if asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	r.print(env)
	fmt.Fprintf(env.Stdout, "GPU: %s (%s)   H2D: %.4f ms   Compute: %.4f ms   D2H: %.4f ms (medians)\n", r.Device, r.Code, r.H2DMS, r.GPUMS, r.D2HMS)
	return nil
}
