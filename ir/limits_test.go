package ir

import (
	"errors"
	"math"
	"math/big"
	"math/rand"
	"strings"
	"testing"
)

// TestByteSizeAgainstBigInt checks ByteSize against exact big-integer
// arithmetic on random shapes, many of them near or past int64.
func TestByteSizeAgainstBigInt(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	dtypes := []DType{Float32, Float64, Uint8, Int4, Complex128, String, Float16}
	for i := 0; i < 5000; i++ {
		dims := make([]int64, rng.Intn(5))
		for k := range dims {
			switch rng.Intn(4) {
			case 0:
				dims[k] = rng.Int63n(8)
			case 1:
				dims[k] = int64(1) << rng.Intn(63)
			default:
				dims[k] = rng.Int63n(1 << uint(rng.Intn(40)+1))
			}
		}
		dt := dtypes[rng.Intn(len(dtypes))]
		want := big.NewInt(1)
		for _, d := range dims {
			want.Mul(want, big.NewInt(d))
		}
		countFits := want.IsInt64()
		switch s := dt.Size(); {
		case s > 0:
			want.Mul(want, big.NewInt(int64(s)))
		case s < 0:
			want.Add(want, big.NewInt(1)).Div(want, big.NewInt(2))
		default:
			want.SetInt64(0)
		}
		got, err := ByteSize(dt, dims)
		if !countFits || !want.IsInt64() {
			if !errors.Is(err, ErrSizeOverflow) {
				t.Fatalf("ByteSize(%s, %v) = %d, %v; want an overflow error", dt, dims, got, err)
			}
			continue
		}
		if err != nil || got != want.Int64() {
			t.Fatalf("ByteSize(%s, %v) = %d, %v; want %s", dt, dims, got, err, want)
		}
	}
}

func TestByteSizeEdges(t *testing.T) {
	for _, c := range []struct {
		dt   DType
		dims []int64
		want int64
		err  error
	}{
		{Float32, nil, 4, nil},
		{Float32, []int64{1 << 31, 1 << 31}, 0, ErrSizeOverflow}, // 2^62 elements, 2^64 bytes
		{Float32, []int64{1 << 61}, 0, ErrSizeOverflow},
		{Float32, []int64{1 << 33}, 1 << 35, nil},
		{Uint8, []int64{math.MaxInt64}, math.MaxInt64, nil},
		{Float32, []int64{1 << 62, 1 << 62, 0}, 0, nil}, // empty despite the overflowing prefix
		{Float32, []int64{1 << 62, 1 << 62, -1}, 0, ErrNegativeDim},
		{Float32, []int64{3, -2}, 0, ErrNegativeDim},
		{Int4, []int64{7}, 4, nil},
	} {
		got, err := ByteSize(c.dt, c.dims)
		if got != c.want || !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("ByteSize(%s, %v) = %d, %v; want %d, %v", c.dt, c.dims, got, err, c.want, c.err)
		}
	}
}

func TestCheckTensorMessages(t *testing.T) {
	var l Limits // zero: defaults
	_, err := l.CheckTensor(`value "y"`, Float32, []int64{2147483648, 2147483648})
	var le *LimitError
	if !errors.As(err, &le) || !errors.Is(err, ErrLimit) {
		t.Fatalf("got %v, want a *LimitError", err)
	}
	for _, want := range []string{`value "y"`, "float[2147483648,2147483648]", "overflows", "17179869184 bytes (16 GiB)", FlagMaxTensorBytes} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	_, err = l.CheckTensor(`input "x"`, Float32, []int64{1 << 33})
	if err == nil || !strings.Contains(err.Error(), "34359738368 bytes (32 GiB), over the tensor limit of 17179869184 bytes (16 GiB)") {
		t.Errorf("got %v", err)
	}
	// Raising the limit admits it.
	if n, err := (Limits{MaxTensorBytes: 1 << 36}).CheckTensor("x", Float32, []int64{1 << 33}); err != nil || n != 1<<35 {
		t.Errorf("raised limit: %d, %v", n, err)
	}
	if _, err := l.CheckTensor("s", String, []int64{1 << 40}); !errors.Is(err, ErrLimit) {
		t.Errorf("a string tensor of 2^40 elements: %v", err)
	}
	if err := l.CheckType("v", TensorType(Float32, ShapeOf(Sym("N"), D(1<<62)))); err != nil {
		t.Errorf("a dynamic shape is checked at run time, not here: %v", err)
	}
	if err := l.CheckType("v", TensorType(Float32, S(1<<62))); !errors.Is(err, ErrLimit) {
		t.Errorf("static [2^62]: %v", err)
	}
}

func TestLimitsDefaults(t *testing.T) {
	l := Limits{MaxTensorBytes: 5}.OrDefaults()
	if l.MaxTensorBytes != 5 || l.MaxArenaBytes != DefaultMaxArenaBytes || l.MaxFileBytes != DefaultMaxFileBytes || l.MaxNesting != DefaultMaxNesting {
		t.Errorf("OrDefaults: %+v", l)
	}
	if err := l.CheckArena("arena", -1); err == nil || !strings.Contains(err.Error(), "overflows") {
		t.Errorf("an overflowed arena: %v", err)
	}
	if err := l.CheckFile("f.onnx", DefaultMaxFileBytes+1); err == nil || !strings.Contains(err.Error(), FlagMaxFileBytes) {
		t.Errorf("CheckFile: %v", err)
	}
	if err := l.NestingError("a.onnxtxt:3:1"); err == nil || !strings.Contains(err.Error(), "nested deeper than 64 levels") {
		t.Errorf("NestingError: %v", err)
	}
	if AddSizes(math.MaxInt64, 1) != -1 || AddSizes(2, 3) != 5 {
		t.Error("AddSizes")
	}
}

func TestNewTensorRefusesOverflow(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "overflows") {
			t.Errorf("recovered %v, want an overflow panic", r)
		}
	}()
	NewTensor(Float32, 1<<31, 1<<31) // 2^64 bytes: once silently 0 bytes
}
