package onnx

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

// sharedDir returns ../shared/<sub> relative to the repository root, or
// skips the test where the shared models are not installed.
func sharedDir(t testing.TB, sub string) string {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "shared", sub)
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("%s not present: %v", dir, err)
	}
	return dir
}

func sharedModels(t *testing.T, sub string) []string {
	paths, err := filepath.Glob(filepath.Join(sharedDir(t, sub), "*", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Skipf("no models in %s", sub)
	}
	return paths
}

func TestRoundTripZoo(t *testing.T)      { roundTripAll(t, sharedModels(t, "zoo")) }
func TestRoundTripONNXNode(t *testing.T) { roundTripAll(t, sharedModels(t, "onnx-node")) }

func roundTripAll(t *testing.T, paths []string) {
	for _, path := range paths {
		t.Run(filepath.Base(filepath.Dir(path)), func(t *testing.T) {
			t.Parallel()
			roundTrip(t, path)
		})
	}
}

// roundTrip checks Read → Write → Read is the identity on the ir, that
// writing is deterministic, and that the test data tensors round-trip too.
func roundTrip(t *testing.T, path string) {
	m, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(); err != nil {
		t.Fatalf("Verify after Read: %v", err)
	}
	b, err := Write(m)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := Read(b, "")
	if err != nil {
		t.Fatalf("reading back: %v", err)
	}
	if d := ir.Diff(m, m2); d != "" {
		t.Fatalf("round trip differs: %s", d)
	}
	b2, err := Write(m2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, b2) {
		t.Fatalf("writing the re-read model gives different bytes (%d vs %d)", len(b), len(b2))
	}
	roundTripTestData(t, filepath.Dir(path), m.Graph)
}

// roundTripTestData round-trips every input_i.pb / output_i.pb whose graph
// input or output is a tensor, and checks its dtype matches the model's.
func roundTripTestData(t *testing.T, dir string, g *ir.Graph) {
	var inputs []*ir.Value
	for _, v := range g.Inputs {
		if v.Const == nil {
			inputs = append(inputs, v)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "test_data_set_*", "*put_*.pb"))
	for _, f := range files {
		base := strings.TrimSuffix(filepath.Base(f), ".pb")
		vs := inputs
		if strings.HasPrefix(base, "output_") {
			vs = g.Outputs
		}
		i := 0
		for _, c := range base[strings.IndexByte(base, '_')+1:] {
			i = i*10 + int(c-'0')
		}
		if i >= len(vs) || vs[i].Type.Kind != ir.TensorKind {
			continue // sequences, optionals and maps use other protos
		}
		want, err := ReadTensorFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// ONNX 1.12 stored its bfloat16 test data as uint16.
		bf16Quirk := vs[i].Type.Elem == ir.BFloat16 && want.DType == ir.Uint16
		if el := vs[i].Type.Elem; el != ir.Undefined && want.DType != el && !bf16Quirk {
			t.Fatalf("%s: dtype %s, model declares %s", f, want.DType, el)
		}
		b, err := WriteTensor(want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ReadTensor(b)
		if err != nil {
			t.Fatalf("%s: reading back: %v", f, err)
		}
		if !got.Equal(want) {
			t.Fatalf("%s: tensor round trip differs", f)
		}
	}
}

func TestResNet18Parameters(t *testing.T) {
	path := filepath.Join(sharedDir(t, "zoo"), "resnet18", "model.onnx")
	m, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var params int64
	for _, v := range m.Graph.Initializers {
		params += v.Const.Len()
	}
	if params != 11_684_712 {
		t.Fatalf("resnet18 has %d parameters in initializers, want 11684712", params)
	}
}

// TestReadCopiesWeightsOnce checks that Read allocates little more than the
// weights themselves: raw_data is subsliced from the input, then copied once.
func TestReadCopiesWeightsOnce(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(sharedDir(t, "zoo"), "resnet18", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	m, err := Read(data, "")
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	var weights uint64
	for _, v := range m.Graph.Initializers {
		weights += uint64(len(v.Const.Raw))
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("Read allocated %d bytes for %d bytes of weights", alloc, weights)
	if alloc > weights+weights/10 {
		t.Fatalf("Read allocated %d bytes for %d bytes of weights", alloc, weights)
	}
}
