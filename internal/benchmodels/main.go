// Command benchmodels writes the benchmark's generated models: ONNX files
// of architecture families the zoo lacks (ResNet-50, EfficientNet-B0,
// GoogLeNet, MobileNetV3-Small, ConvNeXt stages, VGG-16), built through
// the ir builder with seeded random He-initialized weights, each in the
// zoo's layout so `infer check`, `make bench` (internal/bench --extra) and
// ONNX Runtime's script read them as they read the zoo:
//
//	DIR/NAME/model.onnx
//	DIR/NAME/test_data_set_0/input_0.pb   random N(0,1) input
//	DIR/NAME/test_data_set_0/output_0.pb  the reference executor's output
//	DIR/NAME/meta.json                    input and output, parameters, op histogram, seed
//
// Usage: go run ./internal/benchmodels -o DIR [--models a,b] [--size N] [--seed S]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime/reference"
)

func main() {
	out := flag.String("o", "", "folder to write the models into (required)")
	models := flag.String("models", "", "comma-separated families (default: all of them)")
	size := flag.Int64("size", 0, "input height and width (default: each family's benchmark size)")
	seed := flag.Int64("seed", 1, "seed of the weights and inputs")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: benchmodels -o DIR [flags]\nfamilies: %s\n", strings.Join(familyNames(), ", "))
		flag.PrintDefaults()
	}
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if *size < 0 || *size > 4096 {
		fatalf("--size %d: want a height and width from 1 to 4096", *size)
	}
	fams := families
	if *models != "" {
		fams = nil
		for _, name := range strings.Split(*models, ",") {
			f, ok := familyByName(strings.TrimSpace(name))
			if !ok {
				fatalf("--models: no family %q; the families are %s", name, strings.Join(familyNames(), ", "))
			}
			fams = append(fams, f)
		}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fatalf("%v", err)
	}
	for i, f := range fams {
		s := f.size
		if *size > 0 {
			s = *size
		}
		m, err := write(*out, f, *seed+int64(i), s)
		if err != nil {
			fatalf("%v", err)
		}
		fmt.Printf("%s: %d×%d, %d parameters, %d nodes\n", f.name, s, s, m.Params, m.Nodes)
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "benchmodels: "+format+"\n", args...)
	os.Exit(1)
}

func familyNames() []string {
	var names []string
	for _, f := range families {
		names = append(names, f.name)
	}
	return names
}

// tensorInfo describes a model's input or output in meta.json, as the zoo's do.
type tensorInfo struct {
	Name  string  `json:"name"`
	DType string  `json:"dtype"`
	Shape []int64 `json:"shape"`
}

// meta is a generated model's meta.json: the fields the zoo's have that
// apply (internal/bench reads the input's dtype and shape).
type meta struct {
	Name    string         `json:"name"`
	Kind    string         `json:"kind"`
	Input   tensorInfo     `json:"input"`
	Output  tensorInfo     `json:"output"`
	Opset   int            `json:"opset"`
	Seed    int64          `json:"seed"`
	Params  int64          `json:"onnx_initializer_params"`
	Bytes   int            `json:"onnx_bytes"`
	Nodes   int            `json:"onnx_nodes"`
	OpTypes map[string]int `json:"op_types"`
	Weights string         `json:"weights"`
	Test    string         `json:"test_data_set_0"`
}

// generated is one family built and run: its model, input and the
// reference executor's output.
type generated struct {
	model         *ir.Model
	input, output *ir.Tensor
	net           *net
}

// generate builds family f at the given input size and runs the whole
// model on the reference executor for its expected output.
func generate(f family, seed, size int64) (*generated, error) {
	b, y := f.build(seed, size)
	m, err := b.model(y)
	if err != nil {
		return nil, err
	}
	e, err := reference.New(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.name, err)
	}
	res, err := e.Run(map[string]*ir.Tensor{"input": b.input})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.name, err)
	}
	return &generated{model: m, input: b.input, output: res["output"], net: b}, nil
}

// params counts the elements of a model's initializers.
func params(m *ir.Model) int64 {
	var n int64
	for _, v := range m.Graph.Initializers {
		n += v.Const.Len()
	}
	return n
}

// write generates family f into dir/NAME, replacing what was there only
// once the new folder is complete.
func write(dir string, f family, seed, size int64) (*meta, error) {
	gen, err := generate(f, seed, size)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(dir, "."+f.name+"-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	modelBytes, err := onnx.Write(gen.model)
	if err != nil {
		return nil, err
	}
	gen.input.Name, gen.output.Name = "input", "output"
	in, err := onnx.WriteTensor(gen.input)
	if err != nil {
		return nil, err
	}
	out, err := onnx.WriteTensor(gen.output)
	if err != nil {
		return nil, err
	}
	ops := map[string]int{}
	for _, n := range gen.model.Graph.Nodes {
		ops[n.OpType]++
	}
	m := &meta{
		Name: f.name, Kind: "generated by internal/benchmodels",
		Input:  tensorInfo{"input", "float32", gen.input.Dims},
		Output: tensorInfo{"output", "float32", gen.output.Dims},
		Opset:  opset, Seed: seed, Params: params(gen.model), Bytes: len(modelBytes),
		Nodes: len(gen.model.Graph.Nodes), OpTypes: ops,
		Weights: "random: He-normal weights, PyTorch's default bias init; batch-norm statistics estimated on the test input, " +
			map[bool]string{true: "folded into the convs", false: "kept as BatchNormalization nodes"}[gen.net.foldBN],
		Test: "random N(0,1) input from the seed; output from kiln's reference executor",
	}
	metaBytes, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return nil, err
	}
	if err := os.Mkdir(filepath.Join(tmp, "test_data_set_0"), 0o755); err != nil {
		return nil, err
	}
	for name, data := range map[string][]byte{
		"model.onnx":                  modelBytes,
		"meta.json":                   append(metaBytes, '\n'),
		"test_data_set_0/input_0.pb":  in,
		"test_data_set_0/output_0.pb": out,
	} {
		if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
			return nil, err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, err
	}
	final := filepath.Join(dir, f.name)
	if err := os.RemoveAll(final); err != nil {
		return nil, err
	}
	return m, os.Rename(tmp, final)
}
