package onnx

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/ir"
	"google.golang.org/protobuf/encoding/protowire"
)

// tensorProto encodes a TensorProto with the given dtype and dims, then the
// fields data appends.
func tensorProto(dtype ir.DType, dims []int64, data func([]byte) []byte) []byte {
	b := appendPackedInts(nil, tensorDims, dims)
	b = appendIntAlways(b, tensorDataType, int64(dtype))
	b = appendString(b, tensorName, "t")
	return data(b)
}

func packedVarints(num protowire.Number, vs ...int64) func([]byte) []byte {
	return func(b []byte) []byte { return appendPackedInts(b, num, vs) }
}

// unpackedVarints writes one field per element, as proto2 writers
// (including onnx's Python helper) do.
func unpackedVarints(num protowire.Number, vs ...int64) func([]byte) []byte {
	return func(b []byte) []byte {
		for _, v := range vs {
			b = appendIntAlways(b, num, v)
		}
		return b
	}
}

func le32(vs ...float32) []byte {
	var b []byte
	for _, v := range vs {
		b = protowire.AppendFixed32(b, math.Float32bits(v))
	}
	return b
}

func TestTensorDataFields(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dtype ir.DType
		dims  []int64
		data  func([]byte) []byte
		raw   []byte
	}{
		{"float raw_data", ir.Float32, []int64{2}, func(b []byte) []byte {
			return protowire.AppendBytes(protowire.AppendTag(b, tensorRawData, protowire.BytesType), le32(1, -2))
		}, le32(1, -2)},
		{"float_data packed", ir.Float32, []int64{2}, func(b []byte) []byte {
			return protowire.AppendBytes(protowire.AppendTag(b, tensorFloatData, protowire.BytesType), le32(1, -2))
		}, le32(1, -2)},
		{"float_data unpacked", ir.Float32, []int64{2}, func(b []byte) []byte {
			for _, v := range []float32{1, -2} {
				b = protowire.AppendFixed32(protowire.AppendTag(b, tensorFloatData, protowire.Fixed32Type), math.Float32bits(v))
			}
			return b
		}, le32(1, -2)},
		{"complex64 float_data", ir.Complex64, []int64{1}, func(b []byte) []byte {
			return protowire.AppendBytes(protowire.AppendTag(b, tensorFloatData, protowire.BytesType), le32(1, -2))
		}, le32(1, -2)},
		{"double_data", ir.Float64, []int64{1}, func(b []byte) []byte {
			return protowire.AppendFixed64(protowire.AppendTag(b, tensorDoubleData, protowire.Fixed64Type), math.Float64bits(0.5))
		}, protowire.AppendFixed64(nil, math.Float64bits(0.5))},
		{"float16 int32_data", ir.Float16, []int64{2}, unpackedVarints(tensorInt32Data, 0x3c00, 0xc000), []byte{0x00, 0x3c, 0x00, 0xc0}},
		{"bfloat16 int32_data", ir.BFloat16, []int64{1}, packedVarints(tensorInt32Data, 0x3f80), []byte{0x80, 0x3f}},
		{"int8 int32_data", ir.Int8, []int64{3}, packedVarints(tensorInt32Data, -3, 0, 127), []byte{0xfd, 0, 127}},
		{"uint8 int32_data", ir.Uint8, []int64{2}, unpackedVarints(tensorInt32Data, 255, 1), []byte{255, 1}},
		{"int16 int32_data", ir.Int16, []int64{1}, packedVarints(tensorInt32Data, -2), []byte{0xfe, 0xff}},
		{"bool int32_data", ir.Bool, []int64{3}, packedVarints(tensorInt32Data, 1, 0, 1), []byte{1, 0, 1}},
		{"float8 int32_data", ir.Float8E4M3FN, []int64{1}, packedVarints(tensorInt32Data, 0x38), []byte{0x38}},
		{"int4 int32_data", ir.Int4, []int64{3}, packedVarints(tensorInt32Data, 0x21, 0x03), []byte{0x21, 0x03}},
		{"float4e2m1 int32_data", ir.Float4E2M1, []int64{2}, packedVarints(tensorInt32Data, 0x9f), []byte{0x9f}},
		{"int2 int32_data", ir.Int2, []int64{5}, packedVarints(tensorInt32Data, 0xe4, 0x03), []byte{0xe4, 0x03}},
		{"uint2 int32_data", ir.Uint2, []int64{4}, packedVarints(tensorInt32Data, 0x1b), []byte{0x1b}},
		{"float8e8m0 int32_data", ir.Float8E8M0, []int64{2}, packedVarints(tensorInt32Data, 0x7f, 0xff), []byte{0x7f, 0xff}},
		{"int32 int32_data", ir.Int32, []int64{1}, packedVarints(tensorInt32Data, -1), []byte{0xff, 0xff, 0xff, 0xff}},
		{"int64_data", ir.Int64, []int64{2}, unpackedVarints(tensorInt64Data, -1, 2), append(bytes.Repeat([]byte{0xff}, 8), 2, 0, 0, 0, 0, 0, 0, 0)},
		{"uint32 uint64_data", ir.Uint32, []int64{1}, packedVarints(tensorUint64Data, 0xdeadbeef), []byte{0xef, 0xbe, 0xad, 0xde}},
		{"uint64_data", ir.Uint64, []int64{1}, packedVarints(tensorUint64Data, -1), bytes.Repeat([]byte{0xff}, 8)},
		{"empty", ir.Float32, []int64{0, 3}, func(b []byte) []byte { return b }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadTensor(tensorProto(tc.dtype, tc.dims, tc.data))
			if err != nil {
				t.Fatal(err)
			}
			if got.DType != tc.dtype || !bytes.Equal(got.Raw, tc.raw) || got.Name != "t" {
				t.Fatalf("got %s %v raw %x, want %s raw %x", got.DType, got.Dims, got.Raw, tc.dtype, tc.raw)
			}
			b, err := WriteTensor(got)
			if err != nil {
				t.Fatal(err)
			}
			again, err := ReadTensor(b)
			if err != nil {
				t.Fatal(err)
			}
			if !again.Equal(got) {
				t.Fatal("tensor round trip differs")
			}
		})
	}
}

func TestStringTensor(t *testing.T) {
	b := tensorProto(ir.String, []int64{2}, func(b []byte) []byte {
		b = appendStringAlways(b, tensorStringData, "héllo")
		return appendStringAlways(b, tensorStringData, "")
	})
	got, err := ReadTensor(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Strings) != 2 || got.Strings[0] != "héllo" || got.Strings[1] != "" {
		t.Fatalf("got %q", got.Strings)
	}
}

func TestTensorErrors(t *testing.T) {
	raw := func(n int) func([]byte) []byte {
		return func(b []byte) []byte {
			return protowire.AppendBytes(protowire.AppendTag(b, tensorRawData, protowire.BytesType), make([]byte, n))
		}
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"raw_data too short", tensorProto(ir.Float32, []int64{3}, raw(8)), "raw_data has 8 bytes, want 12 for float[3]"},
		{"typed count", tensorProto(ir.Int64, []int64{3}, packedVarints(tensorInt64Data, 1)), "int64_data has 1 entries, want 3"},
		{"no data", tensorProto(ir.Float32, []int64{2}, func(b []byte) []byte { return b }), "no data for float[2]"},
		{"unknown dtype", tensorProto(99, nil, raw(4)), "unknown element type 99"},
		{"no dtype", appendString(nil, tensorName, "t"), "no data_type"},
		{"negative dim", tensorProto(ir.Float32, []int64{-2}, raw(0)), "negative dimension"},
		{"huge dims", tensorProto(ir.Float32, []int64{1 << 40, 1 << 40}, raw(0)), "data (float[1099511627776,1099511627776]): its size in bytes overflows int64"},
		{"over the tensor limit", tensorProto(ir.Float32, []int64{1 << 33}, raw(0)), "data (float[8589934592]) is 34359738368 bytes (32 GiB), over the tensor limit"},
		{"wrong field for dtype", tensorProto(ir.Float32, []int64{1}, packedVarints(tensorInt64Data, 1)), "int64_data cannot hold float data"},
		{"two data fields", tensorProto(ir.Float32, []int64{1}, func(b []byte) []byte {
			return packedVarints(tensorInt32Data, 1)(raw(4)(b))
		}), "data in both raw_data and int32_data"},
		{"segment", tensorProto(ir.Float32, nil, func(b []byte) []byte {
			return appendMessage(b, tensorSegment, func(b []byte) []byte { return b })
		}), "segmented tensors are not supported"},
		{"external without folder", tensorProto(ir.Float32, []int64{1}, external("w.bin", 0, 4)), "no model folder"},
		{"truncated", tensorProto(ir.Float32, []int64{3}, raw(12))[:10], "malformed protobuf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadTensor(tc.data)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestWriteTensorRejectsBadData(t *testing.T) {
	_, err := WriteTensor(&ir.Tensor{Name: "w", DType: ir.Float32, Dims: []int64{2}, Raw: make([]byte, 4)})
	if err == nil || !strings.Contains(err.Error(), `tensor "w": 4 bytes of data for float[2], want 8`) {
		t.Fatalf("got %v", err)
	}
}

// external returns the fields of a tensor stored in file loc.
func external(loc string, offset, length int) func([]byte) []byte {
	return func(b []byte) []byte {
		b = appendPairs(b, tensorExternalData, []ir.StringPair{
			{Key: "location", Value: loc}, {Key: "offset", Value: strconv.Itoa(offset)}, {Key: "length", Value: strconv.Itoa(length)},
		})
		return appendIntAlways(b, tensorDataLocation, 1)
	}
}

// externalModel is a model whose one initializer, w: float[3], lives in
// the file loc at offset 8.
func externalModel(loc string) []byte {
	b := appendIntAlways(nil, modelIRVersion, 8)
	b = appendMessage(b, modelGraph, func(b []byte) []byte {
		b = appendMessage(b, graphNode, func(b []byte) []byte {
			b = appendStringAlways(b, nodeInput, "w")
			b = appendStringAlways(b, nodeOutput, "y")
			return appendString(b, nodeOpType, "Identity")
		})
		b = appendString(b, graphName, "g")
		b = appendMessage(b, graphInitializer, func(b []byte) []byte {
			b = appendPackedInts(b, tensorDims, []int64{3})
			b = appendIntAlways(b, tensorDataType, int64(ir.Float32))
			b = appendString(b, tensorName, "w")
			return external(loc, 8, 12)(b)
		})
		return appendMessage(b, graphOutput, func(b []byte) []byte { return appendString(b, 1, "y") })
	})
	return appendMessage(b, modelOpsetImport, func(b []byte) []byte { return appendIntAlways(b, 2, 17) })
}

func TestExternalData(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.onnx"), externalModel("weights/w.bin"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "weights"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "weights", "w.bin"), append(make([]byte, 8), le32(1, 2, 3)...), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := ReadFile(filepath.Join(dir, "m.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(); err != nil {
		t.Fatal(err)
	}
	if got := m.Graph.Initializers[0].Const.Float32s(); len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Fatalf("read %v from external data", got)
	}
	// Written back, the weights are inline and read without a folder.
	b, err := Write(m)
	if err != nil {
		t.Fatal(err)
	}
	inline, err := Read(b, "")
	if err != nil {
		t.Fatal(err)
	}
	if d := ir.Diff(m, inline); d != "" {
		t.Fatal(d)
	}
}

func TestExternalDataErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "short.bin"), make([]byte, 10), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ loc, want string }{
		{"missing.bin", "missing.bin: no such file"},
		{"short.bin", "short.bin is too short: has 10 bytes, needs 12 at offset 8"},
		{"../escape.bin", `location "../escape.bin" is outside the model's folder`},
	} {
		_, err := Read(externalModel(tc.loc), dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `tensor "w"`) {
			t.Errorf("%s: got %v, want an error about tensor \"w\" containing %q", tc.loc, err, tc.want)
		}
	}
	if _, err := Read(externalModel("w.bin"), ""); err == nil || !strings.Contains(err.Error(), "no model folder") {
		t.Errorf("without a folder: got %v", err)
	}
}
