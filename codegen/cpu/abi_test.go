package cpu

import (
	"debug/elf"
	"slices"
	"testing"

	"github.com/kiln-ml/kiln/cpuabi"
	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/frontend/text"
	"github.com/kiln-ml/kiln/ir"
)

// The shared object's kiln_abi record, read back from the ELF file as the
// loader reads it, states what the Result says the code needs: the weights
// blob, the arena, the step count, the features and each io slot.
func TestABIRecord(t *testing.T) {
	needLLC(t)
	tiny, err := text.ParseFile("../../runtime/testdata/tiny.onnxtxt")
	if err != nil {
		t.Fatal(err)
	}
	cnn, err := onnx.ReadFile("../../testdata/models/digits_cnn.onnx")
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]*ir.Model{"tiny": tiny, "digits_cnn": cnn} {
		t.Run(name, func(t *testing.T) {
			res, err := Compile(optimize(t, m), Options{Winograd: WinogradOff})
			if err != nil {
				t.Fatal(err)
			}
			abi, err := cpuabi.ReadABI(res.SharedObject, elf.EM_X86_64)
			if err != nil {
				t.Fatal(err)
			}
			if abi.Version != cpuabi.ABIVersion || abi.StoredBytes != int64(len(res.Weights)) || abi.ArenaBytes != res.ArenaBytes ||
				abi.Steps != len(res.Kernels) || !slices.Equal(abi.Features, res.Features) {
				t.Fatalf("record %+v; result: weights %d, arena %d, %d kernels, features %v",
					abi, len(res.Weights), res.ArenaBytes, len(res.Kernels), res.Features)
			}
			if len(abi.Slots) != len(res.Inputs)+len(res.Outputs) {
				t.Fatalf("%d io slots, the result has %d inputs and %d outputs", len(abi.Slots), len(res.Inputs), len(res.Outputs))
			}
			for output, ios := range map[bool][]IO{false: res.Inputs, true: res.Outputs} {
				for _, io := range ios {
					s := abi.Slots[io.Index]
					want := int64(ir.RawLen(io.DType, ir.Product(io.Dims)))
					if s.Output != output || s.DType != io.DType.String() || !slices.Equal(s.Dims, io.Dims) || s.Bytes != want {
						t.Errorf("slot %d %+v, the result's %q is %s%v (%d bytes)", io.Index, s, io.Name, io.DType, io.Dims, want)
					}
				}
			}
			if res.ArenaBytes == 0 || len(res.Weights) == 0 {
				t.Fatalf("the model should need an arena and weights (arena %d, weights %d)", res.ArenaBytes, len(res.Weights))
			}
		})
	}
}
