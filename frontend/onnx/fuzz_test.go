package onnx

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

// FuzzRead checks that no input makes the readers panic, and that whatever
// reads successfully also writes and reads back unchanged.
func FuzzRead(f *testing.F) {
	seed, err := Write(featureModel())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(externalModel("w.bin"))
	f.Add(tensorProto(ir.Float16, []int64{2}, packedVarints(tensorInt32Data, 0x3c00, 1)))
	// Small shared models with subgraphs, sequences and odd dtypes, where
	// they are installed.
	for _, name := range []string{"onnx-node/test_if_seq", "onnx-node/test_loop11", "onnx-node/test_scan9_sum",
		"onnx-node/test_cast_FLOAT_to_BFLOAT16", "zoo/digits_mlp"} {
		if b, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", name, "model.onnx")); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if tensor, err := ReadTensor(data); err == nil {
			if _, err := WriteTensor(tensor); err != nil {
				t.Fatalf("a tensor that reads does not write: %v", err)
			}
		}
		m, err := Read(data, "")
		if err != nil {
			return
		}
		_ = m.Verify()
		b, err := Write(m)
		if err != nil {
			t.Fatalf("a model that reads does not write: %v", err)
		}
		m2, err := Read(b, "")
		if err != nil {
			t.Fatalf("a written model does not read back: %v", err)
		}
		if d := ir.Diff(m, m2); d != "" {
			t.Fatalf("round trip differs: %s", d)
		}
	})
}
