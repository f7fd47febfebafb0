package build

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

// A model with an input float[2147483648,2147483648] once built ("tensors
// total 0") and crashed the runtime; now the build stops at inference,
// naming the value and the limit. Nothing here needs llc: the build fails
// before code generation.
func TestBuildRefusesHugeValues(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, src, want string }{
		{"input", `g (float[2147483648,2147483648] x) => (float[2147483648,2147483648] y) { y = Relu (x) }`,
			`input "x" (float[2147483648,2147483648]): its size in bytes overflows int64`},
		{"expand", `g (float[1] x) => (float[2147483648,2147483648] y) <int64[2] s = {2147483648, 2147483648}> { y = Expand (x, s) }`,
			`output "y" (float[2147483648,2147483648]): its size in bytes overflows int64`},
		{"2^33", `g (float[8589934592] x) => (float[8589934592] y) { y = Relu (x) }`,
			`input "x" (float[8589934592]) is 34359738368 bytes (32 GiB), over the tensor limit of 17179869184 bytes (16 GiB) (--max-tensor-bytes raises it)`},
		{"2^61", `g (float[2305843009213693952] x) => (float[2305843009213693952] y) { y = Relu (x) }`, "overflows int64"},
		{"opset 99", `g (float[2] x) => (float[2] y) { y = Relu (x) }`, `opset 99 for domain "": kiln supports up to 26`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opset := "17"
			if tc.name == "opset 99" {
				opset = "99"
			}
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".onnxtxt")
			src := `<ir_version: 8, opset_import: ["" : ` + opset + `]>` + "\n" + tc.src + "\n"
			if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Build(path, Options{OptLevel: 2})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant it to contain %q", err, tc.want)
			}
			if tc.name != "opset 99" && !errors.Is(err, ir.ErrLimit) {
				t.Errorf("%v is not an ir.ErrLimit", err)
			}
		})
	}
}

func TestBuildLimitsFromOptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.onnxtxt")
	src := "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[1024] x) => (float[1024] y) { y = Relu (x) }\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Build(path, Options{OptLevel: 2, Limits: ir.Limits{MaxFileBytes: 10}})
	if !errors.Is(err, ir.ErrLimit) || !strings.Contains(err.Error(), "over the file limit of 10 bytes") {
		t.Errorf("a lowered file limit: %v", err)
	}
	_, err = Build(path, Options{OptLevel: 2, Limits: ir.Limits{MaxTensorBytes: 4095}})
	if !errors.Is(err, ir.ErrLimit) || !strings.Contains(err.Error(), `input "x" (float[1024]) is 4096 bytes`) {
		t.Errorf("a lowered tensor limit: %v", err)
	}
}
