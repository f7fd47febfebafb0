package kernel

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/internal/opcase"
	"github.com/kiln-ml/kiln/ir"
)

// TestSmallFloatEncodingAgreesWithIR: the thresholds derived from
// ir.EncodeSmallFloat (ir.EncodeFloat8E8M0) round as ir does, on random
// float32 and float64 bit patterns (every sign, binade, NaN and
// infinity) and at every threshold, for each type, saturate and round
// mode.
func TestSmallFloatEncodingAgreesWithIR(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for _, d := range smallTypes {
		if !d.IsSmallFloat() {
			continue
		}
		for _, saturate := range []bool{true, false} {
			for _, mode := range []ir.RoundMode{ir.RoundUp, ir.RoundDown, ir.RoundNearest} {
				key := encodingKey{d, saturate, mode}
				if d != ir.Float8E8M0 {
					if mode != ir.RoundUp {
						continue
					}
				}
				e, err := encodingOf(d, saturate, mode)
				if err != nil {
					t.Fatal(err)
				}
				xs := []float64{math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64}
				for _, b := range ir.Data[float64](e.bounds) {
					xs = append(xs, b, -b, math.Nextafter(b, 0), math.Nextafter(b, math.Inf(1)))
				}
				for range 20000 {
					xs = append(xs, float64(math.Float32frombits(r.Uint32())), math.Float64frombits(r.Uint64()))
				}
				for _, x := range xs {
					if got, want := e.apply(x), key.encodeRef(x); got != want {
						t.Fatalf("%s (saturate %v, mode %d): %g (%#x) gives %#x, ir %#x", d, saturate, mode, x, math.Float64bits(x), got, want)
					}
				}
			}
		}
	}
}

// TestSmallTypeCasesCompile: every case of the small types
// (internal/opcase's cases_smalltypes.go) of an op the layer defines
// builds and matches the reference on the evaluator; none is refused,
// which TestEveryOpOnTheEvaluator would pass over. Each op that moves
// data has cases of every small type.
func TestSmallTypeCasesCompile(t *testing.T) {
	cases := opcase.Cases()
	n := 0
	moved := map[string]map[ir.DType]bool{}
	for _, op := range Ops() {
		r := rand.New(rand.NewSource(seedOf(op)))
		for _, line := range cases[op] {
			if !mentionsSmallType(line) {
				continue
			}
			c, err := opcase.Parse(line)
			if err != nil {
				t.Fatal(err)
			}
			types := []ir.DType{ir.Undefined}
			if c.Types() {
				types = smallTypes
			}
			for _, d := range types {
				n++
				switch res := runCase(c, d, r, nil); {
				case res.refused:
					t.Errorf("%.120s [T=%s]: refused", line, d)
				case res.err != nil:
					t.Errorf("%.120s [T=%s]: %v", line, d, res.err)
				default:
					if moved[op] == nil {
						moved[op] = map[ir.DType]bool{}
					}
					moved[op][res.dtype] = true
				}
			}
		}
	}
	if n < 100 {
		t.Errorf("%d small-type cases, want the whole table", n)
	}
	for _, op := range []string{"Transpose", "Slice", "Pad", "Concat", "Split", "Expand", "Tile", "DepthToSpace", "SpaceToDepth", "Gather"} {
		for _, d := range smallTypes {
			if !moved[op][d] {
				t.Errorf("%s: no passing case of %s", op, d)
			}
		}
	}
}

func mentionsSmallType(line string) bool {
	for _, d := range smallTypes {
		if strings.Contains(line, d.String()+"[") || strings.Contains(line, d.String()+"=") {
			return true
		}
	}
	return false
}

// TestPackedOutputBytes: a packed output's kernel runs over its bytes,
// whose unused high bits (past the last element) are 0, as the
// reference writes them.
func TestPackedOutputBytes(t *testing.T) {
	out := NewBuffer("y", ir.Int2, 5)
	k := storeCodes(out, And(CastTo(Var(0), ir.Uint8), IntConst(ir.Uint8, 3)))
	if got, ok := k.Out.Static(); !ok || len(got) != 1 || got[0] != 2 || k.Out.DType != ir.Uint8 {
		t.Fatalf("kernel writes %s %v, want 2 bytes", k.Out.DType, got)
	}
	y := ir.NewTensor(ir.Int2, 5)
	for i := range y.Raw {
		y.Raw[i] = 0xff
	}
	if err := RunKernel(k, map[*Buffer]*ir.Tensor{k.Out: {DType: ir.Uint8, Dims: []int64{2}, Raw: y.Raw}}, nil, Schedule{Axis: -1}); err != nil {
		t.Fatal(err)
	}
	// Codes 0 1 2 3 | 0, two bits each from the low end.
	if y.Raw[0] != 0b11100100 || y.Raw[1] != 0 {
		t.Errorf("bytes %08b, want 11100100 00000000", y.Raw)
	}
}
