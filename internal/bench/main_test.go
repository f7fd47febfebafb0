package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	writeTable(&b, []row{
		{Model: "resnet18", Precision: "fp32", Threads: 1, Kiln: 18.2, ORT: 16.1, Check: "PASS", GFLOP: 3.64},
		{Model: "resnet18", Precision: "int8", Threads: 1, Kiln: 7.28, ORT: 14.56, FP32: 18.2, Check: "cosine 0.9993 with FP32", GFLOP: 3.64},
		{Model: "digits_mlp", Precision: "fp32", Threads: 2, Kiln: 0.0021, ORT: 0.007, Check: "PASS"},
		{Model: "lstm_small", Precision: "fp32", Threads: 1, Check: "build failed: unsupported"},
	})
	want := `| model | precision | threads | kiln ms | ORT ms | kiln / ORT | INT8 speed-up | kiln GFLOP/s | check |
|---|---|---:|---:|---:|---:|---:|---:|---|
| resnet18 | fp32 | 1 | 18.20 | 16.10 | 1.13× |  | 200 | PASS |
| resnet18 | int8 | 1 | 7.28 | 14.56 | 0.50× | 2.50× | 500 | cosine 0.9993 with FP32 |
| digits_mlp | fp32 | 2 | 0.0021 | 0.0070 | 0.30× |  |  | PASS |
| lstm_small | fp32 | 1 | — | — | — |  |  | build failed: unsupported |
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestFloat32Models(t *testing.T) {
	zoo := t.TempDir()
	for name, meta := range map[string]string{
		"a_float":   `{"input": {"dtype": "float32"}}`,
		"b_int8":    `{"input": {"dtype": "int8"}}`,
		"c_no_meta": "",
	} {
		dir := filepath.Join(zoo, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "model.onnx"), []byte("x"), 0o644)
		if meta != "" {
			os.WriteFile(filepath.Join(dir, "meta.json"), []byte(meta), 0o644)
		}
	}
	os.MkdirAll(filepath.Join(zoo, "d_data_only"), 0o755)
	got, err := float32Models(zoo)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a_float", "c_no_meta"}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("float32Models = %v, want %v", got, want)
	}
}

func TestListModelsExtra(t *testing.T) {
	zoo, extra := t.TempDir(), t.TempDir()
	for dir, names := range map[string][]string{zoo: {"resnet18", "shared"}, extra: {"googlenet", "shared", "efficientnet_b0"}} {
		for _, name := range names {
			os.MkdirAll(filepath.Join(dir, name), 0o755)
			os.WriteFile(filepath.Join(dir, name, "model.onnx"), []byte("x"), 0o644)
		}
	}
	models, inExtra, err := listModels(zoo, extra, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"resnet18", "shared", "efficientnet_b0", "googlenet"}; !slices.Equal(models, want) {
		t.Fatalf("listModels = %v, want %v (the zoo's, then the extra folder's not in the zoo)", models, want)
	}
	o := options{zoo: zoo, extra: extra, inExtra: inExtra}
	for m, want := range map[string]string{"resnet18": zoo, "shared": zoo, "googlenet": extra} {
		if got := o.zooOf(m); got != want {
			t.Errorf("zooOf(%s) = %s, want %s", m, got, want)
		}
	}
	models, inExtra, err = listModels(zoo, extra, "googlenet,resnet18")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(models, []string{"googlenet", "resnet18"}) || !inExtra["googlenet"] || inExtra["resnet18"] {
		t.Errorf("--models googlenet,resnet18: got %v, extra %v", models, inExtra)
	}
	if models, _, _ := listModels(zoo, "", ""); !slices.Equal(models, []string{"resnet18", "shared"}) {
		t.Errorf("without --extra: %v, want the zoo's alone", models)
	}
}
