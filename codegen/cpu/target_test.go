package cpu

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

func TestNormalizeTriple(t *testing.T) {
	for in, want := range map[string]string{
		"x86_64-linux-gnu": TripleX86, "x86_64-unknown-linux-gnu": TripleX86, "amd64-linux": TripleX86,
		"aarch64-linux-gnu": TripleARM64, "aarch64-unknown-linux-gnu": TripleARM64, "arm64-linux-gnu": TripleARM64,
	} {
		got, err := NormalizeTriple(in)
		if err != nil || got != want {
			t.Errorf("NormalizeTriple(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "riscv64-linux-gnu", "aarch64-apple-darwin", "x86_64-pc-windows-msvc"} {
		if _, err := NormalizeTriple(bad); err == nil || !strings.Contains(err.Error(), "aarch64-linux-gnu") {
			t.Errorf("NormalizeTriple(%q) = %v, want an error naming the targets", bad, err)
		}
	}
}

// TestARM64CPUTable: llc knows every AArch64 CPU the table names, and
// accepts the dot-product intrinsics for exactly the CPUs the table gives
// them (asimddp: sdot; i8mm: usdot), so an engine never records a feature
// its code could not use, nor leaves out one it uses.
func TestARM64CPUTable(t *testing.T) {
	llc, err := findLLC("")
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	compiles := func(cpu, intrinsic string) bool {
		src := filepath.Join(dir, cpu+intrinsic+".ll")
		ir := "declare <4 x i32> @llvm.aarch64.neon." + intrinsic + ".v4i32.v16i8(<4 x i32>, <16 x i8>, <16 x i8>)\n" +
			"define <4 x i32> @f(<4 x i32> %a, <16 x i8> %b, <16 x i8> %c) {\n" +
			"  %r = call <4 x i32> @llvm.aarch64.neon." + intrinsic + ".v4i32.v16i8(<4 x i32> %a, <16 x i8> %b, <16 x i8> %c)\n" +
			"  ret <4 x i32> %r\n}\n"
		if err := os.WriteFile(src, []byte(ir), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(llc, "-mtriple="+TripleARM64, "-mcpu="+cpu, "-o", os.DevNull, src).CombinedOutput()
		if strings.Contains(string(out), "not a recognized processor") {
			t.Errorf("llc does not know -mcpu=%s: %s", cpu, out)
		}
		return err == nil
	}
	for _, cpu := range ARM64CPUs() {
		feats, err := featuresFor(Options{Triple: TripleARM64, CPU: cpu})
		if err != nil {
			t.Fatal(err)
		}
		if !hasFeature(feats, "asimd") {
			t.Errorf("%s: features %v lack asimd", cpu, feats)
		}
		if got, want := compiles(cpu, "sdot"), hasFeature(feats, "asimddp"); got != want {
			t.Errorf("%s: llc compiles sdot: %v, the table says asimddp: %v", cpu, got, want)
		}
		if got, want := compiles(cpu, "usdot"), hasFeature(feats, "i8mm"); got != want {
			t.Errorf("%s: llc compiles usdot: %v, the table says i8mm: %v", cpu, got, want)
		}
	}
}

// TestARM64Code: an AArch64 build is an AArch64 shared object whose
// kernels use NEON (fmla on 4 floats) and none of x86's instructions, and
// whose spin barrier yields with YIELD and svc, not PAUSE and syscall.
func TestARM64Code(t *testing.T) {
	if err := AvailableFor(TripleARM64); err != nil {
		t.Skip(err)
	}
	g := ir.NewGraph("t")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(64, 64)))
	w := g.AddInitializer("w", ir.NewTensor(ir.Float32, 64, 64))
	g.SetOutputs(g.Apply("Relu", []*ir.Value{g.Apply("MatMul", []*ir.Value{x, w})}))
	res, err := Compile(ir.NewModel(g, 17), Options{Triple: "aarch64-linux-gnu", CPU: "cortex-a76"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.LLVMIR, "llvm.aarch64.hint") || !strings.Contains(res.LLVMIR, "svc #0") || strings.Contains(res.LLVMIR, "llvm.x86") {
		t.Error("the AArch64 barrier should spin with llvm.aarch64.hint and yield with svc, and no x86 intrinsic may appear")
	}
	if !strings.Contains(res.LLVMIR, "<4 x float>") {
		t.Error("no 4-lane float vectors in the AArch64 code")
	}
	if len(res.SharedObject) < 20 || res.SharedObject[18] != 183 { // e_machine EM_AARCH64
		t.Errorf("the shared object is not AArch64 (e_machine %v)", res.SharedObject[18:20])
	}
	if res.Features[0] != "asimd" || !hasFeature(res.Features, "asimddp") {
		t.Errorf("features %v, want asimd and asimddp for cortex-a76", res.Features)
	}
}
