package text

import (
	"encoding/binary"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, src, want string }{
		{"syntax", "g (float[2] x) => (float[2] y) {\n  y = Relu(x\n}", `m.onnxtxt:3:1: unexpected token "}" (expected ")"`},
		{"syntax in header", "<ir_version 8> g () => () {}", `m.onnxtxt:1:13: unexpected token "8" (expected ":"`},
		{"undefined", "g (float[2] x) => (float[2] y) {\n  y = Add(x, z)\n}", `m.onnxtxt:2:14: undefined value "z" (input of node (Add))`},
		{"undefined output", "g (float[2] x) => (float[2] y) {}", `m.onnxtxt:1:29: graph output "y" is not defined`},
		{"defined twice", "g (float x) => () {\n  a = Relu(x)\n  a = Neg(x)\n}", `m.onnxtxt:3:3: value "a" is defined twice`},
		{"outer scope ends", "g (bool c) => () {\n  y = If(c) <then_branch = t () => (float u) { u = Constant <value_float = 1.0> () }, else_branch = e () => () {}>\n  z = Relu(u)\n}", `m.onnxtxt:3:12: undefined value "u"`},
		{"short literal", "g () => () <float[2,2] w = {1, 2, 3}> {}", `m.onnxtxt:1:28: float[2 2] needs 4 values, found 3 (initializer "w")`},
		{"long literal", "g () => () <int64[1] w = {1, 2}> {}", `m.onnxtxt:1:26: int64[1] needs 1 values, found 2`},
		{"unclosed literal", "g () => () <float[2] w = {1, 2> {}", `m.onnxtxt:1:31: expected '}' to close tensor data, found '>'`},
		{"literal commas", "g () => () <float[2] w = {1 2}> {}", `m.onnxtxt:1:29: expected ',', found 2`},
		{"range", "g () => () <int8[1] w = {128}> {}", `m.onnxtxt:1:26: 128 is out of range for 8-bit integers`},
		{"float for int", "g () => () <int32[1] w = {1.5}> {}", `m.onnxtxt:1:27: expected an integer, found 1.5`},
		{"symbolic data", "g () => () <float[N] w = {1}> {}", `tensor data needs numeric dims`},
		{"bad dtype", "g (seq(floot) x) => () {}", `unexpected token "floot"`},
		{"missing external", `g () => () <float[2] w = ["location": "nope.bin"]> {}`, `m.onnxtxt:1:26: external data "nope.bin": open nope.bin: no such file`},
		{"escaping external", `g () => () <float[2] w = ["location": "../w.bin"]> {}`, `must be a relative path inside the model's directory`},
		{"external length", `g () => () <float[2] w = ["location": "w.bin", "length": "4"]> {}`, `external data length 4, want 8`},
		{"empty list", "g () => () { y = C <v = []> () }", `empty list attribute "v" needs a kind annotation`},
		{"mixed list", `g () => () { y = C <v = [1, "a"]> () }`, `attribute "v" mixes ints with string`},
		{"annotation", `g () => () { y = C <v: int = "a"> () }`, `attribute "v" is annotated int but holds a string`},
		{"unknown field", `<ir_versoin: 8> g () => () {}`, `m.onnxtxt:1:2: unknown model field "ir_versoin"`},
		{"opaque", `g (opaque(x.y) v) => () {}`, `opaque types are not supported`},
		{"names need commas", `g (float x) => () { y = Add(x x) }`, `m.onnxtxt:1:31: expected ',' before x`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(filepath.Join(dir, "m.onnxtxt"), []byte(tc.src))
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			msg := strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), "")
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("error %q\nwant it to contain %q", msg, tc.want)
			}
		})
	}
}

func TestExternalShortFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "w.bin"), make([]byte, 6), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Parse(filepath.Join(dir, "m.onnxtxt"), []byte(`g () => () <float[2] w = ["location": "w.bin"]> {}`))
	if err == nil || !strings.Contains(err.Error(), `external data "w.bin" has 6 bytes, need 8 at offset 0`) {
		t.Fatalf("got %v", err)
	}
}

func TestPrintErrors(t *testing.T) {
	g := ir.NewGraph("g")
	g.SparseInitializers = []*ir.SparseTensor{{}}
	if _, err := Print(ir.NewModel(g, 17)); err == nil || !strings.Contains(err.Error(), "sparse initializers") {
		t.Errorf("sparse initializer: got %v", err)
	}
	g = ir.NewGraph("g")
	n := g.AddNode("Op", nil, 1)
	n.Domain = "my-domain"
	if _, err := Print(ir.NewModel(g, 17)); err == nil || !strings.Contains(err.Error(), "not a dotted identifier") {
		t.Errorf("domain: got %v", err)
	}
}

// TestFloatBits checks that every float, double, float16 and bfloat16
// prints as text that reads back to the same bits (NaNs of float and double
// to the canonical NaN of their sign, as documented).
func TestFloatBits(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	const n = 20000
	specials32 := []uint32{0, 1 << 31, 1, 0x7f7fffff, 0x00800000, 0x007fffff, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000}
	specials64 := []uint64{0, 1 << 63, 1, 0x7fefffffffffffff, 0x000fffffffffffff, 0x7ff0000000000000, 0x7ff8000000000000, 0xfff8000000000000}
	for _, dtype := range []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16} {
		size := dtype.Size()
		raw := make([]byte, n*size)
		rng.Read(raw)
		for i, s := range specials32 {
			if dtype == ir.Float32 {
				binary.LittleEndian.PutUint32(raw[4*i:], s)
			}
		}
		for i, s := range specials64 {
			if dtype == ir.Float64 {
				binary.LittleEndian.PutUint64(raw[8*i:], s)
			}
		}
		want := ir.FromRaw(dtype, []int64{n}, raw)
		if dtype == ir.Float32 || dtype == ir.Float64 {
			canonicalizeNaNs(want)
		}
		want.Name = "t"
		g := ir.NewGraph("g")
		g.AddInitializer("t", want)
		m := ir.NewModel(g, 17)
		s, err := Print(m)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse("bits", []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		if d := ir.Diff(m, back); d != "" {
			got := back.Graph.Initializers[0].Const.Raw
			for i := 0; i < len(raw); i += size {
				if string(got[i:i+size]) != string(want.Raw[i:i+size]) {
					t.Fatalf("%s element %d: % x != % x", dtype, i/size, got[i:i+size], want.Raw[i:i+size])
				}
			}
			t.Fatalf("%s: %s", dtype, d)
		}
	}
}

func canonicalizeNaNs(t *ir.Tensor) {
	if t.DType == ir.Float32 {
		for i, f := range t.Float32s() {
			if f != f {
				t.Float32s()[i] = math.Float32frombits(0x7fc00000 | math.Float32bits(f)&(1<<31))
			}
		}
		return
	}
	d := ir.Data[uint64](t)
	for i, b := range d {
		if f := math.Float64frombits(b); f != f {
			d[i] = 0x7ff8000000000000 | b&(1<<63)
		}
	}
}

// FuzzParse checks that no input makes Parse (or printing what it accepts)
// panic, and that what it accepts prints and parses back.
func FuzzParse(f *testing.F) {
	paths, _ := filepath.Glob("../../testdata/text/*")
	for _, p := range paths {
		if src, err := os.ReadFile(p); err == nil {
			f.Add(src)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		m, err := Parse("fuzz.onnxtxt", src)
		if err != nil {
			return
		}
		s, err := Print(m)
		if err != nil {
			return // e.g. an unprintable op domain
		}
		if _, err := Parse("printed.onnxtxt", []byte(s)); err != nil {
			t.Fatalf("printer output does not parse: %v\n%s", err, s)
		}
	})
}
